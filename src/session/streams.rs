//! The resumable streams of one session's forwarded calls (SSE resumability, SEP-1699): each
//! call's frames, numbered and kept until a host has been sent them all, so a host whose stream
//! broke continues it with a GET carrying `Last-Event-ID` (a sealed id naming the stream and the
//! sequence number: `host_tokens`). Bounded: a session keeps at most
//! [`MAX_STREAMS`] streams (the oldest is dropped first), a finished one at most
//! [`KEEP_FINISHED`], and a stream at most [`MAX_KEPT_BYTES`] of frames (the oldest go first; the
//! newest is always kept). The HTTP side that writes them out is `http::resume`.

use crate::protocol::RequestId;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Streams a session keeps for resumption.
pub const MAX_STREAMS: usize = 64;
/// Frames a stream keeps that no host has acknowledged.
pub const MAX_KEPT_BYTES: usize = 16 << 20;
/// How long a finished stream that no host read to its end is kept for a resuming GET.
pub const KEEP_FINISHED: Duration = Duration::from_secs(60);

#[derive(Clone)]
pub enum Entry {
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
    /// When the call ended.
    finished: Option<Instant>,
}

impl Buffer {
    fn drop_oldest(&mut self) {
        if let Some(Entry::Frame(json)) = self.entries.pop_front() {
            self.bytes -= json.len();
        }
        self.first_seq += 1;
    }
}

/// The frames of one forwarded call, shared by the task that runs the call and the host
/// connections (the POST response, then any resuming GETs) that read it.
pub struct CallStream {
    pub id: u64,
    /// The host's request the call answers.
    pub request: Option<RequestId>,
    buffer: Mutex<Buffer>,
    pub changed: Notify,
}

impl CallStream {
    pub fn push(&self, entry: Entry) {
        let mut buf = self.buffer.lock();
        if let Entry::Frame(json) = &entry {
            buf.bytes += json.len();
        }
        buf.entries.push_back(entry);
        while buf.bytes > MAX_KEPT_BYTES && buf.entries.len() > 1 {
            buf.drop_oldest();
        }
        drop(buf);
        self.changed.notify_waiters();
    }

    pub fn finish(&self) {
        self.buffer.lock().finished = Some(Instant::now());
        self.changed.notify_waiters();
    }

    pub fn finished_before(&self, moment: Instant) -> bool {
        self.buffer.lock().finished.is_some_and(|at| at < moment)
    }

    /// A host has everything up to sequence number `seq`: drop it.
    pub fn acknowledge(&self, seq: u64) {
        let mut buf = self.buffer.lock();
        while buf.first_seq <= seq && !buf.entries.is_empty() {
            buf.drop_oldest();
        }
    }

    /// Entries from sequence number `from` on, and whether the call has ended.
    pub fn take_from(&self, from: u64) -> (Vec<(u64, Entry)>, bool) {
        let buf = self.buffer.lock();
        let skip = from.saturating_sub(buf.first_seq);
        let out = (buf.first_seq..)
            .zip(buf.entries.iter())
            .skip(usize::try_from(skip).unwrap_or(usize::MAX))
            .map(|(seq, e)| (seq, e.clone()))
            .collect();
        (out, buf.finished.is_some())
    }
}

/// The resumable streams of one session.
#[derive(Default)]
pub struct CallStreams {
    next_id: AtomicU64,
    streams: Mutex<HashMap<u64, Arc<CallStream>>>,
}

impl CallStreams {
    pub fn open(&self, request: Option<RequestId>) -> Arc<CallStream> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let stream = Arc::new(CallStream {
            id,
            request,
            buffer: Mutex::new(Buffer {
                first_seq: 1,
                ..Buffer::default()
            }),
            changed: Notify::new(),
        });
        let mut map = self.streams.lock();
        if let Some(cutoff) = Instant::now().checked_sub(KEEP_FINISHED) {
            map.retain(|_, s| !s.finished_before(cutoff));
        }
        while map.len() >= MAX_STREAMS {
            let Some(oldest) = map.keys().min().copied() else {
                break;
            };
            map.remove(&oldest);
        }
        map.insert(id, stream.clone());
        stream
    }

    pub fn remove(&self, id: u64) {
        self.streams.lock().remove(&id);
    }

    /// Stream `id`, while it is kept.
    pub fn get(&self, id: u64) -> Option<Arc<CallStream>> {
        self.streams.lock().get(&id).cloned()
    }

    pub fn clear(&self) {
        self.streams.lock().clear();
    }
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
        let s = streams.open(None);
        s.push(Entry::Frame("a".into()));
        s.push(Entry::Pause(Some(500)));
        s.push(Entry::Frame("b".into()));
        let (found, after) = (streams.get(s.id).unwrap(), 2);
        assert_eq!(frames(&found, after + 1), vec![(3, "b".to_string())]);
        // Reading drops nothing (another connection may still be reading); acknowledging does.
        assert_eq!(frames(&found, 1).len(), 3);
        found.acknowledge(after);
        assert_eq!(frames(&found, 1), vec![(3, "b".to_string())]);
        assert!(streams.get(s.id + 1).is_none());
    }

    #[test]
    fn a_session_keeps_a_bounded_number_of_streams() {
        let streams = CallStreams::default();
        let first = streams.open(None);
        for _ in 0..MAX_STREAMS {
            streams.open(None);
        }
        assert!(streams.get(first.id).is_none());
        assert_eq!(streams.streams.lock().len(), MAX_STREAMS);
    }

    #[test]
    fn finished_streams_expire() {
        let streams = CallStreams::default();
        let s = streams.open(None);
        assert!(!s.finished_before(Instant::now() + KEEP_FINISHED));
        s.finish();
        assert!(s.finished_before(Instant::now() + Duration::from_millis(1)));
        assert!(!s.finished_before(Instant::now() - Duration::from_secs(1)));
    }

    #[test]
    fn kept_frames_are_bounded() {
        let s = CallStreams::default().open(None);
        let big: Arc<str> = "x".repeat(MAX_KEPT_BYTES / 2 + 1).into();
        for _ in 0..3 {
            s.push(Entry::Frame(big.clone()));
        }
        let kept = frames(&s, 0);
        assert_eq!(kept.len(), 1, "only the newest frame fits");
        assert_eq!(kept[0].0, 3);
    }
}
