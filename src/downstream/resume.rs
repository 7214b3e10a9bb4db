//! Resumable POST streams (SSE resumability, SEP-1699). A forwarded call's frames are numbered
//! (event id `{stream}-{seq}`) and kept in its session until the host has been sent all of them,
//! so a host whose stream broke continues it with a GET carrying `Last-Event-ID`, and the call
//! is not lost with the connection. When an upstream polls (ends its stream before the response),
//! a host of protocol 2025-11-25 or later is asked to poll too: its stream ends after an event
//! carrying the upstream's `retry` delay, and the rest arrives on its resuming GET.
//!
//! A call answered within [`JSON_REPLY_WINDOW`] with nothing before its response gets a plain
//! JSON response instead: no stream to number, keep or frame (most tool calls are this fast).
//!
//! A frame is dropped once a host acknowledges it by resuming after it, or with its stream when
//! a host has been sent the whole stream. Bounded: a session keeps at most [`MAX_STREAMS`]
//! streams (the oldest is dropped first), a finished one at most [`KEEP_FINISHED`], and a stream
//! at most [`MAX_KEPT_BYTES`] of frames (the oldest go first; the newest is always kept).

use super::forward::{ForwardedCall, Frame};
use super::session::Session;
use crate::protocol::sse;
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Streams a session keeps for resumption.
pub const MAX_STREAMS: usize = 64;
/// Frames a stream keeps that no host has acknowledged.
pub const MAX_KEPT_BYTES: usize = 16 << 20;
/// How long a finished stream that no host read to its end is kept for a resuming GET.
pub const KEEP_FINISHED: Duration = Duration::from_secs(60);
/// Reconnection delay announced to hosts in the priming event.
pub const ANNOUNCED_RETRY_MS: u64 = 1000;
/// How long a POST waits for its call's first frame before committing to an SSE stream. A
/// host whose connection breaks inside it cannot resume the call (it has no event id yet).
pub const JSON_REPLY_WINDOW: Duration = Duration::from_millis(100);

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

#[derive(Clone)]
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
        while buf.bytes > MAX_KEPT_BYTES && buf.entries.len() > 1 {
            buf.drop_oldest();
        }
        drop(buf);
        self.changed.notify_waiters();
    }

    fn finish(&self) {
        lock(&self.buffer).finished = Some(Instant::now());
        self.changed.notify_waiters();
    }

    fn finished_before(&self, moment: Instant) -> bool {
        lock(&self.buffer).finished.is_some_and(|at| at < moment)
    }

    /// A host has everything up to sequence number `seq`: drop it.
    fn acknowledge(&self, seq: u64) {
        let mut buf = lock(&self.buffer);
        while buf.first_seq <= seq && !buf.entries.is_empty() {
            buf.drop_oldest();
        }
    }

    /// Entries from sequence number `from` on, and whether the call has ended.
    fn take_from(&self, from: u64) -> (Vec<(u64, Entry)>, bool) {
        let buf = lock(&self.buffer);
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

fn entry(frame: Frame) -> Entry {
    match frame {
        Frame::Pause { retry_ms } => Entry::Pause(retry_ms),
        Frame::Message(json) | Frame::Request(json) | Frame::Response(json) => Entry::Frame(json),
    }
}

/// Moves a call's frames into its stream. The host's POST response drives it while it lasts;
/// if the response goes away first (the host disconnected, or was asked to poll), the rest of
/// the call runs to its end in a task of its own.
struct Driver {
    frames: Option<BoxStream<'static, Frame>>,
    stream: Arc<CallStream>,
}

impl Driver {
    /// Move the next frame into the stream, or mark the stream done.
    async fn step(&mut self) {
        let Some(frames) = self.frames.as_mut() else {
            return std::future::pending().await;
        };
        let next = frames.next().await;
        self.record(next);
    }

    fn record(&mut self, frame: Option<Frame>) {
        match frame {
            Some(frame) => self.stream.push(entry(frame)),
            None => {
                self.frames = None;
                self.stream.finish();
            }
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let Some(mut frames) = self.frames.take() else {
            return;
        };
        let stream = self.stream.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    while let Some(frame) = frames.next().await {
                        stream.push(entry(frame));
                    }
                    stream.finish();
                });
            }
            Err(_) => stream.finish(),
        }
    }
}

/// A call's first frame if it comes within [`JSON_REPLY_WINDOW`] (`Some(None)`: the call ended
/// without one); `None` once the window passed or the session or mcpmux is ending.
pub async fn first_frame(
    frames: &mut BoxStream<'static, Frame>,
    session: &Session,
    shutdown: &CancellationToken,
) -> Option<Option<Frame>> {
    tokio::select! {
        first = tokio::time::timeout(JSON_REPLY_WINDOW, frames.next()) => first.ok(),
        _ = session.closed.cancelled() => None,
        _ = shutdown.cancelled() => None,
    }
}

/// How a POST that forwarded a call answers its host.
pub enum Reply {
    /// The call's response, answered within [`JSON_REPLY_WINDOW`] and alone.
    Json(Arc<str>),
    /// The body of an SSE response that streams the call.
    Stream(BoxStream<'static, Bytes>),
}

/// Run `call` to its end whatever happens to the host's connection: its response if it came
/// first and within [`JSON_REPLY_WINDOW`], else a stream of its frames.
pub async fn start(call: ForwardedCall, session: Arc<Session>, shutdown: CancellationToken) -> Reply {
    let stream = session.streams.open();
    let mut driver = Driver {
        frames: Some(call.into_frames().boxed()),
        stream: stream.clone(),
    };
    if let Some(frames) = driver.frames.as_mut() {
        match first_frame(frames, &session, &shutdown).await {
            Some(Some(Frame::Response(json))) => {
                // Nothing follows a response: the call is over (ending it clears its in-flight
                // entry before the host can send its next request).
                driver.frames = None;
                session.streams.remove(stream.id);
                return Reply::Json(json);
            }
            Some(frame) => driver.record(frame),
            None => {}
        }
    }
    let priming = may_poll(&session.protocol_version);
    Reply::Stream(frames_after(stream, 0, priming, Some(driver), session, shutdown))
}

/// The frames of `stream` after sequence number `after` (a host resuming it), live until the
/// call ends (or, for a host that may poll, until the upstream polls).
pub fn read(
    stream: Arc<CallStream>,
    after: u64,
    session: Arc<Session>,
    shutdown: CancellationToken,
) -> BoxStream<'static, Bytes> {
    stream.acknowledge(after);
    frames_after(stream, after, false, None, session, shutdown)
}

fn frames_after(
    stream: Arc<CallStream>,
    after: u64,
    priming: bool,
    mut driver: Option<Driver>,
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
            match driver.as_mut() {
                Some(driver) => tokio::select! {
                    _ = driver.step() => {}
                    _ = session.closed.cancelled() => return,
                    _ = shutdown.cancelled() => return,
                },
                None => tokio::select! {
                    _ = changed => {}
                    _ = session.closed.cancelled() => return,
                    _ = shutdown.cancelled() => return,
                },
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
        // Reading drops nothing (another connection may still be reading); acknowledging does.
        assert_eq!(frames(&found, 1).len(), 3);
        found.acknowledge(after);
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
    fn finished_streams_expire() {
        let streams = CallStreams::default();
        let s = streams.open();
        assert!(!s.finished_before(Instant::now() + KEEP_FINISHED));
        s.finish();
        assert!(s.finished_before(Instant::now() + Duration::from_millis(1)));
        assert!(!s.finished_before(Instant::now() - Duration::from_secs(1)));
    }

    #[test]
    fn kept_frames_are_bounded() {
        let s = CallStreams::default().open();
        let big: Arc<str> = "x".repeat(MAX_KEPT_BYTES / 2 + 1).into();
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
