//! Server-Sent Events: an incremental decoder with a bound on event size, and the encoder.

use bytes::Bytes;

/// One decoded event. `data` lines are joined with `\n`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
    pub retry_ms: Option<u64>,
}

/// What the decoder could not accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("SSE event larger than {limit} bytes")]
    EventTooLarge { limit: usize },
    #[error("SSE stream is not valid UTF-8")]
    InvalidUtf8,
}

/// Feed bytes in any chunking; complete events come out.
#[derive(Debug)]
pub struct SseDecoder {
    line: Vec<u8>,
    pending: SseEvent,
    has_data: bool,
    event_bytes: usize,
    max_event_bytes: usize,
    last_was_cr: bool,
}

impl SseDecoder {
    pub fn new(max_event_bytes: usize) -> Self {
        SseDecoder {
            line: Vec::new(),
            pending: SseEvent::default(),
            has_data: false,
            event_bytes: 0,
            max_event_bytes,
            last_was_cr: false,
        }
    }

    /// Decode a chunk, appending finished events to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        for &byte in chunk {
            if self.last_was_cr {
                self.last_was_cr = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\n' => self.end_line(out)?,
                b'\r' => {
                    self.last_was_cr = true;
                    self.end_line(out)?;
                }
                _ => {
                    self.event_bytes += 1;
                    if self.event_bytes > self.max_event_bytes {
                        return Err(SseError::EventTooLarge {
                            limit: self.max_event_bytes,
                        });
                    }
                    self.line.push(byte);
                }
            }
        }
        Ok(())
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        let text = String::from_utf8(line).map_err(|_| SseError::InvalidUtf8)?;
        if text.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match text.find(':') {
            Some(i) => {
                let v = &text[i + 1..];
                (&text[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (text.as_str(), ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.pending.data.push('\n');
                }
                self.pending.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.pending.event = Some(value.to_string()),
            "id" if !value.contains('\0') => self.pending.id = Some(value.to_string()),
            "retry" => self.pending.retry_ms = value.parse().ok(),
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = std::mem::take(&mut self.pending);
        let had_data = std::mem::replace(&mut self.has_data, false);
        self.event_bytes = 0;
        if had_data || event.id.is_some() || event.retry_ms.is_some() {
            out.push(event);
        }
    }
}

/// Encode one `message` event carrying a JSON payload (which must not contain a newline).
pub fn encode_data(json: &str) -> String {
    encode_event(None, None, json)
}

/// Encode one event: its id and retry delay (milliseconds) if given, then the data lines. Empty
/// data gives an event that carries no message (a priming event).
pub fn encode_event(id: Option<&str>, retry_ms: Option<u64>, json: &str) -> String {
    let mut out = String::with_capacity(json.len() + 40);
    if let Some(id) = id {
        out.push_str("id: ");
        out.push_str(id);
        out.push('\n');
    }
    if let Some(ms) = retry_ms {
        out.push_str(&format!("retry: {ms}\n"));
    }
    for line in json.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out
}

/// One SSE event: optional id and retry, then the JSON (raw CR/LF, only ever insignificant
/// whitespace in JSON, become spaces so a frame is never split). Empty `json` gives an event
/// without payload (priming, or a request to poll).
pub fn event_bytes(id: Option<&str>, retry_ms: Option<u64>, json: &str) -> Bytes {
    let text = if json.contains(['\r', '\n']) {
        encode_event(id, retry_ms, &json.replace(['\r', '\n'], " "))
    } else {
        encode_event(id, retry_ms, json)
    };
    Bytes::from(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut dec = SseDecoder::new(1024);
        let mut out = Vec::new();
        for c in chunks {
            dec.push(c, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn priming_events_data_and_ids_in_any_chunking() {
        let stream = b"id: p1\ndata: \n\nevent: message\ndata: {\"a\":1}\nid: 2\n\n: keepalive\n\ndata: x\r\ndata: y\r\n\r\n";
        let whole = decode_all(&[stream]);
        let bytewise: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(whole, decode_all(&bytewise));
        assert_eq!(whole.len(), 3);
        assert_eq!(whole[0].id.as_deref(), Some("p1"));
        assert_eq!(whole[0].data, "");
        assert_eq!(whole[1].data, "{\"a\":1}");
        assert_eq!(whole[1].event.as_deref(), Some("message"));
        assert_eq!(whole[2].data, "x\ny");
    }

    #[test]
    fn oversized_events_are_refused() {
        let mut dec = SseDecoder::new(8);
        let mut out = Vec::new();
        assert!(dec.push(b"data: 0123456789\n\n", &mut out).is_err());
    }

    #[test]
    fn encoding_round_trips() {
        let mut dec = SseDecoder::new(1024);
        let mut out = Vec::new();
        dec.push(encode_data("{\"k\":\"v\"}").as_bytes(), &mut out)
            .unwrap();
        assert_eq!(out[0].data, "{\"k\":\"v\"}");
    }

    #[test]
    fn events_carry_id_retry_and_one_line_of_data() {
        let bytes = event_bytes(Some("3-0"), Some(1000), "");
        assert_eq!(&bytes[..], b"id: 3-0\nretry: 1000\ndata: \n\n");
        let bytes = event_bytes(Some("3-1"), None, "{\"a\":\r\n1}");
        assert_eq!(&bytes[..], b"id: 3-1\ndata: {\"a\":  1}\n\n");
    }
}
