//! Upstream MCP servers: one actor task per connection (stdio child, Streamable HTTP or legacy
//! HTTP+SSE client) that owns its pending map and id counter, and a supervisor per configured server.

mod coalesce;
mod connection;
mod handshake;
mod health;
mod http;
mod http_endpoint;
mod http_reply;
mod http_sse;
mod inbound;
mod legacy_link;
mod legacy_sse;
mod listen;
mod opening;
pub mod state;
mod stdio;
pub mod supervisor;

pub use connection::{spawn_connection, ConnectionContext, ConnectionEvent};

use crate::error::UpstreamError;
use crate::protocol::message::{error_object, json_string, parse_message, raw};
use crate::protocol::{Message, RequestId, ResponsePayload};
use crate::session::host::Session;
use serde_json::value::RawValue;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

/// Capacity of a connection's command queue: beyond it, calls fail fast as overloaded.
pub const COMMAND_QUEUE: usize = 1024;
/// How long an upstream may take to acknowledge `resources/subscribe` or `resources/unsubscribe`.
const SUBSCRIBE_WAIT: Duration = Duration::from_secs(30);
/// Capacity of one call's event queue (notifications and server requests riding its stream).
pub const CALL_EVENT_QUEUE: usize = 64;

/// What a connection reports about the server once initialized.
#[derive(Debug, Clone)]
pub struct ServerFacts {
    pub protocol_version: String,
    pub capabilities: serde_json::Value,
    pub instructions: Option<String>,
    pub server_info: serde_json::Value,
}

impl ServerFacts {
    /// Whether the server declared a capability key (e.g. `"prompts"`).
    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.get(capability).is_some_and(|v| !v.is_null())
    }

    /// Whether the server speaks 2026-07-28.
    pub fn is_modern(&self) -> bool {
        self.protocol_version == crate::protocol::modern::MODERN_VERSION
    }

    /// Whether the server announces changes of a list (`listChanged: true`).
    pub fn announces_changes(&self, kind: crate::catalog::ListKind) -> bool {
        self.capabilities
            .pointer(&format!("/{}/listChanged", kind.capability()))
            .and_then(serde_json::Value::as_bool)
            == Some(true)
    }
}

/// The connection's lifecycle as others see it.
#[derive(Debug, Clone)]
pub enum Status {
    Starting,
    Ready(Arc<ServerFacts>),
    Down(String),
}

/// What flows back to the host call that caused it.
#[derive(Debug)]
pub enum CallEvent {
    /// The upstream's response (its id is the upstream-side id).
    Response(Message),
    /// A notification tied to the call (progress still carries the gateway's token).
    Notification(Message),
    /// A server-to-client request, already addressed to the host (downstream id).
    ServerRequest(Arc<str>),
    /// The call cannot complete.
    Failed(UpstreamError),
    /// The upstream ended the call's stream before answering and mcpmux is resuming it (SSE
    /// polling); `retry_ms` is the delay the upstream asked for.
    Paused { retry_ms: Option<u64> },
}

/// Who is waiting for a request's answer.
pub enum CallOrigin {
    /// mcpmux itself (initialize, list walks, setLevel).
    Internal(oneshot::Sender<Result<Box<RawValue>, CallFailure>>),
    /// A host session's call.
    Host {
        session: Arc<Session>,
        sink: mpsc::Sender<CallEvent>,
    },
}

/// Why an internal request failed.
#[derive(Debug)]
pub enum CallFailure {
    Upstream(UpstreamError),
    /// The upstream answered with a JSON-RPC error object.
    Rpc(Box<RawValue>),
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallFailure::Upstream(e) => write!(f, "{e}"),
            CallFailure::Rpc(e) => write!(f, "error {}", e.get()),
        }
    }
}

/// A request to send upstream.
pub struct OutboundCall {
    pub upstream_id: u64,
    pub method: String,
    pub params: Option<Box<RawValue>>,
    /// `Mcp-Param-*` headers for a modern HTTP upstream (lowercase name, value).
    pub param_headers: Vec<(String, String)>,
    pub origin: CallOrigin,
}

/// Commands a connection actor accepts.
pub enum Command {
    Call(OutboundCall),
    Notify {
        method: String,
        params: Option<Box<RawValue>>,
    },
    Cancel {
        upstream_id: u64,
        reason: String,
    },
    Answer {
        upstream_id: RequestId,
        payload: ResponsePayload,
    },
    /// Give the connection up (it stopped answering): pending calls fail with this reason.
    Abandon(String),
}

struct HandleInner {
    name: Arc<str>,
    index: usize,
    commands: mpsc::Sender<Command>,
    next_id: AtomicU64,
    status: watch::Receiver<Status>,
    stop: CancellationToken,
    /// Resources (the server's own URIs) some host wants change notifications for; a modern
    /// connection's listen request carries them as `resourceSubscriptions`.
    watched_resources: watch::Sender<BTreeSet<String>>,
    /// The resource subscriptions the upstream acknowledged on the listen request now open.
    acknowledged_resources: watch::Sender<BTreeSet<String>>,
}

/// A cheap, cloneable way to talk to one upstream connection.
#[derive(Clone)]
pub struct UpstreamHandle {
    inner: Arc<HandleInner>,
}

impl UpstreamHandle {
    fn new(
        name: Arc<str>,
        index: usize,
        commands: mpsc::Sender<Command>,
        status: watch::Receiver<Status>,
        stop: CancellationToken,
    ) -> Self {
        UpstreamHandle {
            inner: Arc::new(HandleInner {
                name,
                index,
                commands,
                next_id: AtomicU64::new(1),
                status,
                stop,
                watched_resources: watch::Sender::new(BTreeSet::new()),
                acknowledged_resources: watch::Sender::new(BTreeSet::new()),
            }),
        }
    }

    /// The configured server name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The server's index in configuration order.
    pub fn index(&self) -> usize {
        self.inner.index
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
        UpstreamError::Unavailable {
            name: self.name().to_string(),
            reason: reason.to_string(),
        }
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
            params,
            param_headers: Vec::new(),
            origin: CallOrigin::Internal(tx),
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

    /// Cancel a request this gateway sent (the late reply will be dropped).
    pub fn cancel(&self, upstream_id: u64, reason: &str) {
        let cmd = Command::Cancel {
            upstream_id,
            reason: reason.to_string(),
        };
        if self.inner.commands.try_send(cmd).is_err() {
            tracing::warn!(upstream = %self.name(), upstream_id, "cancellation dropped: queue full or closed");
        }
    }

    /// Answer a server-to-client request.
    pub fn answer(&self, upstream_id: RequestId, payload: ResponsePayload) {
        if self
            .inner
            .commands
            .try_send(Command::Answer { upstream_id, payload })
            .is_err()
        {
            tracing::warn!(upstream = %self.name(), "answer dropped: queue full or closed");
        }
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

/// Parse one frame received from an upstream.
pub(crate) fn parse_frame(name: &str, text: &str) -> Option<Message> {
    match parse_message(text) {
        Ok(msg) => Some(msg),
        Err(err) => {
            let preview: String = text.chars().take(200).collect();
            tracing::warn!(upstream = %name, %err, line = %preview, "skipping a frame that is not a JSON-RPC message");
            None
        }
    }
}
