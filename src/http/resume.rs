//! The SSE side of resumable POST streams (SEP-1699): a forwarded call's frames go into its
//! session's kept stream (`session::streams`) and out to the host as events whose ids seal the
//! stream and the sequence number for the session (`session::host_tokens`: one AEAD seal per
//! event), so a host whose stream broke continues it with a GET carrying `Last-Event-ID`, and
//! the call is not lost with the connection. When an upstream polls (ends
//! its stream before the response), a host of protocol 2025-11-25 or later is asked to poll too:
//! its stream ends after an event carrying the upstream's `retry` delay, and the rest arrives on
//! its resuming GET.
//!
//! A call answered within [`JSON_REPLY_WINDOW`] with nothing before its response gets a plain
//! JSON response instead: no stream to number, keep or frame (most tool calls are this fast).

use crate::core::forward::{ForwardedCall, Frame};
use crate::error::codes;
use crate::protocol::message::error_reply;
use crate::protocol::sse::event_bytes;
use crate::protocol::RequestId;
use crate::session::streams::{CallStream, Entry};
use crate::session::Session;
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;

/// Reconnection delay announced to hosts in the priming event.
pub const ANNOUNCED_RETRY_MS: u64 = 1000;
/// How long a POST waits for its call's first frame before committing to an SSE stream. A
/// host whose connection breaks inside it cannot resume the call (it has no event id yet).
pub const JSON_REPLY_WINDOW: Duration = Duration::from_millis(100);

/// Whether a host of this protocol version understands priming events and being asked to poll.
pub(super) fn may_poll(version: &str) -> bool {
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
/// without one); `None` once the window passed or the session is ending. A stop of mcpmux does
/// not end it: the call drains, or ends with an error at the drain deadline.
pub async fn first_frame(frames: &mut BoxStream<'static, Frame>, session: &Session) -> Option<Option<Frame>> {
    tokio::select! {
        first = tokio::time::timeout(JSON_REPLY_WINDOW, frames.next()) => first.ok(),
        _ = session.closed.cancelled() => None,
    }
}

/// How a POST that forwarded a call answers its host.
pub enum Reply {
    /// The call's response, answered within [`JSON_REPLY_WINDOW`] and alone.
    Json(Arc<str>),
    /// The body of an SSE response that streams the call.
    Stream(BoxStream<'static, Bytes>),
}

/// A call's frames while its POST waits for the first. Dropped meanwhile (the host went away),
/// the call still runs to its end in a task of its own, so its outcome is recorded; no host can
/// resume it (it was given no event id yet), so nothing keeps its frames.
struct Waiting(Option<BoxStream<'static, Frame>>);

impl Drop for Waiting {
    fn drop(&mut self) {
        let Some(mut frames) = self.0.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { while frames.next().await.is_some() {} });
        }
    }
}

/// Run `call` to its end whatever happens to the host's connection: its response if it came
/// first and within [`JSON_REPLY_WINDOW`], else a stream of its frames (kept for a resuming host
/// from then on: a call answered at once never opens one).
pub async fn start(call: Box<ForwardedCall>, session: Arc<Session>) -> Reply {
    let client_id = call.client_id.clone();
    let mut waiting = Waiting(Some((*call).into_frames().boxed()));
    let first = match waiting.0.as_mut() {
        Some(frames) => first_frame(frames, &session).await,
        None => None,
    };
    let frames = waiting.0.take();
    let first = match first {
        // Nothing follows a response: the call is over (dropping its frames clears its
        // in-flight entry before the host can send its next request).
        Some(Some(Frame::Response(json))) => return Reply::Json(json),
        first => first,
    };
    let stream = session.streams.open(Some(client_id));
    let mut driver = Driver {
        frames,
        stream: stream.clone(),
    };
    if let Some(frame) = first {
        driver.record(frame);
    }
    let priming = may_poll(&session.protocol_version);
    Reply::Stream(frames_after(stream, 0, priming, Some(driver), session))
}

/// What a host resuming the stream of its request `request` gets when the stream was kept by
/// another process (`why`): the request answered with an error, so the host does not wait for it
/// to its own timeout. The call's outcome is unknown (it may have completed where it ran).
pub fn lost(request: RequestId, why: &str) -> BoxStream<'static, Bytes> {
    let message = format!(
        "the stream of this request cannot be resumed here: {why}; the call may or may not have completed"
    );
    let reply = error_reply(request, codes::UPSTREAM_UNAVAILABLE, &message, None);
    futures_util::stream::once(async move { event_bytes(None, None, &reply.to_json()) }).boxed()
}

/// The frames of `stream` after sequence number `after` (a host resuming it), live until the
/// call ends (or, for a host that may poll, until the upstream polls) or the session ends.
pub fn read(stream: Arc<CallStream>, after: u64, session: Arc<Session>) -> BoxStream<'static, Bytes> {
    stream.acknowledge(after);
    frames_after(stream, after, false, None, session)
}

/// A call's stream ends with the call (a stop drains it; see [`first_frame`]) or its session.
fn frames_after(
    stream: Arc<CallStream>,
    after: u64,
    priming: bool,
    mut driver: Option<Driver>,
    session: Arc<Session>,
) -> BoxStream<'static, Bytes> {
    let polls = may_poll(&session.protocol_version);
    let frames = async_stream::stream! {
        let event_id = |seq: u64| session.call_event_id(&stream, seq);
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
                },
                None => tokio::select! {
                    _ = changed => {}
                    _ = session.closed.cancelled() => return,
                },
            }
        }
    };
    frames.boxed()
}
