//! The hash chain: every line starts with its sequence number and the SHA-256 (hex) of the
//! previous line's bytes; the first line of a file carries [`GENESIS`]. A gateway that appends
//! to an existing file continues from its last line.

use super::record::Event;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// The `prev` of a file's first line.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Where the chain stands: the last line's sequence number and hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain {
    pub seq: u64,
    pub prev: String,
}

impl Default for Chain {
    fn default() -> Self {
        Chain {
            seq: 0,
            prev: GENESIS.to_string(),
        }
    }
}

/// The SHA-256 of a line (without its newline), lowercase hex.
pub fn hash(line: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, line);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

impl Chain {
    /// The next line for `event` (without its newline), and the chain moved past it.
    pub fn next_line(&mut self, event: &Event) -> Result<String, serde_json::Error> {
        let body = serde_json::to_string(event)?;
        let seq = self.seq + 1;
        // `body` is an object with at least `time`: the chain's fields go in front of its members.
        let line = format!("{{\"seq\":{seq},\"prev\":\"{}\",{}", self.prev, &body[1..]);
        self.seq = seq;
        self.prev = hash(line.as_bytes());
        Ok(line)
    }

    /// The chain of the file at `path`, to append to: from its last line, or fresh when the
    /// file is absent or empty. A last line that is not an audit line is an error (the file is
    /// damaged or not an audit log: appending would hide that).
    pub fn resume(path: &Path) -> Result<Chain, String> {
        let mut file = match std::fs::File::open(path) {
            // Only a regular file has lines to continue from (not /dev/stdout, a FIFO, /dev/full).
            Ok(file) if file.metadata().is_ok_and(|m| !m.is_file()) => return Ok(Chain::default()),
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Chain::default()),
            Err(err) => return Err(format!("cannot read {}: {err}", path.display())),
        };
        let last = last_line(&mut file).map_err(|err| format!("cannot read {}: {err}", path.display()))?;
        let Some(last) = last else {
            return Ok(Chain::default());
        };
        let seq = serde_json::from_slice::<serde_json::Value>(&last)
            .ok()
            .and_then(|v| v.get("seq").and_then(serde_json::Value::as_u64));
        match seq {
            Some(seq) => Ok(Chain {
                seq,
                prev: hash(&last),
            }),
            None => Err(format!(
                "{}: its last line is not an audit line (no JSON object with a `seq`); check it with \
                 `mcpmux audit verify`, and move the file away to start a new chain",
                path.display()
            )),
        }
    }
}

/// The last line of `file` (without its newline), read from the end; `None` when it has no
/// line. A last line without a newline (a write cut short) is returned as it is.
fn last_line(file: &mut std::fs::File) -> std::io::Result<Option<Vec<u8>>> {
    let len = file.seek(SeekFrom::End(0))?;
    let mut window: u64 = 64 * 1024;
    loop {
        let start = len.saturating_sub(window);
        file.seek(SeekFrom::Start(start))?;
        let mut tail = Vec::new();
        file.read_to_end(&mut tail)?;
        let trimmed = match tail.last() {
            Some(b'\n') => &tail[..tail.len() - 1],
            _ => &tail[..],
        };
        match trimmed.iter().rposition(|b| *b == b'\n') {
            Some(at) => return Ok(Some(trimmed[at + 1..].to_vec())),
            None if start == 0 => return Ok((!trimmed.is_empty()).then(|| trimmed.to_vec())),
            None => window *= 4,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::record::Kind;

    fn event(method: &str) -> Event {
        Event {
            time: "2026-11-23T16:35:03.123Z".into(),
            event: Kind::Decision,
            method: method.into(),
            ..Event::default()
        }
    }

    #[test]
    fn each_line_carries_the_hash_of_the_one_before() {
        let mut chain = Chain::default();
        let first = chain.next_line(&event("tools/call")).expect("line");
        let second = chain.next_line(&event("resources/read")).expect("line");
        assert!(
            first.starts_with(&format!("{{\"seq\":1,\"prev\":\"{GENESIS}\",\"time\":")),
            "{first}"
        );
        let prev = hash(first.as_bytes());
        assert!(
            second.starts_with(&format!("{{\"seq\":2,\"prev\":\"{prev}\",")),
            "{second}"
        );
        assert_eq!(
            chain,
            Chain {
                seq: 2,
                prev: hash(second.as_bytes())
            }
        );
        assert_eq!(prev.len(), 64);
        let parsed: serde_json::Value = serde_json::from_str(&second).expect("JSON");
        assert_eq!(parsed["method"], "resources/read");
    }

    #[test]
    fn resuming_continues_from_the_last_line_of_the_file() {
        let dir = std::env::temp_dir().join(format!("mcpmux-chain-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("audit.jsonl");
        let _ = std::fs::remove_file(&path);
        assert_eq!(Chain::resume(&path), Ok(Chain::default()));
        std::fs::write(&path, "").expect("write");
        assert_eq!(Chain::resume(&path), Ok(Chain::default()));
        let mut chain = Chain::default();
        // A long line: the tail is read in growing windows.
        let mut big = event("tools/call");
        big.reason = Some("x".repeat(200_000));
        let lines = [
            chain.next_line(&event("a")).expect("line"),
            chain.next_line(&big).expect("line"),
        ];
        std::fs::write(&path, format!("{}\n{}\n", lines[0], lines[1])).expect("write");
        assert_eq!(Chain::resume(&path), Ok(chain.clone()));
        std::fs::write(&path, format!("{}\nnot json\n", lines[0])).expect("write");
        let refused = Chain::resume(&path).expect_err("not an audit line");
        assert!(refused.contains("not an audit line"), "{refused}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
