//! `mcpmux audit verify FILE`: walks the chain and names the first line that breaks it (edited,
//! removed, reordered, not JSON, cut short) and why. Exit status 0 intact, 1 broken, 2 unreadable.
//! A chain proves order and integrity from the first line on; lines cut from the end leave no
//! trace in the file itself (compare `lines_written` in `/status`, or keep the last hash elsewhere).

use super::chain::{hash, GENESIS};
use std::path::Path;

/// An intact file.
#[derive(Debug, PartialEq, Eq)]
pub struct Intact {
    pub lines: usize,
    pub last_seq: Option<u64>,
}

/// The first bad line (1-based) and why.
#[derive(Debug, PartialEq, Eq)]
pub struct Broken {
    pub line: usize,
    pub why: String,
}

/// Check the lines of a whole audit file.
pub fn verify(text: &[u8]) -> Result<Intact, Broken> {
    if text.is_empty() {
        return Ok(Intact {
            lines: 0,
            last_seq: None,
        });
    }
    let mut lines: Vec<&[u8]> = text.split(|b| *b == b'\n').collect();
    let complete = lines.pop().is_some_and(<[u8]>::is_empty);
    let mut parsed = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        parsed.push(fields(line).map_err(|why| Broken { line: i + 1, why })?);
    }
    let mut expected_seq = 1;
    let mut expected_prev = GENESIS.to_string();
    for (i, (seq, prev)) in parsed.iter().enumerate() {
        let n = i + 1;
        if *seq != expected_seq {
            let why = if parsed[i + 1..].iter().any(|(s, _)| *s == expected_seq) {
                format!("out of order: sequence number {seq} where {expected_seq} was expected (lines were reordered)")
            } else if *seq > expected_seq {
                let gone = seq - expected_seq;
                format!(
                    "sequence number {seq} where {expected_seq} was expected: {gone} line(s) before it were removed"
                )
            } else {
                format!("sequence number {seq} where {expected_seq} was expected (a line was repeated or reordered)")
            };
            return Err(Broken { line: n, why });
        }
        if *prev != expected_prev {
            return Err(match n {
                1 => Broken {
                    line: 1,
                    why: "its prev is not the genesis value: the file does not start where its chain starts"
                        .into(),
                },
                _ => Broken {
                    line: n - 1,
                    why: format!("edited: line {n} carries a different hash of it"),
                },
            });
        }
        expected_seq = seq + 1;
        expected_prev = hash(lines[i]);
    }
    if !complete {
        return Err(Broken {
            line: lines.len() + 1,
            why: "cut short: the last line has no end of line (not JSON)".into(),
        });
    }
    Ok(Intact {
        lines: parsed.len(),
        last_seq: parsed.last().map(|(seq, _)| *seq),
    })
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
    let text = match std::fs::read(path) {
        Ok(text) => text,
        Err(err) => {
            eprintln!("error: cannot read {}: {err}", path.display());
            return 2;
        }
    };
    match verify(&text) {
        Ok(Intact { lines, last_seq }) => {
            let last = last_seq.map(|s| format!(", last seq {s}")).unwrap_or_default();
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
