//! One host session (session era, or a modern request's throwaway one): negotiated version and
//! capabilities, its GET stream, its in-flight calls, its subscriptions and log level, and the
//! sealed ids it hands its host (SSE event ids, server-to-client request ids: [`HostTokens`]).
//! It is a [`HostLink`] to upstream connections; the server-to-client requests routed to it and
//! its own connections are kept in the shared [`HostTies`], which it unties when it ends.

use super::host_tokens::{EventPosition, HostTokens, RequestRoute, StandaloneClaims, TokenRefusal};
use super::state::SessionState;
use super::streams::{CallStream, CallStreams};
use crate::config::UpstreamId;
use crate::policy::Viewer;
use crate::protocol::logging::{log_level_rank, LOG_LEVELS};
use crate::protocol::{ClientCaps, Message, RequestId, ResponsePayload};
use crate::upstream::host::{HostKey, HostLink};
use crate::upstream::server_requests::{AnswerTo, Route, RoutesFull};
use crate::upstream::ties::HostTies;
use crate::upstream::UpstreamHandle;
use crate::util::fast_map::FastMap;
use parking_lot::Mutex;
use serde_json::value::RawValue;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;

/// Capacity of a session's standalone GET stream queue.
pub const GET_STREAM_CAPACITY: usize = 256;

static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

/// A host call being served by an upstream.
#[derive(Clone)]
pub struct InflightCall {
    pub upstream: UpstreamHandle,
    pub upstream_id: u64,
}

/// A host session: its movable state (see [`SessionState`]) and what lives only here.
pub struct Session {
    pub id: String,
    /// [`crate::util::ids::session_digest`] of `id`, made the first time something logs it.
    log_id: std::sync::OnceLock<String>,
    key: HostKey,
    pub protocol_version: String,
    pub caps: ClientCaps,
    client_info: Option<serde_json::Value>,
    /// The profile whose endpoint opened the session (`None`: the main endpoint).
    profile: Option<Arc<str>>,
    pub closed: CancellationToken,
    log_level: Mutex<Option<usize>>,
    get_stream: Mutex<Option<mpsc::Sender<Arc<str>>>>,
    inflight: Mutex<FastMap<RequestId, InflightCall>>,
    subscriptions: Mutex<HashSet<String>>,
    last_active: Mutex<Instant>,
    opened: Instant,
    /// Forwarded calls' POST streams, kept for resumption.
    pub streams: CallStreams,
    ties: Arc<HostTies>,
    /// Who opened the session (the principal's issuer and name); only they may use it.
    owner: std::sync::OnceLock<String>,
    /// The principal of its latest request: what it sees under a changed policy.
    viewer: Mutex<Option<Arc<dyn Viewer>>>,
    /// The home (advertise URL) of the process this session was taken over from, if it was.
    taken_over_from: std::sync::OnceLock<String>,
    /// Seals the event ids and server-to-client request ids this session hands its host.
    tokens: Arc<HostTokens>,
    /// The plaintext of the standalone stream's event ids (the subscriptions and log level they
    /// carry); made again after either changes.
    standalone_claims: Mutex<Option<Arc<[u8]>>>,
    /// The subscriptions or the log level changed: the standalone stream sends a fresh event id.
    pub claims_changed: Notify,
    /// The subscriptions and log level here are the session's own: restored from a standalone
    /// event id, or changed by the host here (a restore happens at most once, before either).
    settled: AtomicBool,
    /// Opened over the legacy HTTP+SSE transport (2024-11-05), not Streamable HTTP.
    legacy_sse: AtomicBool,
}

impl Session {
    /// A fresh session (tests; the gateway opens them through the hub).
    #[cfg(test)]
    pub(crate) fn new(
        id: String,
        protocol_version: String,
        caps: ClientCaps,
        ties: Arc<HostTies>,
    ) -> Arc<Self> {
        let tokens = Arc::new(HostTokens::random());
        Session::restore(id, SessionState::new(protocol_version, caps), ties, tokens)
    }

    /// A session with `state` (new, or opened from a sealed token), handing its host ids sealed
    /// by `tokens`.
    pub fn restore(
        id: String,
        state: SessionState,
        ties: Arc<HostTies>,
        tokens: Arc<HostTokens>,
    ) -> Arc<Self> {
        Arc::new(Session {
            id,
            log_id: std::sync::OnceLock::new(),
            key: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            protocol_version: state.protocol_version,
            caps: state.caps,
            client_info: state.client_info,
            profile: state.profile.map(Arc::from),
            closed: CancellationToken::new(),
            log_level: Mutex::new(state.log_level),
            get_stream: Mutex::new(None),
            inflight: Mutex::new(FastMap::default()),
            subscriptions: Mutex::new(HashSet::new()),
            last_active: Mutex::new(Instant::now()),
            opened: Instant::now(),
            streams: CallStreams::default(),
            ties,
            owner: std::sync::OnceLock::new(),
            viewer: Mutex::new(None),
            taken_over_from: std::sync::OnceLock::new(),
            tokens,
            standalone_claims: Mutex::new(None),
            claims_changed: Notify::new(),
            settled: AtomicBool::new(false),
            legacy_sse: AtomicBool::new(false),
        })
    }

    /// Record who opened the session (once; later calls change nothing).
    pub fn bind_owner(&self, owner: String) {
        let _ = self.owner.set(owner);
    }

    /// Note the principal of a request on the session (the same owner, its latest groups and
    /// scopes): what the session sees when the policy changes is worked out for it.
    pub fn note_viewer(&self, viewer: Arc<dyn Viewer>) {
        let mut held = self.viewer.lock();
        if !held.as_ref().is_some_and(|v| Arc::ptr_eq(v, &viewer)) {
            *held = Some(viewer);
        }
    }

    /// The principal of the session's latest request; `None` while nobody is authenticated.
    pub fn viewer(&self) -> Option<Arc<dyn Viewer>> {
        self.viewer.lock().clone()
    }

    /// Who opened the session (the principal's owner key), when authentication is on.
    pub fn owner(&self) -> Option<&str> {
        self.owner.get().map(String::as_str)
    }

    /// Whether a request by `owner` (`None`: unauthenticated) may use this session: only its
    /// opener's, and an unowned session only unauthenticated.
    pub fn owned_by(&self, owner: Option<&str>) -> bool {
        self.owner.get().map(String::as_str) == owner
    }

    /// Record that this session was taken over from the process at `home` (once).
    pub fn mark_taken_over(&self, home: String) {
        let _ = self.taken_over_from.set(home);
    }

    /// The home this session was taken over from; `None` when it was opened here.
    pub fn taken_over_from(&self) -> Option<&str> {
        self.taken_over_from.get().map(String::as_str)
    }

    /// What of this session can be sealed and moved to another replica.
    pub fn state(&self) -> SessionState {
        SessionState {
            protocol_version: self.protocol_version.clone(),
            caps: self.caps,
            client_info: self.client_info.clone(),
            log_level: self.log_level(),
            profile: self.profile.as_deref().map(str::to_string),
        }
    }

    /// How the session is named in logs and audit records: a short digest of its id (the id
    /// itself never is).
    pub fn log_id(&self) -> &str {
        self.log_id
            .get_or_init(|| crate::util::ids::session_digest(&self.id))
    }

    /// The profile whose endpoint opened the session (`None`: the main endpoint); it is
    /// unknown on every other endpoint.
    pub fn profile(&self) -> Option<&Arc<str>> {
        self.profile.as_ref()
    }

    /// This session as upstream connections see it.
    pub fn link(self: &Arc<Self>) -> Arc<dyn HostLink> {
        self.clone()
    }

    /// Whether this is a modern host's throwaway session (2026-07-28).
    pub fn is_modern(&self) -> bool {
        self.protocol_version == crate::protocol::modern::MODERN_VERSION
    }

    /// The host's `clientInfo` as "name version" (each part cut to 64 characters).
    pub fn client_label(&self) -> Option<String> {
        match (self.client_part("name")?, self.client_part("version")) {
            (name, Some(version)) => Some(format!("{name} {version}")),
            (name, None) => Some(name),
        }
    }

    /// The session's host speaks the legacy HTTP+SSE transport.
    pub fn mark_legacy_sse(&self) {
        self.legacy_sse.store(true, Ordering::Relaxed);
    }

    /// The transport the host speaks (the `transport` label of telemetry's session gauge).
    pub fn transport(&self) -> &'static str {
        match self.legacy_sse.load(Ordering::Relaxed) {
            true => "sse",
            false => "streamable_http",
        }
    }

    /// A string member of the host's `clientInfo` (`name`, `version`), cut to 64 characters.
    pub fn client_part(&self, key: &str) -> Option<String> {
        let text = self.client_info.as_ref()?.get(key)?.as_str()?;
        Some(text.chars().take(64).collect())
    }

    /// How long ago the session opened.
    pub fn age(&self) -> std::time::Duration {
        self.opened.elapsed()
    }

    /// How many of the host's calls are being served now.
    pub fn inflight_count(&self) -> usize {
        self.inflight.lock().len()
    }

    /// Note activity (keeps the session from being reaped).
    pub fn touch(&self) {
        *self.last_active.lock() = Instant::now();
    }

    /// How long since the last activity; a session with an open GET stream counts as active.
    pub fn idle_for(&self) -> std::time::Duration {
        if self.has_get_stream() {
            return std::time::Duration::ZERO;
        }
        self.last_active.lock().elapsed()
    }

    /// Deliver no log messages at all (a modern request that did not ask for any).
    pub fn mute_logs(&self) {
        *self.log_level.lock() = Some(LOG_LEVELS.len());
    }

    pub fn set_log_level(&self, rank: usize) {
        *self.log_level.lock() = Some(rank);
        self.claims_changed();
    }

    pub fn log_level(&self) -> Option<usize> {
        *self.log_level.lock()
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
        let mut slot = self.get_stream.lock();
        if slot.as_ref().is_some_and(|tx| !tx.is_closed()) {
            return None;
        }
        let (tx, rx) = mpsc::channel(GET_STREAM_CAPACITY);
        *slot = Some(tx);
        Some(rx)
    }

    /// Whether the host has its standalone GET stream open.
    pub fn has_get_stream(&self) -> bool {
        self.get_stream.lock().as_ref().is_some_and(|tx| !tx.is_closed())
    }

    /// Queue a message on the GET stream; false when there is none or it is full.
    /// (`try_send` never waits, so it runs under the lock instead of on a clone of the sender.)
    pub fn push_get(&self, json: Arc<str>) -> bool {
        let sent = match self.get_stream.lock().as_ref() {
            Some(tx) => tx.try_send(json),
            None => return false,
        };
        if let Err(err) = sent {
            tracing::debug!(session = %self.log_id(), %err, "GET stream cannot take a message");
            return false;
        }
        true
    }

    /// Record a new in-flight call unless the session already has `limit` of them.
    pub fn try_add_inflight(&self, client_id: RequestId, call: InflightCall, limit: usize) -> bool {
        let mut inflight = self.inflight.lock();
        if inflight.len() >= limit && !inflight.contains_key(&client_id) {
            return false;
        }
        inflight.insert(client_id, call);
        true
    }

    pub fn add_inflight(&self, client_id: RequestId, call: InflightCall) {
        self.inflight.lock().insert(client_id, call);
    }

    pub fn take_inflight(&self, client_id: &RequestId) -> Option<InflightCall> {
        self.inflight.lock().remove(client_id)
    }

    /// Remove an in-flight entry only if it still refers to `upstream_id`.
    pub fn finish_inflight(&self, client_id: &RequestId, upstream_id: u64) {
        let mut map = self.inflight.lock();
        if map.get(client_id).is_some_and(|c| c.upstream_id == upstream_id) {
            map.remove(client_id);
        }
    }

    /// Whether a client id is already in use by an unanswered request.
    pub fn is_inflight(&self, client_id: &RequestId) -> bool {
        self.inflight.lock().contains_key(client_id)
    }

    /// Route a server-to-client request to this session: its route, and the request as the
    /// host receives it (under the id [`HostLink::request_id`] gives the route).
    pub fn address_server_request(
        self: &Arc<Self>,
        answer_to: AnswerTo,
        method: String,
        params: Option<Box<RawValue>>,
    ) -> Result<(u64, Arc<str>), RoutesFull> {
        let (route, id) = self.ties.routes.open(&self.link(), answer_to, None)?;
        let json = Message::Request { id, method, params }.to_json().into();
        Ok((route, json))
    }

    /// Deliver an answer to server-to-client request route `route` where it goes. False when no
    /// such request waits for this session.
    pub fn answer_server_request(&self, route: u64, payload: ResponsePayload) -> bool {
        self.ties.routes.answer(self.key, route, payload)
    }

    /// The host answered a server-to-client request with `id`: deliver it where it goes. Refused
    /// when the id is not one this session's host was sent (not sealed by mcpmux for it); false
    /// when it was, but nothing here waits for it any more (answered, given up, or sent by the
    /// process that held the session before).
    pub fn answer_host_response(
        &self,
        id: &RequestId,
        payload: ResponsePayload,
    ) -> Result<bool, TokenRefusal> {
        let token = id.as_string().ok_or(TokenRefusal::Contents)?;
        match self.tokens.open_request_id(&self.id, &token)? {
            RequestRoute::Here(route) => Ok(self.answer_server_request(route, payload)),
            RequestRoute::Elsewhere => Ok(false),
        }
    }

    /// Take the route of a server-to-client request sent to this session.
    pub fn take_server_request(&self, id: u64) -> Option<Route> {
        self.ties.routes.take(self.key, id)
    }

    pub fn subscribe(&self, uri: &str) {
        self.subscriptions.lock().insert(uri.to_string());
        self.claims_changed();
    }

    pub fn unsubscribe(&self, uri: &str) {
        self.subscriptions.lock().remove(uri);
        self.claims_changed();
    }

    /// The subscriptions or log level changed here: what the standalone stream's event ids
    /// carry is made again, the stream sends a fresh id, and no restore overrides the change.
    fn claims_changed(&self) {
        self.settled.store(true, Ordering::Release);
        self.standalone_claims.lock().take();
        self.claims_changed.notify_one();
    }

    /// Whether a restore of the subscriptions and log level from a standalone event id may
    /// go ahead: the first time only, and only while the host changed neither here.
    pub fn begin_restore(&self) -> bool {
        !self.settled.swap(true, Ordering::AcqRel)
    }

    /// The id of event `seq` of this session's call stream `stream`.
    pub fn call_event_id(&self, stream: &CallStream, seq: u64) -> String {
        (self.tokens).call_event_id(&self.id, stream.id, seq, stream.request.as_ref())
    }

    /// A fresh event id for the standalone stream, carrying the subscriptions and log level.
    pub fn standalone_event_id(&self) -> String {
        let plaintext = self.standalone_plaintext();
        self.tokens.standalone_event_id(&self.id, &plaintext)
    }

    /// Made under the lock a change clears it under, so a change never leaves a stale one.
    fn standalone_plaintext(&self) -> Arc<[u8]> {
        let mut cached = self.standalone_claims.lock();
        if let Some(plaintext) = cached.as_ref() {
            return plaintext.clone();
        }
        let mut subscriptions: Vec<String> = self.subscriptions.lock().iter().cloned().collect();
        subscriptions.sort_unstable();
        let claims = StandaloneClaims {
            log_level: self.log_level(),
            subscriptions,
            subscriptions_dropped: false,
        };
        let plaintext: Arc<[u8]> = self.tokens.standalone_plaintext(&claims).into();
        *cached = Some(plaintext.clone());
        plaintext
    }

    /// Where a host's `Last-Event-ID` points, if it opens for this session.
    pub fn open_event_id(&self, token: &str) -> Result<EventPosition, TokenRefusal> {
        self.tokens.open_event_id(&self.id, token)
    }

    /// Whether an update of `uri` concerns this session (the URI or a sub-resource of one it watches).
    pub fn is_subscribed(&self, uri: &str) -> bool {
        self.subscriptions
            .lock()
            .iter()
            .any(|s| uri == s || uri.starts_with(&format!("{s}/")))
    }

    pub fn is_subscribed_exact(&self, uri: &str) -> bool {
        self.subscriptions.lock().contains(uri)
    }

    /// This session's own connection to `upstream` (`isolation = "per-session"`).
    pub fn connection(&self, upstream: &UpstreamId) -> Option<UpstreamHandle> {
        self.ties.connection(self.key, upstream)
    }

    /// Every connection opened for this session.
    pub fn connections(&self) -> Vec<UpstreamHandle> {
        self.ties.connections_of(self.key)
    }

    /// End the session: close its streams, cancel its calls upstream, refuse its pending
    /// server-to-client requests, and stop its own upstream connections.
    pub fn close(&self) {
        self.close_because("session ended");
    }

    /// [`Session::close`], telling upstreams why their calls are cancelled.
    pub fn close_because(&self, reason: &str) {
        self.closed.cancel();
        self.get_stream.lock().take();
        self.streams.clear();
        let calls: Vec<InflightCall> = self.inflight.lock().drain().map(|(_, c)| c).collect();
        for call in calls {
            call.upstream.cancel(call.upstream_id, reason);
        }
        self.ties.untie(self.key);
    }
}

impl HostLink for Session {
    fn key(&self) -> HostKey {
        self.key
    }

    fn caps(&self) -> ClientCaps {
        self.caps
    }

    fn log_level_name(&self) -> Option<&'static str> {
        Session::log_level_name(self)
    }

    /// Sealed for this session (a modern request's throwaway session keeps the route: its
    /// requests become input requests, and their ids never reach a host).
    fn request_id(&self, route: u64) -> RequestId {
        match self.is_modern() {
            true => RequestId::number(route),
            false => RequestId::string(&self.tokens.request_id(&self.id, route)),
        }
    }

    fn wants_log(&self, level: Option<&str>) -> bool {
        Session::wants_log(self, level)
    }

    fn push(&self, json: Arc<str>) -> bool {
        self.push_get(json)
    }

    fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_levels_filter() {
        let s = Session::new(
            "s".into(),
            "2025-11-25".into(),
            ClientCaps::default(),
            Arc::new(HostTies::new()),
        );
        assert!(s.wants_log(Some("debug")));
        s.set_log_level(log_level_rank("warning").unwrap());
        assert!(!s.wants_log(Some("info")));
        assert!(s.wants_log(Some("error")));
    }

    #[test]
    fn get_stream_is_exclusive_until_dropped() {
        let s = Session::new(
            "s".into(),
            "2025-11-25".into(),
            ClientCaps::default(),
            Arc::new(HostTies::new()),
        );
        let rx = s.open_get_stream().unwrap();
        assert!(s.open_get_stream().is_none());
        assert!(s.push_get("{}".into()));
        drop(rx);
        assert!(s.open_get_stream().is_some());
    }

    #[test]
    fn a_session_restored_from_its_state_behaves_the_same() {
        let ties = Arc::new(HostTies::new());
        let state = SessionState::new("2025-11-25", ClientCaps::ALL)
            .with_client_info(Some(serde_json::json!({"name": "c", "version": "1"})));
        let tokens = Arc::new(HostTokens::random());
        let first = Session::restore("a".into(), state, ties.clone(), tokens.clone());
        first.set_log_level(log_level_rank("error").unwrap());
        let sealed = serde_json::to_string(&first.state()).unwrap();
        let moved = Session::restore("a".into(), serde_json::from_str(&sealed).unwrap(), ties, tokens);
        assert_eq!(moved.state(), first.state());
        assert!(!moved.wants_log(Some("info")) && moved.wants_log(Some("critical")));
        assert_eq!(moved.caps, ClientCaps::ALL);
    }

    #[test]
    fn a_restore_happens_once_and_not_after_the_host_changed_its_state_here() {
        let session = || {
            Session::new(
                "s".into(),
                "2025-11-25".into(),
                ClientCaps::ALL,
                Arc::new(HostTies::new()),
            )
        };
        let fresh = session();
        assert!(fresh.begin_restore());
        assert!(!fresh.begin_restore(), "once");
        let subscribed = session();
        subscribed.subscribe("test://a");
        assert!(!subscribed.begin_restore(), "the host subscribed here");
        let leveled = session();
        leveled.set_log_level(2);
        assert!(!leveled.begin_restore(), "the host set its level here");
    }

    #[test]
    fn a_session_is_used_only_by_its_owner() {
        let ties = Arc::new(HostTies::new());
        let owned = Session::new("o".into(), "2025-11-25".into(), ClientCaps::ALL, ties.clone());
        owned.bind_owner("iss\u{0}alice".into());
        owned.bind_owner("iss\u{0}mallory".into());
        assert!(owned.owned_by(Some("iss\u{0}alice")));
        assert!(!owned.owned_by(Some("iss\u{0}mallory")) && !owned.owned_by(None));
        let open = Session::new("u".into(), "2025-11-25".into(), ClientCaps::ALL, ties);
        assert!(open.owned_by(None) && !open.owned_by(Some("iss\u{0}alice")));
    }
}
