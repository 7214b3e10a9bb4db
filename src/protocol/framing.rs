//! Newline framing for stdio with a bound on line length: an overlong line is reported and
//! skipped up to its newline, and the stream carries on.

/// One step of output from the line splitter.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    Line(Vec<u8>),
    /// A line longer than the bound was dropped; `len` is how many bytes it had, `id` the
    /// response id its first or last bytes name (see [`overlong_response_id`]).
    Overlong {
        len: usize,
        id: Option<u64>,
    },
}

/// Bytes kept of each end of a dropped line to find its id.
const KEPT_END: usize = 256;

/// Splits a byte stream into lines of at most `max_line` bytes.
#[derive(Debug)]
pub struct LineSplitter {
    buf: Vec<u8>,
    max_line: usize,
    skipping: Option<usize>,
    /// The first and the latest bytes of the line being dropped.
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl LineSplitter {
    pub fn new(max_line: usize) -> Self {
        LineSplitter {
            buf: Vec::new(),
            max_line,
            skipping: None,
            head: Vec::new(),
            tail: Vec::new(),
        }
    }

    fn keep_tail(&mut self, part: &[u8]) {
        self.tail.extend_from_slice(part);
        if self.tail.len() > 2 * KEPT_END {
            self.tail.drain(..self.tail.len() - KEPT_END);
        }
    }

    /// Feed a chunk; complete lines (without the newline or a trailing `\r`) come out.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<Frame>) {
        while !chunk.is_empty() {
            let newline = chunk.iter().position(|&b| b == b'\n');
            let (part, rest) = match newline {
                Some(i) => (&chunk[..i], Some(&chunk[i + 1..])),
                None => (chunk, None),
            };
            if let Some(skipped) = self.skipping.as_mut() {
                *skipped += part.len();
                self.keep_tail(part);
            } else if self.buf.len() + part.len() > self.max_line {
                self.skipping = Some(self.buf.len() + part.len());
                let mut line = std::mem::take(&mut self.buf);
                line.extend_from_slice(&part[..part.len().min(KEPT_END)]);
                line.truncate(KEPT_END);
                self.head = line;
                self.tail.clear();
                self.keep_tail(part);
            } else {
                self.buf.extend_from_slice(part);
            }
            match rest {
                Some(rest) => {
                    if let Some(len) = self.skipping.take() {
                        let id = overlong_response_id(&self.head, &self.tail);
                        out.push(Frame::Overlong { len, id });
                    } else {
                        let mut line = std::mem::take(&mut self.buf);
                        if line.last() == Some(&b'\r') {
                            line.pop();
                        }
                        out.push(Frame::Line(line));
                    }
                    chunk = rest;
                }
                None => break,
            }
        }
    }
}

/// The numeric id of a JSON-RPC response of which only the first bytes (`head`) and the last
/// bytes (`tail`) are known: `{"jsonrpc":"2.0","id":7,...` as most SDKs write it, or
/// `...,"id":7}` at the very end, where only the outermost object can end.
pub fn overlong_response_id(head: &[u8], tail: &[u8]) -> Option<u64> {
    id_at_start(head).or_else(|| id_at_end(tail))
}

fn id_at_start(head: &[u8]) -> Option<u64> {
    let text = String::from_utf8_lossy(head);
    let mut rest = text.trim_start().strip_prefix('{')?;
    // Walk the leading members while their values are strings or numbers.
    for _ in 0..4 {
        let (key, after) = split_string(rest.trim_start())?;
        let value = after.trim_start().strip_prefix(':')?.trim_start();
        let next = if value.starts_with('"') {
            split_string(value)?.1
        } else {
            let end = value.find([',', '}'])?;
            let (number, next) = value.split_at(end);
            if key == "id" {
                return number.trim().parse().ok();
            }
            if number.contains(['{', '[']) {
                return None;
            }
            next
        };
        if key == "id" {
            return None;
        }
        rest = next.trim_start().strip_prefix(',')?;
    }
    None
}

/// A JSON string at the start of `text` (escapes kept) and what follows it.
fn split_string(text: &str) -> Option<(&str, &str)> {
    let body = text.strip_prefix('"')?;
    let mut escaped = false;
    for (i, c) in body.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Some((&body[..i], &body[i + 1..])),
            _ => {}
        }
    }
    None
}

fn id_at_end(tail: &[u8]) -> Option<u64> {
    let text = String::from_utf8_lossy(tail);
    let body = text.trim_end().strip_suffix('}')?.trim_end();
    let digits_start = body.rfind(|c: char| !c.is_ascii_digit())? + 1;
    let (before, digits) = body.split_at(digits_start);
    let before = before.trim_end().strip_suffix(':')?.trim_end();
    let before = before.strip_suffix("\"id\"")?.trim_end();
    if !before.ends_with(',') && !before.ends_with('{') {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_across_chunks() {
        let mut s = LineSplitter::new(100);
        let mut out = Vec::new();
        s.push(b"{\"a\"", &mut out);
        s.push(b":1}\n{}\r\n{", &mut out);
        assert_eq!(
            out,
            vec![Frame::Line(b"{\"a\":1}".to_vec()), Frame::Line(b"{}".to_vec())]
        );
    }

    #[test]
    fn overlong_line_is_skipped_and_stream_survives() {
        let mut s = LineSplitter::new(4);
        let mut out = Vec::new();
        s.push(b"ab", &mut out);
        s.push(b"cdefgh", &mut out);
        s.push(b"ij\nok\n", &mut out);
        assert_eq!(
            out,
            vec![Frame::Overlong { len: 10, id: None }, Frame::Line(b"ok".to_vec())]
        );
    }

    #[test]
    fn an_overlong_reply_is_known_by_the_id_at_either_end() {
        let mut s = LineSplitter::new(64);
        let mut out = Vec::new();
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":42,\"result\":\"{}\"}}\n",
            "x".repeat(5000)
        );
        s.push(big.as_bytes(), &mut out);
        assert_eq!(
            out,
            vec![Frame::Overlong {
                len: big.len() - 1,
                id: Some(42)
            }]
        );
        // Node's JSON.stringify order: the id comes last.
        assert_eq!(
            overlong_response_id(
                b"{\"result\":{\"content\":[{",
                b"xxxx\"}]},\"jsonrpc\":\"2.0\",\"id\":7}"
            ),
            Some(7)
        );
        // An id inside the result is not the response's.
        assert_eq!(
            overlong_response_id(b"{\"result\":{", b"\"item\":{\"id\":7}}}"),
            None
        );
        assert_eq!(overlong_response_id(b"{\"result\":{", b"xx\"id\":7}}"), None);
        assert_eq!(
            overlong_response_id(b"{\"jsonrpc\":\"a,\\\"id\\\":5\",\"id\":9,", b""),
            Some(9)
        );
        assert_eq!(
            overlong_response_id(b"{\"method\":\"notifications/message\",\"params\":{", b"}}"),
            None
        );
    }
}
