//! Legacy HTTP+SSE for hosts (protocol 2024-11-05), next to the configured endpoint path:
//! `GET {prefix}/sse` opens a stream whose first event names the message endpoint
//! (`{prefix}/message?sessionId=…`); each POST there is served by the same router and sessions
//! as `/mcp` and answered 202, and everything for the session (responses, notifications,
//! server-to-client requests) goes out on the stream through one bounded queue. A host that
//! stops reading, or closes the stream, ends its session.

use super::streamable::{new_session_id, sse_response, with_keepalive};
use crate::auth::Principal;
use crate::core::context::RequestCtx;
use crate::core::hub::Hub;
use crate::core::methods::{self, initialize::initialize as open_session, Outcome};
use crate::core::observe::Opening;
use crate::core::rate_limit;
use crate::error::{codes, DownstreamError};
use crate::protocol::message::{error_response, result_response};
use crate::protocol::{parse_body, Body, Message, RawObject, RequestId};
use crate::session::host::Session;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Extension;
use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, StatusCode};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Messages queued for one host's stream; a host that lets it fill loses its session.
pub const OUT_QUEUE: usize = 1024;
/// Host messages accepted (202) and waiting to be served, per link; beyond it POSTs get 503.
pub const INBOX: usize = 256;
/// Legacy streams open at once.
pub const MAX_STREAMS: usize = 4096;
/// How often a stream checks, once shutdown began, whether its calls have finished.
const DRAIN_CHECK: Duration = Duration::from_millis(50);
/// The version a legacy host asking for it gets (it is not served on `/mcp`).
const LEGACY_VERSION: &str = "2024-11-05";

/// The legacy SSE and message paths that sit next to `mcp_path` (`/mcp` gives `/sse` and
/// `/message`; `/api/mcp` gives `/api/sse` and `/api/message`).
pub fn legacy_paths(mcp_path: &str) -> (String, String) {
    crate::config::legacy_paths(mcp_path)
}

/// One open legacy stream and, once the host sent `initialize`, its session.
struct Link {
    id: String,
    out: mpsc::Sender<Arc<str>>,
    /// Host messages in the order POSTed, served one at a time by the link's worker.
    inbox: mpsc::Sender<Message>,
    session: OnceLock<Arc<Session>>,
    /// Cancelled when the link ends (stream closed, queue overflow, session ended).
    closed: CancellationToken,
    /// Forwarded calls whose frames are still being pumped to the stream.
    calls: AtomicUsize,
    /// Who opened the stream; only they may post to it.
    principal: Option<Arc<Principal>>,
    /// The profile whose legacy endpoints opened it (`None`: the main endpoint's); only its
    /// message path may post to it.
    profile: Option<Arc<str>>,
}

/// The legacy endpoints' state: the open links by session id (the main endpoint's and every
/// profile's).
pub(super) struct Legacy {
    hub: Arc<Hub>,
    message_path: String,
    links: Mutex<HashMap<String, Arc<Link>>>,
}

impl Legacy {
    /// End a link and its session (idempotent).
    fn end(&self, link: &Link, why: &str) {
        if link.closed.is_cancelled() {
            return;
        }
        link.closed.cancel();
        self.links.lock().remove(&link.id);
        if self.hub.sessions.remove(&link.id).is_some() {
            tracing::info!(session = %crate::util::ids::session_digest(&link.id), why, "legacy SSE session ended");
        }
    }

    /// Queue a message on the link's stream; a full queue ends the link.
    fn push(&self, link: &Link, json: Arc<str>) -> bool {
        match link.out.try_send(json) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(session = %crate::util::ids::session_digest(&link.id), "legacy SSE host is not reading its stream");
                self.end(link, "the host stopped reading its stream");
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }
}

/// The routes of the legacy endpoints (none when they would collide with the MCP path).
pub fn router(hub: Arc<Hub>) -> axum::Router {
    match state(hub) {
        Some(state) => routes(state),
        None => axum::Router::new(),
    }
}

/// The legacy endpoints' state; `None` when they would collide with the MCP path (then no
/// profile has them either).
pub(super) fn state(hub: Arc<Hub>) -> Option<Arc<Legacy>> {
    let (sse_path, message_path) = legacy_paths(&hub.config().gateway.path);
    if hub.config().gateway.path == sse_path || hub.config().gateway.path == message_path {
        tracing::warn!(path = %hub.config().gateway.path, "legacy SSE endpoints disabled: they would share the MCP path");
        return None;
    }
    Some(Arc::new(Legacy {
        hub,
        message_path,
        links: Mutex::default(),
    }))
}

/// The main endpoint's legacy routes on `state`.
pub(super) fn routes(state: Arc<Legacy>) -> axum::Router {
    let (sse_path, message_path) = legacy_paths(&state.hub.config().gateway.path);
    axum::Router::new()
        .route(&sse_path, get(open_stream))
        .route(&message_path, post(message))
        .with_state(state)
}

/// `GET /sse`: a new link, its `endpoint` event first.
/// A profile whose `match` holds serves the link (its messages must match it too).
async fn open_stream(
    State(legacy): State<Arc<Legacy>>,
    principal: Option<Extension<Arc<Principal>>>,
    headers: HeaderMap,
) -> Response {
    let message_path = legacy.message_path.clone();
    let who = principal.map(|Extension(p)| p);
    let profile = super::matched_profile(&legacy.hub, &headers, who.as_deref());
    open_link(&legacy, who, profile, message_path)
}

/// `GET {profile path}/sse`: a new link of `profile`, whose messages go to `message_path`.
pub(super) fn open_profile_stream(
    legacy: &Arc<Legacy>,
    principal: Option<Arc<Principal>>,
    profile: Arc<str>,
    message_path: String,
) -> Response {
    open_link(legacy, principal, Some(profile), message_path)
}

/// `POST {profile path}/message?sessionId=…`: as [`message`], for the links of `profile` only.
pub(super) async fn profile_message(
    legacy: &Arc<Legacy>,
    principal: Option<Arc<Principal>>,
    profile: Arc<str>,
    (uri, headers): (&http::Uri, &HeaderMap),
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match super::streamable::read_body(&legacy.hub, body) {
        Ok(body) => body,
        Err(refusal) => return refusal.into_http(),
    };
    match accept_message(legacy, (principal.as_deref(), Some(&profile)), uri, headers, body).await {
        Ok(()) => (StatusCode::ACCEPTED, "Accepted").into_response(),
        Err((err, id)) => err.into_http_for(id),
    }
}

/// A new link (of `profile`, or the main endpoint's) and its stream, `endpoint` event first.
fn open_link(
    legacy: &Arc<Legacy>,
    principal: Option<Arc<Principal>>,
    profile: Option<Arc<str>>,
    message_path: String,
) -> Response {
    if legacy.hub.shutdown.is_cancelled() {
        return DownstreamError::Unavailable(super::SHUTTING_DOWN).into_http();
    }
    let (tx, mut rx) = mpsc::channel(OUT_QUEUE);
    let (inbox, queued) = mpsc::channel(INBOX);
    let link = Arc::new(Link {
        id: new_session_id(),
        out: tx,
        inbox,
        session: OnceLock::new(),
        closed: CancellationToken::new(),
        calls: AtomicUsize::new(0),
        principal,
        profile,
    });
    {
        let mut links = legacy.links.lock();
        if links.len() >= MAX_STREAMS {
            return DownstreamError::Unavailable("too many legacy SSE streams").into_http();
        }
        links.insert(link.id.clone(), link.clone());
    }
    tokio::spawn(serve_in_order(legacy.clone(), link.clone(), queued));
    tracing::debug!(session = %crate::util::ids::session_digest(&link.id), "legacy SSE stream opened");
    let endpoint = format!("{message_path}?sessionId={}", link.id);
    let first = Bytes::from(format!("event: endpoint\ndata: {endpoint}\n\n"));
    let shutdown = legacy.hub.shutdown.clone();
    let init_deadline = tokio::time::Instant::now() + legacy.hub.config().gateway.session_idle_timeout;
    let guard = EndOnDrop {
        legacy: legacy.clone(),
        link: link.clone(),
    };
    let frames = async_stream::stream! {
        let _guard = guard;
        yield first;
        let mut drain = tokio::time::interval(DRAIN_CHECK);
        let mut draining = false;
        loop {
            tokio::select! {
                biased;
                msg = rx.recv() => match msg {
                    Some(json) => yield message_event(&json),
                    None => break,
                },
                _ = link.closed.cancelled() => break,
                _ = shutdown.cancelled(), if !draining => draining = true,
                _ = drain.tick(), if draining => {
                    if link.calls.load(Ordering::Acquire) == 0 {
                        break;
                    }
                }
                _ = tokio::time::sleep_until(init_deadline), if link.session.get().is_none() => break,
            }
        }
    };
    sse_response(with_keepalive(frames.boxed()))
}

/// Ends the link when its stream is dropped (the host closed it, or it ended).
struct EndOnDrop {
    legacy: Arc<Legacy>,
    link: Arc<Link>,
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.legacy.end(&self.link, "the stream closed");
    }
}

/// One SSE `message` event (CR/LF in the JSON, only ever insignificant whitespace, become spaces).
fn message_event(json: &str) -> Bytes {
    let data = crate::protocol::sse::event_bytes(None, None, json);
    let mut out = Vec::with_capacity(data.len() + 15);
    out.extend_from_slice(b"event: message\n");
    out.extend_from_slice(&data);
    Bytes::from(out)
}

/// The `sessionId` query parameter (session ids are plain hex, so nothing is percent-decoded).
fn session_param(uri: &http::Uri) -> Option<&str> {
    uri.query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix("sessionId="))
}

/// `POST /message?sessionId=…`: one message or a batch, queued for the link's worker and
/// answered 202 at once (answers to server requests are delivered at once); replies go out on
/// the stream.
async fn message(
    State(legacy): State<Arc<Legacy>>,
    principal: Option<Extension<Arc<Principal>>>,
    uri: http::Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match super::streamable::read_body(&legacy.hub, body) {
        Ok(body) => body,
        Err(refusal) => return refusal.into_http(),
    };
    let who = principal.map(|Extension(p)| p);
    let profile = super::matched_profile(&legacy.hub, &headers, who.as_deref());
    match accept_message(&legacy, (who.as_deref(), profile.as_ref()), &uri, &headers, body).await {
        Ok(()) => (StatusCode::ACCEPTED, "Accepted").into_response(),
        Err((err, id)) => err.into_http_for(id),
    }
}

/// Queue a POST's messages for the link's worker; a refusal of the whole POST comes with the id
/// of its one request when it is about that request (a rate limit).
async fn accept_message(
    legacy: &Arc<Legacy>,
    (who, profile): (Option<&Principal>, Option<&Arc<str>>),
    uri: &http::Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<(), (DownstreamError, Option<RequestId>)> {
    let id = session_param(uri).ok_or_else(|| {
        let missing = DownstreamError::BadRequest("the sessionId query parameter is required".into());
        (missing, None)
    })?;
    let owner = who.map(Principal::owner);
    let link = legacy
        .links
        .lock()
        .get(id)
        .cloned()
        // Another principal's stream is unknown to this one (404, as if it did not exist).
        .filter(|link| link.principal.as_ref().map(|p| p.owner()) == owner)
        // Another endpoint's stream too: a link is posted to at its own message path only.
        .filter(|link| link.profile.as_ref() == profile)
        .ok_or((DownstreamError::UnknownSession, None))?;
    let text = super::streamable::json_body(headers, &body).map_err(|e| (e, None))?;
    let (items, single) = match parse_body(text) {
        Ok(Body::Single(msg)) => (vec![Ok(msg)], true),
        Ok(Body::Batch(items)) => (items, false),
        Err(err) if err.code() == codes::PARSE_ERROR => {
            return Err((DownstreamError::Parse(err.to_string()), None))
        }
        Err(err) => (vec![Err(err)], true),
    };
    for item in items {
        let msg = match item {
            Ok(msg) => msg,
            Err(err) => {
                let reply = error_response(err.id().cloned(), err.code(), &err.to_string());
                legacy.push(&link, reply.to_json().into());
                continue;
            }
        };
        if let Message::Request { id, .. } = &msg {
            // A lone request over the limit is refused with the POST's status; one of a batch
            // gets its error on the stream, as its answer would have.
            match (rate_limit::admit(&legacy.hub, who).await, single) {
                (Ok(()), _) => {}
                (Err(refusal), true) => return Err((refusal, Some(id.clone()))),
                (Err(refusal), false) => {
                    legacy.push(&link, refusal.reply(id.clone()).to_json().into());
                    continue;
                }
            }
        }
        if matches!(msg, Message::Response { .. }) {
            serve(legacy, &link, msg).await;
        } else if link.inbox.try_send(msg).is_err() {
            return Err((
                DownstreamError::Unavailable("too many messages waiting for this session"),
                None,
            ));
        }
    }
    Ok(())
}

/// The link's worker: its host messages served one at a time, in the order they were POSTed
/// (a cancellation never overtakes its request), until the link ends.
async fn serve_in_order(legacy: Arc<Legacy>, link: Arc<Link>, mut queued: mpsc::Receiver<Message>) {
    loop {
        tokio::select! {
            msg = queued.recv() => match msg {
                Some(msg) => serve(&legacy, &link, msg).await,
                None => return,
            },
            _ = link.closed.cancelled() => return,
        }
    }
}

/// Serve one host message on a link: `initialize` opens the session, anything else goes to the
/// router once it is open.
async fn serve(legacy: &Arc<Legacy>, link: &Arc<Link>, msg: Message) {
    let refusal = match (link.session.get(), msg) {
        (None, Message::Request { id, method, params }) if method == "initialize" => {
            return initialize(legacy, link, id, params.as_deref()).await;
        }
        (Some(session), msg) if msg.method() != Some("initialize") => {
            let session = session.clone();
            return dispatch(legacy, link, &session, msg).await;
        }
        (Some(_), Message::Request { id, .. }) => (id, "the session is already initialized"),
        (None, Message::Request { id, .. }) => (id, "send initialize first"),
        (_, _) => return,
    };
    let (id, why) = refusal;
    let reply = error_response(Some(id), codes::INVALID_REQUEST, why);
    legacy.push(link, reply.to_json().into());
}

/// Route one message of an initialized link; replies and forwarded calls' frames go to its stream.
async fn dispatch(legacy: &Arc<Legacy>, link: &Arc<Link>, session: &Arc<Session>, msg: Message) {
    let ctx = RequestCtx::on(session.clone()).by(link.principal.clone());
    match methods::dispatch(&legacy.hub, &ctx, msg).await {
        Outcome::Accepted => {}
        Outcome::Denied { id, refusal } => {
            legacy.push(link, refusal.reply(id).to_json().into());
        }
        Outcome::Refused(refusal) => {
            legacy.push(link, refusal.response(None).to_json().into());
        }
        Outcome::Reply(reply) => {
            legacy.push(link, reply.to_json().into());
        }
        Outcome::Forward(call) => {
            link.calls.fetch_add(1, Ordering::AcqRel);
            let (legacy, link) = (legacy.clone(), link.clone());
            tokio::spawn(async move {
                let frames = call.into_frames();
                futures_util::pin_mut!(frames);
                loop {
                    tokio::select! {
                        frame = frames.next() => match frame {
                            Some(frame) => {
                                let json = frame.into_json();
                                if json.is_some_and(|json| !legacy.push(&link, json)) {
                                    break;
                                }
                            }
                            None => break,
                        },
                        _ = link.closed.cancelled() => break,
                    }
                }
                link.calls.fetch_sub(1, Ordering::AcqRel);
            });
        }
    }
}

/// Open the link's session with the router's `initialize` (a host asking for 2024-11-05 gets
/// it), and route the session's standalone messages to the stream.
async fn initialize(
    legacy: &Arc<Legacy>,
    link: &Arc<Link>,
    id: RequestId,
    params: Option<&serde_json::value::RawValue>,
) {
    let params = RawObject::parse_opt(params);
    let config = legacy.hub.config_full();
    let profile = match &link.profile {
        None => None,
        Some(name) => match config.profile(name) {
            Some(profile) => Some(profile),
            None => {
                // A reload removed the profile since the stream opened.
                let reply = error_response(
                    Some(id),
                    codes::INVALID_REQUEST,
                    "this endpoint's profile is gone",
                );
                legacy.push(link, reply.to_json().into());
                return;
            }
        },
    };
    let ctx = RequestCtx::opening()
        .by(link.principal.clone())
        .at(link.profile.clone());
    let opening = Opening::start(&legacy.hub, ctx, &id, params.as_ref());
    let (mut session, mut result) =
        open_session(&legacy.hub, params.as_ref(), profile, |_| link.id.clone()).await;
    let asked = params.as_ref().and_then(|p| p.get_str("protocolVersion"));
    if asked.as_deref() == Some(LEGACY_VERSION) {
        let state = crate::session::SessionState {
            protocol_version: LEGACY_VERSION.into(),
            ..session.state()
        };
        session = legacy.hub.open_session(link.id.clone(), state);
        if let Ok(mut obj) = RawObject::parse(result.get()) {
            obj.set_str("protocolVersion", LEGACY_VERSION);
            result = obj.to_raw();
        }
    }
    if let Some(principal) = &link.principal {
        session.bind_owner(principal.owner());
        session.note_viewer(principal.clone());
    }
    if link.closed.is_cancelled() || link.session.set(session.clone()).is_err() {
        return;
    }
    let Some(mut standalone) = session.open_get_stream() else {
        return;
    };
    session.mark_legacy_sse();
    legacy.hub.sessions.insert(session.clone());
    if link.closed.is_cancelled() {
        legacy.hub.sessions.remove(&session.id);
        return;
    }
    tracing::info!(session = %session.log_id(), version = %session.protocol_version, "legacy SSE session opened");
    opening.opened(&session);
    legacy.push(link, result_response(id, result).to_json().into());
    let (legacy, link) = (legacy.clone(), link.clone());
    tokio::spawn(async move {
        loop {
            tokio::select! {
                msg = standalone.recv() => match msg {
                    Some(json) => {
                        if !legacy.push(&link, json) {
                            return;
                        }
                    }
                    None => break,
                },
                _ = link.closed.cancelled() => return,
            }
        }
        legacy.end(&link, "the session ended");
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_paths_sit_next_to_the_mcp_path() {
        assert_eq!(legacy_paths("/mcp"), ("/sse".into(), "/message".into()));
        assert_eq!(legacy_paths("/"), ("/sse".into(), "/message".into()));
        assert_eq!(
            legacy_paths("/api/v1/mcp"),
            ("/api/v1/sse".into(), "/api/v1/message".into())
        );
    }

    #[tokio::test]
    async fn a_host_that_stops_reading_loses_its_session() {
        let config = crate::Config::from_toml_str("", "test.toml", &|_| None).unwrap();
        let (hub, _inputs) = Hub::new(Arc::new(config), CancellationToken::new(), None);
        let legacy = Legacy {
            hub: hub.clone(),
            message_path: "/message".into(),
            links: Mutex::default(),
        };
        let (out, _unread) = mpsc::channel(1);
        let (inbox, _queued) = mpsc::channel(1);
        let link = Arc::new(Link {
            principal: None,
            profile: None,
            id: "l1".into(),
            out,
            inbox,
            session: OnceLock::new(),
            closed: CancellationToken::new(),
            calls: AtomicUsize::new(0),
        });
        legacy.links.lock().insert(link.id.clone(), link.clone());
        let session = hub.new_session("l1".into(), "2025-11-25".into(), Default::default());
        hub.sessions.insert(session.clone());
        assert!(legacy.push(&link, "{}".into()));
        assert!(!legacy.push(&link, "{}".into()));
        assert!(link.closed.is_cancelled() && session.closed.is_cancelled());
        assert!(legacy.links.lock().is_empty() && hub.sessions.get("l1").is_none());
    }

    #[test]
    fn message_events_are_named_and_never_split() {
        let event = message_event("{\"a\":\r\n1}");
        assert_eq!(&event[..], b"event: message\ndata: {\"a\":  1}\n\n");
    }
}
