//! Resumable POST streams (SSE resumability, SEP-1699). A forwarded call's frames are numbered
//! (event id `{stream}-{seq}`) and kept in its session until the host has been sent all of them,
//! so a host whose stream broke continues it with a GET carrying `Last-Event-ID`, and the call
//! is not lost with the connection. When an upstream polls (ends its stream before the response),
//! a host of protocol 2025-11-25 or later is asked to poll too: its stream ends after an event
//! carrying the upstream's `retry` delay, and the rest arrives on its resuming GET.
//!
//! Bounded: a session keeps at most [`MAX_STREAMS`] streams (the oldest is dropped first) and a
//! stream at most [`MAX_UNSENT_BYTES`] of frames nobody has read (older ones are dropped).

use super::forward::{ForwardedCall, Frame};
use super::session::Session;
use crate::protocol::sse;
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Streams a session keeps for resumption.
pub const MAX_STREAMS: usize = 64;
/// Frames a stream keeps that no host connection has taken yet.
pub const MAX_UNSENT_BYTES: usize = 16 << 20;
/// Reconnection delay announced to hosts in the priming event.
pub const ANNOUNCED_RETRY_MS: u64 = 1000;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One SSE event: optional id and retry, then the JSON (raw CR/LF, only ever insignificant
/// whitespace in JSON, become spaces so a frame is never split). Empty `json` gives an event
/// without payload (priming, or a request to poll).
pub fn event_bytes(id: Option<&str>, retry_ms: Option<u64>, json: &str) -> Bytes {
    let text = if json.contains(['\r', '\n']) {
        sse::encode_event(id, retry_ms, &json.replace(['\r', '\n'], " "))
    } else {
        sse::encode_event(id, retry_ms, json)
    };
    Bytes::from(text)
}

enum Entry {
    Frame(Arc<str>),
    /// The upstream polls; hosts that may poll are asked to reconnect after this delay.
    Pause(Option<u64>),
}

#[derive(Default)]
struct Buffer {
    /// Sequence number of `entries[0]`; sequence numbers start at 1 (0 is the priming event).
    first_seq: u64,
    entries: VecDeque<Entry>,
    bytes: usize,
    done: bool,
}

/// The frames of one forwarded call, shared by the task that runs the call and the host
/// connections (the POST response, then any resuming GETs) that read it.
pub struct CallStream {
    id: u64,
    buffer: Mutex<Buffer>,
    changed: Notify,
}

impl CallStream {
    fn push(&self, entry: Entry) {
        let mut buf = lock(&self.buffer);
        if let Entry::Frame(json) = &entry {
            buf.bytes += json.len();
        }
        buf.entries.push_back(entry);
        while buf.bytes > MAX_UNSENT_BYTES && buf.entries.len() > 1 {
            if let Some(Entry::Frame(json)) = buf.entries.pop_front() {
                buf.bytes -= json.len();
            }
            buf.first_seq += 1;
        }
        drop(buf);
        self.changed.notify_waiters();
    }

    fn finish(&self) {
        lock(&self.buffer).done = true;
        self.changed.notify_waiters();
    }

    /// Entries from sequence number `from` on, dropping the ones before it; and whether the
    /// call has ended.
    fn take_from(&self, from: u64) -> (Vec<(u64, Entry)>, bool) {
        let mut buf = lock(&self.buffer);
        while buf.first_seq < from && !buf.entries.is_empty() {
            if let Some(Entry::Frame(json)) = buf.entries.pop_front() {
                buf.bytes -= json.len();
            }
            buf.first_seq += 1;
        }
        let start = buf.first_seq.max(from);
        let out = buf
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| (buf.first_seq + i as u64, e))
            .filter(|(seq, _)| *seq >= start)
            .map(|(seq, e)| {
                let copy = match e {
                    Entry::Frame(json) => Entry::Frame(json.clone()),
                    Entry::Pause(ms) => Entry::Pause(*ms),
                };
                (seq, copy)
            })
            .collect();
        (out, buf.done)
    }
}

/// The resumable streams of one session.
#[derive(Default)]
pub struct CallStreams {
    next_id: AtomicU64,
    streams: Mutex<HashMap<u64, Arc<CallStream>>>,
}

impl CallStreams {
    fn open(&self) -> Arc<CallStream> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let stream = Arc::new(CallStream {
            id,
            buffer: Mutex::new(Buffer {
                first_seq: 1,
                ..Buffer::default()
            }),
            changed: Notify::new(),
        });
        let mut map = lock(&self.streams);
        while map.len() >= MAX_STREAMS {
            let Some(oldest) = map.keys().min().copied() else {
                break;
            };
            map.remove(&oldest);
        }
        map.insert(id, stream.clone());
        stream
    }

    fn remove(&self, id: u64) {
        lock(&self.streams).remove(&id);
    }

    /// The stream a `Last-Event-ID` points into, and the sequence number to continue after.
    pub fn find(&self, last_event_id: &str) -> Option<(Arc<CallStream>, u64)> {
        let (stream, seq) = last_event_id.trim().split_once('-')?;
        let (stream, seq) = (stream.parse::<u64>().ok()?, seq.parse::<u64>().ok()?);
        let found = lock(&self.streams).get(&stream).cloned()?;
        Some((found, seq))
    }

    pub fn clear(&self) {
        lock(&self.streams).clear();
    }
}

/// Whether a host of this protocol version understands priming events and being asked to poll.
fn may_poll(version: &str) -> bool {
    version >= "2025-11-25"
}

/// Run `call` to its end whatever happens to the host's connection, and return the body of
/// the POST response that streams it.
pub fn start(
    call: ForwardedCall,
    session: Arc<Session>,
    shutdown: CancellationToken,
) -> BoxStream<'static, Bytes> {
    let stream = session.streams.open();
    let writer = stream.clone();
    tokio::spawn(async move {
        let frames = call.into_frames();
        futures_util::pin_mut!(frames);
        while let Some(frame) = frames.next().await {
            writer.push(match frame {
                Frame::Message(json) => Entry::Frame(json),
                Frame::Pause { retry_ms } => Entry::Pause(retry_ms),
            });
        }
        writer.finish();
    });
    let priming = may_poll(&session.protocol_version);
    read(stream, 0, priming, session, shutdown)
}

/// The frames of `stream` after sequence number `after`, live until the call ends (or, for a
/// host that may poll, until the upstream polls).
pub fn read(
    stream: Arc<CallStream>,
    after: u64,
    priming: bool,
    session: Arc<Session>,
    shutdown: CancellationToken,
) -> BoxStream<'static, Bytes> {
    let polls = may_poll(&session.protocol_version);
    let frames = async_stream::stream! {
        let event_id = |seq: u64| format!("{}-{seq}", stream.id);
        if priming {
            yield event_bytes(Some(&event_id(0)), Some(ANNOUNCED_RETRY_MS), "");
        }
        let mut next = after + 1;
        loop {
            let changed = stream.changed.notified();
            let (entries, done) = stream.take_from(next);
            for (seq, entry) in entries {
                next = seq + 1;
                match entry {
                    Entry::Frame(json) => yield event_bytes(Some(&event_id(seq)), None, &json),
                    Entry::Pause(retry_ms) if polls => {
                        yield event_bytes(Some(&event_id(seq)), retry_ms, "");
                        return;
                    }
                    Entry::Pause(_) => {}
                }
            }
            if done {
                session.streams.remove(stream.id);
                return;
            }
            tokio::select! {
                _ = changed => {}
                _ = session.closed.cancelled() => return,
                _ = shutdown.cancelled() => return,
            }
        }
    };
    frames.boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(stream: &CallStream, from: u64) -> Vec<(u64, String)> {
        stream
            .take_from(from)
            .0
            .into_iter()
            .map(|(seq, e)| match e {
                Entry::Frame(json) => (seq, json.to_string()),
                Entry::Pause(ms) => (seq, format!("pause {ms:?}")),
            })
            .collect()
    }

    #[test]
    fn entries_are_numbered_from_one_and_resumed_after_an_id() {
        let streams = CallStreams::default();
        let s = streams.open();
        s.push(Entry::Frame("a".into()));
        s.push(Entry::Pause(Some(500)));
        s.push(Entry::Frame("b".into()));
        let id = format!("{}-2", s.id);
        let (found, after) = streams.find(&id).unwrap();
        assert_eq!(frames(&found, after + 1), vec![(3, "b".to_string())]);
        // What was resumed past is gone; a second resume from the start finds only what is left.
        assert_eq!(frames(&found, 1), vec![(3, "b".to_string())]);
        assert!(streams.find("nope").is_none() && streams.find(&format!("{}-x", s.id)).is_none());
    }

    #[test]
    fn a_session_keeps_a_bounded_number_of_streams() {
        let streams = CallStreams::default();
        let first = streams.open();
        for _ in 0..MAX_STREAMS {
            streams.open();
        }
        assert!(streams.find(&format!("{}-0", first.id)).is_none());
        assert_eq!(lock(&streams.streams).len(), MAX_STREAMS);
    }

    #[test]
    fn unread_frames_are_bounded() {
        let s = CallStreams::default().open();
        let big: Arc<str> = "x".repeat(MAX_UNSENT_BYTES / 2 + 1).into();
        for _ in 0..3 {
            s.push(Entry::Frame(big.clone()));
        }
        let kept = frames(&s, 0);
        assert_eq!(kept.len(), 1, "only the newest frame fits");
        assert_eq!(kept[0].0, 3);
    }

    #[test]
    fn events_carry_id_retry_and_one_line_of_data() {
        let bytes = event_bytes(Some("3-0"), Some(1000), "");
        assert_eq!(&bytes[..], b"id: 3-0\nretry: 1000\ndata: \n\n");
        let bytes = event_bytes(Some("3-1"), None, "{\"a\":\r\n1}");
        assert_eq!(&bytes[..], b"id: 3-1\ndata: {\"a\":  1}\n\n");
    }
}
