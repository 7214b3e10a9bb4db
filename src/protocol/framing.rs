//! Newline framing for stdio with a bound on line length: an overlong line is reported and
//! skipped up to its newline, and the stream carries on.

/// One step of output from the line splitter.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    Line(Vec<u8>),
    /// A line longer than the bound was dropped; `len` is how many bytes it had.
    Overlong {
        len: usize,
    },
}

/// Splits a byte stream into lines of at most `max_line` bytes.
#[derive(Debug)]
pub struct LineSplitter {
    buf: Vec<u8>,
    max_line: usize,
    skipping: Option<usize>,
}

impl LineSplitter {
    pub fn new(max_line: usize) -> Self {
        LineSplitter {
            buf: Vec::new(),
            max_line,
            skipping: None,
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
            } else if self.buf.len() + part.len() > self.max_line {
                self.skipping = Some(self.buf.len() + part.len());
                self.buf = Vec::new();
            } else {
                self.buf.extend_from_slice(part);
            }
            match rest {
                Some(rest) => {
                    if let Some(len) = self.skipping.take() {
                        out.push(Frame::Overlong { len });
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
            vec![Frame::Overlong { len: 10 }, Frame::Line(b"ok".to_vec())]
        );
    }
}
