//! `mcpmux audit verify FILE`: walks the chain and names the first line that breaks it (edited,
//! removed, reordered, not JSON, cut short) and why. Exit status 0 intact, 1 broken, 2 unreadable.
//! A chain proves order and integrity from the first line on; lines cut from the end leave no
//! trace in the file itself (compare `lines_written` in `/status`, or keep the last hash elsewhere).

use super::chain::{hash, GENESIS};
use std::io::BufRead;
use std::path::Path;

/// An intact file.
#[derive(Debug, PartialEq, Eq)]
pub struct Intact {
    pub lines: usize,
    pub last_seq: Option<u64>,
    /// The hash of the last line (what the next line's `prev` will be).
    pub last_hash: Option<String>,
}

/// The first bad line (1-based) and why.
#[derive(Debug, PartialEq, Eq)]
pub struct Broken {
    pub line: usize,
    pub why: String,
}

/// How far past a sequence jump `verify` looks for the missing number (to tell reordered
/// lines from removed ones).
const LOOKAHEAD_LINES: usize = 100_000;

/// Check the lines of a whole audit file held in memory.
pub fn verify(text: &[u8]) -> Result<Intact, Broken> {
    match verify_reader(text) {
        Ok(verdict) => verdict,
        Err(err) => Err(Broken {
            line: 0,
            why: err.to_string(),
        }),
    }
}

/// Check an audit file line by line (one line in memory at a time); `Err` when reading fails.
pub fn verify_reader(mut reader: impl BufRead) -> std::io::Result<Result<Intact, Broken>> {
    let mut expected_seq = 1;
    let mut expected_prev = GENESIS.to_string();
    let mut line = Vec::new();
    let mut n = 0;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        n += 1;
        if line.pop() != Some(b'\n') {
            let why = "cut short: the last line has no end of line".to_string();
            let why = match fields(&line) {
                Ok(_) => why,
                Err(not) => format!("{why} ({not})"),
            };
            return Ok(Err(Broken { line: n, why }));
        }
        let (seq, prev) = match fields(&line) {
            Ok(fields) => fields,
            Err(why) => return Ok(Err(Broken { line: n, why })),
        };
        if seq != expected_seq {
            let why = if seq > expected_seq && !comes_later(&mut reader, expected_seq)? {
                let gone = seq - expected_seq;
                format!("sequence number {seq} where {expected_seq} was expected: {gone} line(s) before it were removed")
            } else {
                format!("out of order: sequence number {seq} where {expected_seq} was expected (lines were reordered or repeated)")
            };
            return Ok(Err(Broken { line: n, why }));
        }
        if prev != expected_prev {
            return Ok(Err(match n {
                1 => Broken {
                    line: 1,
                    why: "its prev is not the genesis value: the file does not start where its chain starts"
                        .into(),
                },
                _ => Broken {
                    line: n - 1,
                    why: format!("edited: line {n} carries a different hash of it"),
                },
            }));
        }
        expected_seq = seq + 1;
        expected_prev = hash(&line);
    }
    Ok(Ok(Intact {
        lines: n,
        last_seq: (n > 0).then(|| expected_seq - 1),
        last_hash: (n > 0).then_some(expected_prev),
    }))
}

/// Whether a line with sequence number `seq` follows (within [`LOOKAHEAD_LINES`]).
fn comes_later(reader: &mut impl BufRead, seq: u64) -> std::io::Result<bool> {
    let mut line = Vec::new();
    for _ in 0..LOOKAHEAD_LINES {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(false);
        }
        if fields(line.trim_ascii_end()).is_ok_and(|(s, _)| s == seq) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A line's `seq` and `prev`, or why it is not an audit line.
fn fields(line: &[u8]) -> Result<(u64, String), String> {
    let value: serde_json::Value = serde_json::from_slice(line).map_err(|err| format!("not JSON: {err}"))?;
    let object = value.as_object().ok_or("not a JSON object")?;
    let seq = (object.get("seq").and_then(serde_json::Value::as_u64)).ok_or("no `seq` sequence number")?;
    let prev = (object.get("prev").and_then(serde_json::Value::as_str)).ok_or("no `prev` hash")?;
    Ok((seq, prev.to_string()))
}

/// The command: print the verdict; 0 intact, 1 broken, 2 unreadable.
pub fn command(path: &Path) -> u8 {
    let verdict = std::fs::File::open(path).and_then(|file| verify_reader(std::io::BufReader::new(file)));
    let verdict = match verdict {
        Ok(verdict) => verdict,
        Err(err) => {
            eprintln!("error: cannot read {}: {err}", path.display());
            return 2;
        }
    };
    match verdict {
        Ok(Intact {
            lines,
            last_seq,
            last_hash,
        }) => {
            let last = match (last_seq, last_hash) {
                (Some(seq), Some(hash)) => format!(", last seq {seq}, last hash {hash}"),
                _ => String::new(),
            };
            println!(
                "{}: OK, {lines} line(s) checked, the chain is intact{last}",
                path.display()
            );
            0
        }
        Err(Broken { line, why }) => {
            println!("{}: line {line}: {why}", path.display());
            1
        }
    }
}
