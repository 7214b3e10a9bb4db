//! One host session (session era): negotiated version and capabilities, its GET stream, its
//! in-flight calls, the server-to-client requests routed to it, and its subscriptions.

use super::streams::CallStreams;
use crate::error::codes;
use crate::protocol::message::{error_object, json_string, raw};
use crate::protocol::{Message, RawObject, RequestId, ResponsePayload};
use crate::upstream::UpstreamHandle;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Capacity of a session's standalone GET stream queue.
pub const GET_STREAM_CAPACITY: usize = 256;

/// Client capabilities a host declared in `initialize`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientCaps {
    pub sampling: bool,
    pub elicitation_form: bool,
    pub elicitation_url: bool,
    pub roots: bool,
}

impl ClientCaps {
    /// Read the capabilities object of an `initialize` request.
    pub fn from_capabilities(caps: Option<&RawObject>) -> Self {
        let Some(caps) = caps else { return Self::default() };
        let elicitation = caps.get_object("elicitation");
        let (form, url) = match &elicitation {
            Some(e) if !e.contains("form") && !e.contains("url") => (true, false),
            Some(e) => (e.contains("form"), e.contains("url")),
            None => (false, false),
        };
        ClientCaps {
            sampling: caps.get_object("sampling").is_some(),
            elicitation_form: form,
            elicitation_url: url,
            roots: caps.get_object("roots").is_some(),
        }
    }

    /// Everything mcpmux can route (what it declares when no host is behind a request).
    pub const ALL: ClientCaps = ClientCaps {
        sampling: true,
        elicitation_form: true,
        elicitation_url: true,
        roots: true,
    };

    /// The capabilities object declaring these (for `initialize` or a modern `_meta`).
    pub fn to_json(self) -> serde_json::Value {
        let mut caps = serde_json::Map::new();
        if self.sampling {
            caps.insert("sampling".into(), serde_json::json!({}));
        }
        if self.elicitation_form || self.elicitation_url {
            let mut modes = serde_json::Map::new();
            if self.elicitation_form {
                modes.insert("form".into(), serde_json::json!({}));
            }
            if self.elicitation_url {
                modes.insert("url".into(), serde_json::json!({}));
            }
            caps.insert("elicitation".into(), modes.into());
        }
        if self.roots {
            caps.insert("roots".into(), serde_json::json!({ "listChanged": true }));
        }
        caps.into()
    }

    /// Whether the host can serve a server-to-client request with these params.
    pub fn supports(&self, method: &str, params: Option<&RawObject>) -> bool {
        match method {
            "sampling/createMessage" => self.sampling,
            "roots/list" => self.roots,
            "elicitation/create" => {
                let mode = params.and_then(|p| p.get_str("mode"));
                match mode.as_deref() {
                    Some("url") => self.elicitation_url,
                    _ => self.elicitation_form,
                }
            }
            _ => false,
        }
    }
}

/// RFC 5424 levels used by `logging/setLevel`, least severe first.
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// The position of a level name in [`LOG_LEVELS`].
pub fn log_level_rank(level: &str) -> Option<usize> {
    LOG_LEVELS.iter().position(|l| *l == level)
}

/// Where the answer to a server-to-client request forwarded to this session goes.
pub enum ServerRequestRoute {
    /// Back to the upstream that asked, under its own id.
    Upstream {
        upstream: UpstreamHandle,
        upstream_id: RequestId,
    },
    /// To mcpmux itself, asking on behalf of a modern upstream's input request.
    Local(oneshot::Sender<ResponsePayload>),
}

impl ServerRequestRoute {
    /// Deliver the host's answer.
    pub fn answer(self, payload: ResponsePayload) {
        match self {
            ServerRequestRoute::Upstream {
                upstream,
                upstream_id,
            } => upstream.answer(upstream_id, payload),
            ServerRequestRoute::Local(tx) => {
                let _ = tx.send(payload);
            }
        }
    }
}

/// A host call being served by an upstream.
#[derive(Clone)]
pub struct InflightCall {
    pub upstream: UpstreamHandle,
    pub upstream_id: u64,
}

/// A host session.
pub struct Session {
    pub id: String,
    pub protocol_version: String,
    pub caps: ClientCaps,
    pub closed: CancellationToken,
    log_level: Mutex<Option<usize>>,
    get_stream: Mutex<Option<mpsc::Sender<Arc<str>>>>,
    inflight: Mutex<HashMap<RequestId, InflightCall>>,
    server_requests: Mutex<HashMap<u64, ServerRequestRoute>>,
    next_server_request: AtomicU64,
    subscriptions: Mutex<HashSet<String>>,
    connections: Mutex<HashMap<usize, UpstreamHandle>>,
    last_active: Mutex<Instant>,
    /// Forwarded calls' POST streams, kept for resumption.
    pub streams: CallStreams,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Session {
    pub fn new(id: String, protocol_version: String, caps: ClientCaps) -> Arc<Self> {
        Arc::new(Session {
            id,
            protocol_version,
            caps,
            closed: CancellationToken::new(),
            log_level: Mutex::new(None),
            get_stream: Mutex::new(None),
            inflight: Mutex::new(HashMap::new()),
            server_requests: Mutex::new(HashMap::new()),
            next_server_request: AtomicU64::new(1),
            subscriptions: Mutex::new(HashSet::new()),
            connections: Mutex::new(HashMap::new()),
            last_active: Mutex::new(Instant::now()),
            streams: CallStreams::default(),
        })
    }

    /// Whether this is a modern host's throwaway session (2026-07-28).
    pub fn is_modern(&self) -> bool {
        self.protocol_version == crate::protocol::modern::MODERN_VERSION
    }

    /// Note activity (keeps the session from being reaped).
    pub fn touch(&self) {
        *lock(&self.last_active) = Instant::now();
    }

    /// How long since the last activity; a session with an open GET stream counts as active.
    pub fn idle_for(&self) -> std::time::Duration {
        if self.has_get_stream() {
            return std::time::Duration::ZERO;
        }
        lock(&self.last_active).elapsed()
    }

    /// Deliver no log messages at all (a modern request that did not ask for any).
    pub fn mute_logs(&self) {
        *lock(&self.log_level) = Some(LOG_LEVELS.len());
    }

    pub fn set_log_level(&self, rank: usize) {
        *lock(&self.log_level) = Some(rank);
    }

    pub fn log_level(&self) -> Option<usize> {
        *lock(&self.log_level)
    }

    /// The level name to ask a modern upstream for on this session's behalf (none when the
    /// host asked for none, or muted logs).
    pub fn log_level_name(&self) -> Option<&'static str> {
        self.log_level().and_then(|rank| LOG_LEVELS.get(rank).copied())
    }

    /// Whether a `notifications/message` at `level` should reach this session.
    pub fn wants_log(&self, level: Option<&str>) -> bool {
        match (self.log_level(), level.and_then(log_level_rank)) {
            (Some(min), Some(rank)) => rank >= min,
            _ => true,
        }
    }

    /// Open the standalone GET stream; `None` when one is already open.
    pub fn open_get_stream(&self) -> Option<mpsc::Receiver<Arc<str>>> {
        let mut slot = lock(&self.get_stream);
        if slot.as_ref().is_some_and(|tx| !tx.is_closed()) {
            return None;
        }
        let (tx, rx) = mpsc::channel(GET_STREAM_CAPACITY);
        *slot = Some(tx);
        Some(rx)
    }

    fn has_get_stream(&self) -> bool {
        lock(&self.get_stream).as_ref().is_some_and(|tx| !tx.is_closed())
    }

    /// Queue a message on the GET stream; false when there is none or it is full.
    /// (`try_send` never waits, so it runs under the lock instead of on a clone of the sender.)
    pub fn push_get(&self, json: Arc<str>) -> bool {
        let sent = match lock(&self.get_stream).as_ref() {
            Some(tx) => tx.try_send(json),
            None => return false,
        };
        if let Err(err) = sent {
            tracing::debug!(session = %self.id, %err, "GET stream cannot take a message");
            return false;
        }
        true
    }

    /// Record a new in-flight call unless the session already has `limit` of them.
    pub fn try_add_inflight(&self, client_id: RequestId, call: InflightCall, limit: usize) -> bool {
        let mut inflight = lock(&self.inflight);
        if inflight.len() >= limit && !inflight.contains_key(&client_id) {
            return false;
        }
        inflight.insert(client_id, call);
        true
    }

    pub fn add_inflight(&self, client_id: RequestId, call: InflightCall) {
        lock(&self.inflight).insert(client_id, call);
    }

    pub fn take_inflight(&self, client_id: &RequestId) -> Option<InflightCall> {
        lock(&self.inflight).remove(client_id)
    }

    /// Remove an in-flight entry only if it still refers to `upstream_id`.
    pub fn finish_inflight(&self, client_id: &RequestId, upstream_id: u64) {
        let mut map = lock(&self.inflight);
        if map.get(client_id).is_some_and(|c| c.upstream_id == upstream_id) {
            map.remove(client_id);
        }
    }

    /// Whether a client id is already in use by an unanswered request.
    pub fn is_inflight(&self, client_id: &RequestId) -> bool {
        lock(&self.inflight).contains_key(client_id)
    }

    /// Record a server-to-client request and return the id it carries towards the host.
    pub fn register_server_request(&self, route: ServerRequestRoute) -> u64 {
        let id = self.next_server_request.fetch_add(1, Ordering::Relaxed);
        lock(&self.server_requests).insert(id, route);
        id
    }

    /// Record a server-to-client request and return its id towards the host with the request
    /// as the host receives it.
    pub fn address_server_request(
        &self,
        route: ServerRequestRoute,
        method: String,
        params: Option<Box<serde_json::value::RawValue>>,
    ) -> (u64, Arc<str>) {
        let id = self.register_server_request(route);
        let json = Message::Request {
            id: RequestId::number(id),
            method,
            params,
        }
        .to_json()
        .into();
        (id, json)
    }

    pub fn take_server_request(&self, id: u64) -> Option<ServerRequestRoute> {
        lock(&self.server_requests).remove(&id)
    }

    pub fn subscribe(&self, uri: &str) {
        lock(&self.subscriptions).insert(uri.to_string());
    }

    pub fn unsubscribe(&self, uri: &str) {
        lock(&self.subscriptions).remove(uri);
    }

    /// Whether an update of `uri` concerns this session (the URI or a sub-resource of one it watches).
    pub fn is_subscribed(&self, uri: &str) -> bool {
        lock(&self.subscriptions)
            .iter()
            .any(|s| uri == s || uri.starts_with(&format!("{s}/")))
    }

    pub fn is_subscribed_exact(&self, uri: &str) -> bool {
        lock(&self.subscriptions).contains(uri)
    }

    pub fn connection(&self, upstream: usize) -> Option<UpstreamHandle> {
        lock(&self.connections).get(&upstream).cloned()
    }

    pub fn set_connection(&self, upstream: usize, handle: UpstreamHandle) {
        lock(&self.connections).insert(upstream, handle);
    }

    pub fn connections(&self) -> Vec<UpstreamHandle> {
        lock(&self.connections).values().cloned().collect()
    }

    /// End the session: close its streams, cancel its calls upstream, refuse its pending
    /// server-to-client requests, and stop its own upstream connections.
    pub fn close(&self) {
        self.close_because("session ended");
    }

    /// [`Session::close`], telling upstreams why their calls are cancelled.
    pub fn close_because(&self, reason: &str) {
        self.closed.cancel();
        lock(&self.get_stream).take();
        self.streams.clear();
        let calls: Vec<InflightCall> = lock(&self.inflight).drain().map(|(_, c)| c).collect();
        for call in calls {
            call.upstream.cancel(call.upstream_id, reason);
        }
        let routes: Vec<ServerRequestRoute> = lock(&self.server_requests).drain().map(|(_, r)| r).collect();
        for route in routes {
            route.answer(ResponsePayload::Error(error_object(
                codes::INTERNAL_ERROR,
                "host session ended",
                None,
            )));
        }
        for conn in lock(&self.connections).drain().map(|(_, c)| c) {
            conn.shutdown();
        }
    }
}

/// A `notifications/cancelled` for a request id.
pub fn cancelled_notification(request_id: &str, reason: &str) -> Message {
    Message::Notification {
        method: "notifications/cancelled".into(),
        params: Some(raw(format!(
            "{{\"requestId\":{request_id},\"reason\":{}}}",
            json_string(reason)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_are_read_from_initialize() {
        let caps =
            RawObject::parse(r#"{"sampling":{},"elicitation":{},"roots":{"listChanged":true}}"#).unwrap();
        let c = ClientCaps::from_capabilities(Some(&caps));
        assert!(c.sampling && c.roots && c.elicitation_form && !c.elicitation_url);
        let url = RawObject::parse(r#"{"mode":"url"}"#).unwrap();
        assert!(!c.supports("elicitation/create", Some(&url)));
        assert!(c.supports("elicitation/create", None));
        let none = ClientCaps::from_capabilities(None);
        assert!(!none.supports("sampling/createMessage", None));
    }

    #[test]
    fn log_levels_filter() {
        let s = Session::new("s".into(), "2025-11-25".into(), ClientCaps::default());
        assert!(s.wants_log(Some("debug")));
        s.set_log_level(log_level_rank("warning").unwrap());
        assert!(!s.wants_log(Some("info")));
        assert!(s.wants_log(Some("error")));
    }

    #[test]
    fn get_stream_is_exclusive_until_dropped() {
        let s = Session::new("s".into(), "2025-11-25".into(), ClientCaps::default());
        let rx = s.open_get_stream().unwrap();
        assert!(s.open_get_stream().is_none());
        assert!(s.push_get("{}".into()));
        drop(rx);
        assert!(s.open_get_stream().is_some());
    }
}
