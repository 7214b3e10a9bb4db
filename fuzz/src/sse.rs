//! The `sse` target: `SseDecoder` (and the stdio `LineSplitter`) fed the same bytes in
//! arbitrary chunks, and `encode_event` decoded back.
//!
//! Input layout: byte 0 picks the size limit, byte 1 how many chunk boundaries follow, then one
//! byte per chunk length; the rest is the stream.

use super::Knobs;
use mcpmux::protocol::framing::{Frame, LineSplitter};
use mcpmux::protocol::sse::{encode_event, SseDecoder, SseError, SseEvent};

pub fn check_sse(data: &[u8]) {
    let mut knobs = Knobs::new(data);
    let limit = 1 + usize::from(knobs.byte() % 128);
    let cuts = usize::from(knobs.byte() % 16);
    let lengths: Vec<usize> = (0..cuts).map(|_| usize::from(knobs.byte())).collect();
    let stream = knobs.rest();
    let chunks = chunked(stream, &lengths);

    let whole = decode(limit, &[stream]);
    let pieces = decode(limit, &chunks);
    // The same events and the same error, whatever the chunking.
    assert_eq!(whole, pieces, "chunking changed the result");
    let bytewise: Vec<&[u8]> = stream.chunks(1).collect();
    assert_eq!(whole, decode(limit, &bytewise), "byte-by-byte changed the result");
    for event in &whole.0 {
        assert!(
            event.data.len() <= limit,
            "event of {} bytes over {limit}",
            event.data.len()
        );
        assert!(event
            .id
            .as_ref()
            .is_none_or(|id| id.len() <= limit && !id.contains('\0')));
        assert!(event.event.as_ref().is_none_or(|e| e.len() <= limit));
    }

    check_lines(limit, stream, &chunks);
    check_encode(stream, knobs.rest().first().copied().unwrap_or(0));
}

/// Split `stream` at the given lengths (0 means 1); the last chunk takes the rest.
fn chunked<'a>(mut stream: &'a [u8], lengths: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    for &len in lengths {
        let (head, tail) = stream.split_at(len.max(1).min(stream.len()));
        out.push(head);
        stream = tail;
    }
    out.push(stream);
    out
}

/// Decode chunk by chunk until the first error.
fn decode(limit: usize, chunks: &[&[u8]]) -> (Vec<SseEvent>, Option<SseError>) {
    let mut decoder = SseDecoder::new(limit);
    let mut events = Vec::new();
    for chunk in chunks {
        if let Err(err) = decoder.push(chunk, &mut events) {
            return (events, Some(err));
        }
    }
    (events, None)
}

/// Newline framing for stdio: the same frames whatever the chunking, lines within the bound.
fn check_lines(limit: usize, stream: &[u8], chunks: &[&[u8]]) {
    let split = |chunks: &[&[u8]]| {
        let mut splitter = LineSplitter::new(limit);
        let mut frames = Vec::new();
        for chunk in chunks {
            splitter.push(chunk, &mut frames);
        }
        frames
    };
    let whole = split(&[stream]);
    assert_eq!(whole, split(chunks), "chunking changed the frames");
    let newlines = stream.iter().filter(|&&b| b == b'\n').count();
    assert_eq!(whole.len(), newlines, "one frame per newline");
    for frame in &whole {
        match frame {
            Frame::Line(line) => assert!(line.len() <= limit && !line.contains(&b'\n')),
            Frame::Overlong { len, .. } => assert!(*len > limit),
        }
    }
}

/// An encoded event decodes back to its id, retry and data. The id is the first line of the
/// input (the encoder's contract: no CR, LF or NUL in it); the data is the rest with CR removed
/// (LF splits it into several `data:` lines, which the decoder joins again).
fn check_encode(stream: &[u8], retry_byte: u8) {
    let text = String::from_utf8_lossy(stream);
    let (id, data) = match text.split_once('\n') {
        Some((first, rest)) => (Some(first.replace(['\r', '\0'], "")), rest.replace('\r', "")),
        None => (None, text.replace('\r', "")),
    };
    let retry = (retry_byte % 3 == 0).then(|| u64::from(retry_byte) * 1000);
    let encoded = encode_event(id.as_deref(), retry, &data);
    let (events, err) = decode(encoded.len() + 1, &[encoded.as_bytes()]);
    assert_eq!(err, None, "{encoded:?}");
    assert_eq!(events.len(), 1, "{encoded:?} gave {events:?}");
    assert_eq!(events[0].data, data);
    assert_eq!(events[0].id, id);
    assert_eq!(events[0].retry_ms, retry);
    assert_eq!(events[0].event, None);
}
