//! A cheap, cloneable way to talk to one upstream connection: queue calls (failing fast when
//! the connection is down or its queue is full), ask on mcpmux's own behalf, cancel and answer
//! (in a lane that a full queue cannot drop), watch resources, stop.

use super::call::{CallFailure, CallOrigin, CallParams, Command, OutboundCall};
use super::facts::{ServerFacts, Status};
use super::COMMAND_QUEUE;
use crate::config::UpstreamId;
use crate::error::UpstreamError;
use crate::protocol::message::{error_object, json_string, raw};
use crate::protocol::{RequestId, ResponsePayload};
use parking_lot::Mutex;
use serde_json::value::RawValue;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

/// How long an upstream may take to acknowledge `resources/subscribe` or `resources/unsubscribe`.
const SUBSCRIBE_WAIT: Duration = Duration::from_secs(30);
/// Cancellations (and answers) that may wait for the actor at once: more than a connection can
/// have requests pending (its command queue and in-flight limit), so only a defect reaches it.
const MAX_URGENT: usize = 16_384;

static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(1);

struct HandleInner {
    name: Arc<str>,
    upstream: UpstreamId,
    /// Unique among every connection this process opened.
    connection_id: u64,
    commands: mpsc::Sender<Command>,
    next_id: AtomicU64,
    status: watch::Receiver<Status>,
    stop: CancellationToken,
    /// Resources (the server's own URIs) some host wants change notifications for; a modern
    /// connection's listen request carries them as `resourceSubscriptions`.
    watched_resources: watch::Sender<BTreeSet<String>>,
    /// The resource subscriptions the upstream acknowledged on the listen request now open.
    acknowledged_resources: watch::Sender<BTreeSet<String>>,
    /// Cancellations and answers to server requests: never dropped for a full command queue.
    urgent: Mutex<Urgent>,
    /// Something waits in `urgent` (checked by the actor before each command it takes).
    urgent_waiting: AtomicBool,
    /// The server speaks 2026-07-28 (set by the actor once it knows).
    modern: AtomicBool,
}

/// What the actor takes before its command queue.
#[derive(Default)]
pub(super) struct Urgent {
    /// Requests to cancel, with the reason; bounded by the requests this handle has pending.
    pub(super) cancels: Vec<(u64, String)>,
    /// Host answers to the server's requests; bounded by the route table.
    pub(super) answers: Vec<(RequestId, ResponsePayload)>,
}

/// A cheap, cloneable way to talk to one upstream connection.
#[derive(Clone)]
pub struct UpstreamHandle {
    inner: Arc<HandleInner>,
}

impl UpstreamHandle {
    pub(super) fn new(
        name: Arc<str>,
        upstream: UpstreamId,
        commands: mpsc::Sender<Command>,
        status: watch::Receiver<Status>,
        stop: CancellationToken,
    ) -> Self {
        UpstreamHandle {
            inner: Arc::new(HandleInner {
                name,
                upstream,
                connection_id: NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed),
                commands,
                next_id: AtomicU64::new(1),
                status,
                stop,
                watched_resources: watch::Sender::new(BTreeSet::new()),
                acknowledged_resources: watch::Sender::new(BTreeSet::new()),
                urgent: Mutex::new(Urgent::default()),
                urgent_waiting: AtomicBool::new(false),
                modern: AtomicBool::new(false),
            }),
        }
    }

    /// A handle with no connection behind it (tests of what holds handles).
    #[cfg(test)]
    pub(crate) fn detached(name: &str) -> Self {
        let (commands, _) = mpsc::channel(1);
        let (_, status) = watch::channel(Status::Starting);
        UpstreamHandle::new(
            name.into(),
            UpstreamId::new(name),
            commands,
            status,
            CancellationToken::new(),
        )
    }

    /// Identifies this connection among every connection the process opened.
    pub fn connection_id(&self) -> u64 {
        self.inner.connection_id
    }

    /// Whether the connection went down.
    pub fn is_down(&self) -> bool {
        matches!(*self.inner.status.borrow(), Status::Down(_))
    }

    /// Whether the connection was told to stop.
    #[cfg(test)]
    pub(crate) fn is_stopping(&self) -> bool {
        self.inner.stop.is_cancelled()
    }

    /// The configured server name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Whether the server speaks 2026-07-28 (cheaper than reading its facts).
    pub fn is_modern(&self) -> bool {
        self.inner.modern.load(Ordering::Relaxed)
    }

    pub(super) fn set_modern(&self, modern: bool) {
        self.inner.modern.store(modern, Ordering::Relaxed);
    }

    /// The upstream this connection belongs to.
    pub fn upstream_id(&self) -> &UpstreamId {
        &self.inner.upstream
    }

    /// A fresh id, unique on this connection.
    pub fn next_id(&self) -> u64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The current status.
    pub fn status(&self) -> Status {
        self.inner.status.borrow().clone()
    }

    /// The server facts when ready.
    pub fn facts(&self) -> Option<Arc<ServerFacts>> {
        match &*self.inner.status.borrow() {
            Status::Ready(f) => Some(f.clone()),
            _ => None,
        }
    }

    /// Wait until the connection is ready or down (bounded).
    pub async fn wait_ready(&self, limit: Duration) -> Result<Arc<ServerFacts>, UpstreamError> {
        let mut rx = self.inner.status.clone();
        let outcome = tokio::time::timeout(limit, async {
            rx.wait_for(|s| !matches!(s, Status::Starting))
                .await
                .map(|s| s.clone())
        })
        .await;
        match outcome {
            Ok(Ok(Status::Ready(f))) => Ok(f),
            Ok(Ok(Status::Down(reason))) => Err(self.unavailable(&reason)),
            Ok(Ok(Status::Starting)) => Err(self.unavailable("still starting")),
            Ok(Err(_)) => Err(self.unavailable("connection task ended")),
            Err(_) => Err(self.unavailable("not ready in time")),
        }
    }

    fn unavailable(&self, reason: &str) -> UpstreamError {
        UpstreamError::unavailable(self.name().to_string(), reason.to_string())
    }

    /// Queue a call; fails fast when the connection is down or its queue is full.
    pub fn send_call(&self, call: OutboundCall) -> Result<(), UpstreamError> {
        if let Status::Down(reason) = &*self.inner.status.borrow() {
            return Err(self.unavailable(reason));
        }
        self.inner
            .commands
            .try_send(Command::Call(call))
            .map_err(|err| match err {
                mpsc::error::TrySendError::Full(_) => UpstreamError::Overloaded {
                    name: self.name().to_string(),
                    reason: format!("more than {COMMAND_QUEUE} requests queued"),
                },
                mpsc::error::TrySendError::Closed(_) => self.unavailable("connection closed"),
            })
    }

    /// Send a request on mcpmux's own behalf and wait for its result (bounded). Dropping the
    /// returned future before the answer cancels the request upstream.
    pub async fn request(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
        limit: Duration,
    ) -> Result<Box<RawValue>, CallFailure> {
        let (tx, rx) = oneshot::channel();
        let upstream_id = self.next_id();
        let call = OutboundCall {
            upstream_id,
            method: method.to_string(),
            params: params.map(CallParams::Raw),
            param_headers: Vec::new(),
            origin: CallOrigin::Internal(tx),
            span: tracing::Span::none(),
            trace_headers: Vec::new(),
            target: None,
        };
        self.send_call(call).map_err(CallFailure::Upstream)?;
        let mut unanswered = CancelOnDrop {
            handle: self,
            upstream_id,
            reason: "no longer needed",
        };
        match tokio::time::timeout(limit, rx).await {
            Ok(Ok(result)) => {
                unanswered.reason = "";
                result
            }
            Ok(Err(_)) => {
                unanswered.reason = "";
                Err(CallFailure::Upstream(self.unavailable("connection closed")))
            }
            Err(_) => {
                unanswered.reason = "timed out";
                Err(CallFailure::Upstream(UpstreamError::Timeout {
                    name: self.name().to_string(),
                    secs: limit.as_secs(),
                }))
            }
        }
    }

    /// Start (`on`) or stop change notifications for one of the server's resources (its own
    /// URI). A session-era server gets `resources/subscribe` or `resources/unsubscribe`; for a
    /// modern one the URI joins or leaves the filter of mcpmux's listen request, which reopens,
    /// and a start returns once the upstream acknowledged the new filter (bounded).
    pub async fn watch_resource(&self, uri: &str, on: bool) -> Result<(), CallFailure> {
        if self.facts().is_some_and(|f| f.is_modern()) {
            self.inner.watched_resources.send_if_modified(|uris| match on {
                true => uris.insert(uri.to_string()),
                false => uris.remove(uri),
            });
            if !on {
                return Ok(());
            }
            let mut acknowledged = self.inner.acknowledged_resources.subscribe();
            let wait = tokio::time::timeout(SUBSCRIBE_WAIT, acknowledged.wait_for(|uris| uris.contains(uri)));
            return match wait.await {
                Ok(Ok(_)) => Ok(()),
                _ => Err(CallFailure::Upstream(UpstreamError::Timeout {
                    name: self.name().to_string(),
                    secs: SUBSCRIBE_WAIT.as_secs(),
                })),
            };
        }
        let method = if on {
            "resources/subscribe"
        } else {
            "resources/unsubscribe"
        };
        let params = raw(format!("{{\"uri\":{}}}", json_string(uri)));
        self.request(method, Some(params), SUBSCRIBE_WAIT)
            .await
            .map(|_| ())
    }

    /// Record the resource subscriptions a modern upstream acknowledged on mcpmux's listen.
    pub(super) fn listen_acknowledged(&self, uris: BTreeSet<String>) {
        self.inner.acknowledged_resources.send_replace(uris);
    }

    /// The resources hosts want change notifications for, as they change.
    pub(super) fn watched_resources(&self) -> watch::Receiver<BTreeSet<String>> {
        self.inner.watched_resources.subscribe()
    }

    /// Send a notification upstream.
    pub fn notify(&self, method: &str, params: Option<Box<RawValue>>) {
        let cmd = Command::Notify {
            method: method.to_string(),
            params,
        };
        if self.inner.commands.try_send(cmd).is_err() {
            tracing::warn!(upstream = %self.name(), method, "notification dropped: queue full or closed");
        }
    }

    /// Cancel a request this gateway sent (the late reply will be dropped). Never dropped for a
    /// full command queue: cancellations wait in a lane of their own.
    pub fn cancel(&self, upstream_id: u64, reason: &str) {
        let mut urgent = self.inner.urgent.lock();
        if urgent.cancels.len() >= MAX_URGENT {
            tracing::warn!(upstream = %self.name(), upstream_id, "cancellation dropped: {MAX_URGENT} already waiting");
            return;
        }
        urgent.cancels.push((upstream_id, reason.to_string()));
        drop(urgent);
        self.wake();
    }

    /// Answer a server-to-client request (in the same lane as cancellations).
    pub fn answer(&self, upstream_id: RequestId, payload: ResponsePayload) {
        let mut urgent = self.inner.urgent.lock();
        if urgent.answers.len() >= MAX_URGENT {
            tracing::warn!(upstream = %self.name(), "answer dropped: {MAX_URGENT} already waiting");
            return;
        }
        urgent.answers.push((upstream_id, payload));
        drop(urgent);
        self.wake();
    }

    /// Flag the urgent lane and wake an idle actor; a full queue needs no wake-up (the actor
    /// looks at the lane before each command it takes).
    fn wake(&self) {
        self.inner.urgent_waiting.store(true, Ordering::Release);
        let _ = self.inner.commands.try_send(Command::Wake);
    }

    /// Whether a cancellation or answer waits.
    pub(super) fn has_urgent(&self) -> bool {
        self.inner.urgent_waiting.load(Ordering::Acquire)
    }

    /// Take every waiting cancellation and answer.
    pub(super) fn take_urgent(&self) -> Urgent {
        let mut urgent = self.inner.urgent.lock();
        self.inner.urgent_waiting.store(false, Ordering::Release);
        std::mem::take(&mut *urgent)
    }

    /// Answer a server-to-client request with an error.
    pub fn answer_error(&self, upstream_id: RequestId, code: i64, message: &str) {
        self.answer(
            upstream_id,
            ResponsePayload::Error(error_object(code, message, None)),
        );
    }

    /// Give the connection up because it misbehaves: every pending call fails at once with
    /// `reason`, the transport closes and (for a shared connection) the supervisor restarts it.
    pub fn abandon(&self, reason: String) {
        if self.inner.commands.try_send(Command::Abandon(reason)).is_err() {
            self.shutdown();
        }
    }

    /// Stop the connection (its task closes the transport and exits).
    pub fn shutdown(&self) {
        self.inner.stop.cancel();
    }

    /// Wait until the connection task has finished.
    pub async fn closed(&self) {
        let mut rx = self.inner.status.clone();
        let _ = rx.wait_for(|s| matches!(s, Status::Down(_))).await;
    }
}

/// Cancels an internal request upstream unless its reason was cleared (it was answered).
struct CancelOnDrop<'a> {
    handle: &'a UpstreamHandle,
    upstream_id: u64,
    reason: &'static str,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if !self.reason.is_empty() {
            self.handle.cancel(self.upstream_id, self.reason);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued_call(handle: &UpstreamHandle) -> OutboundCall {
        let (tx, _rx) = oneshot::channel();
        OutboundCall {
            upstream_id: handle.next_id(),
            method: "tools/call".into(),
            params: None,
            param_headers: Vec::new(),
            origin: CallOrigin::Internal(tx),
            span: tracing::Span::none(),
            trace_headers: Vec::new(),
            target: None,
        }
    }

    #[test]
    fn a_full_command_queue_fails_calls_fast_but_keeps_cancellations_and_answers() {
        let (commands, _actor_end) = mpsc::channel(2);
        let (_, status) = watch::channel(Status::Starting);
        let handle = UpstreamHandle::new(
            "u".into(),
            UpstreamId::new("u"),
            commands,
            status,
            CancellationToken::new(),
        );
        handle.send_call(queued_call(&handle)).unwrap();
        handle.send_call(queued_call(&handle)).unwrap();
        let refused = handle.send_call(queued_call(&handle));
        assert!(matches!(refused, Err(UpstreamError::Overloaded { .. })));
        // The actor is busy and its queue full: a cancellation and an answer still get through.
        handle.cancel(1, "the host cancelled");
        handle.answer_error(RequestId::number(9), -32601, "no");
        let urgent = handle.take_urgent();
        assert_eq!(urgent.cancels, vec![(1, "the host cancelled".to_string())]);
        assert_eq!(urgent.answers.len(), 1);
        assert!(handle.take_urgent().cancels.is_empty(), "taken once");
    }
}
