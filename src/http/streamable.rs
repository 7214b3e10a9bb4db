//! The Streamable HTTP endpoint: POST (JSON or resumable SSE replies, 202 for notifications and
//! responses, 400 for an answer to a request mcpmux never sent), GET (the session's standalone
//! stream, or the continuation of a POST stream named by `Last-Event-ID`: [`super::standalone`]),
//! DELETE (end the session), with the status codes of the 2025-11-25 transport.

use super::modern;
use super::resume;
use super::standalone;
use super::{modern_only, SESSION_HEADER, SHUTTING_DOWN, VERSION_HEADER};
use crate::auth::Principal;
use crate::core::context::RequestCtx;
use crate::core::hub::Hub;
use crate::core::methods::{self, initialize::initialize, invalid_params_object, Outcome};
use crate::core::observe::Opening;
use crate::core::rate_limit;
use crate::core::restore::restore;
use crate::core::takeover::take_over;
use crate::error::{codes, json_text, DownstreamError};
use crate::protocol::message::error_reply;
use crate::protocol::message::{error_response, result_response};
use crate::protocol::{parse_body, version, Body, Message, RawObject};
use crate::session::host::Session;
use crate::session::host_tokens::EventPosition;
use crate::util::ids::session_digest;
use axum::body::Body as HttpBody;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use bytes::Bytes;
use futures_util::stream::{self, BoxStream, StreamExt};
use http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

const LAST_EVENT_ID_HEADER: &str = "last-event-id";
/// The most messages one JSON-RPC batch (2025-03-26) may hold.
pub const MAX_BATCH_LEN: usize = 256;
/// Comment lines that keep idle GET streams from being cut by proxies.
const KEEPALIVE_EVERY: Duration = Duration::from_secs(15);

struct Endpoint {
    hub: Arc<Hub>,
    /// The legacy SSE endpoints' state, shared by the main endpoint and the profiles; `None`
    /// when the main endpoint has none.
    legacy: Option<Arc<super::legacy_sse::Legacy>>,
}

/// The host faces: the configured MCP path and the legacy SSE endpoints next to it; any other
/// path is looked up among the `[profiles]` in force (so a reload may add or remove one). The
/// body limit, access checks and tracing are layers the composition root puts around it.
pub fn router(hub: Arc<Hub>) -> axum::Router {
    let path = hub.config().gateway.path.clone();
    let legacy = super::legacy_sse::state(hub.clone());
    let legacy_routes = legacy.clone().map(super::legacy_sse::routes).unwrap_or_default();
    let endpoint = Arc::new(Endpoint { hub, legacy });
    axum::Router::new()
        .route(&path, any(handle))
        .fallback(profile_face)
        .with_state(endpoint)
        .merge(legacy_routes)
}

async fn handle(State(ep): State<Arc<Endpoint>>, request: axum::extract::Request) -> Response {
    let (who, method, headers, body) = take_apart(request).await;
    // A profile whose `match` holds serves this request of the main endpoint.
    let profile = super::matched_profile(&ep.hub, &headers, who.as_deref());
    // Boxed: the layers around the handler move its future, which is small then (the pipeline's
    // state machine is kilobytes: copied at every move, it cost more than some of its work).
    Box::pin(serve_endpoint(&ep.hub, (who, profile), method, &headers, body)).await
}

/// A request's principal, method, headers and body (within `gateway.max_body_bytes`), the
/// headers moved out rather than copied as axum's `HeaderMap` extractor does.
async fn take_apart(
    mut request: axum::extract::Request,
) -> (
    Option<Arc<Principal>>,
    Method,
    HeaderMap,
    Result<Bytes, BytesRejection>,
) {
    use axum::extract::FromRequest;
    let who = request.extensions().get::<Arc<Principal>>().cloned();
    let method = request.method().clone();
    let headers = std::mem::take(request.headers_mut());
    let body = Bytes::from_request(request, &()).await;
    (who, method, headers, body)
}

/// A path that is no route of the main endpoint: a profile's endpoint or legacy SSE endpoint
/// when a profile in force is served there, else 404.
async fn profile_face(State(ep): State<Arc<Endpoint>>, request: axum::extract::Request) -> Response {
    use crate::config::ProfileFace;
    let uri = request.uri().clone();
    let (who, method, headers, body) = take_apart(request).await;
    if ep.hub.auth.is_on() && who.is_none() {
        // Passed on unauthenticated as a path no face served (a reload may have added the
        // profile since): nothing is served here without a credential.
        return StatusCode::NOT_FOUND.into_response();
    }
    let (name, face, message_path) = {
        let config = ep.hub.config();
        match config.profile_at(uri.path()) {
            Some((profile, face)) => (
                Arc::<str>::from(profile.name.as_str()),
                face,
                profile.legacy_paths().1,
            ),
            None => return StatusCode::NOT_FOUND.into_response(),
        }
    };
    let legacy = ep.legacy.as_ref();
    match (face, legacy, method) {
        (ProfileFace::Endpoint, _, method) => {
            Box::pin(serve_endpoint(&ep.hub, (who, Some(name)), method, &headers, body)).await
        }
        (ProfileFace::LegacyStream, Some(legacy), Method::GET) => {
            super::legacy_sse::open_profile_stream(legacy, who, name, message_path)
        }
        (ProfileFace::LegacyMessage, Some(legacy), Method::POST) => {
            super::legacy_sse::profile_message(legacy, who, name, (&uri, &headers), body).await
        }
        (_, Some(_), _) => StatusCode::METHOD_NOT_ALLOWED.into_response(),
        (_, None, _) => StatusCode::NOT_FOUND.into_response(),
    }
}

/// One request to a Streamable HTTP endpoint: the main one (`profile` `None`) or a profile's.
async fn serve_endpoint(
    hub: &Arc<Hub>,
    (who, profile): (Option<Arc<Principal>>, Option<Arc<str>>),
    method: Method,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let at = profile.as_ref();
    let outcome = match method {
        Method::GET | Method::DELETE if modern_only(headers) => Err(DownstreamError::MethodNotAllowed),
        Method::POST => match read_body(hub, body) {
            Ok(body) => post(hub, headers, (who, profile), body).await,
            Err(refusal) => Err(refusal),
        },
        Method::GET => get(hub, headers, (who.as_ref(), at)).await,
        Method::DELETE => delete(hub, headers, (who.as_ref(), at)),
        _ => Err(DownstreamError::MethodNotAllowed),
    };
    outcome.unwrap_or_else(DownstreamError::into_http)
}

/// The POST body, or the refusal when it could not be read: over `gateway.max_body_bytes` is
/// 413 with a JSON-RPC error body like every other refusal (axum's own answer is plain text).
pub(super) fn read_body(hub: &Hub, body: Result<Bytes, BytesRejection>) -> Result<Bytes, DownstreamError> {
    body.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => {
            DownstreamError::PayloadTooLarge(hub.config().gateway.max_body_bytes)
        }
        _ => DownstreamError::BadRequest(format!("cannot read the body: {}", rejection.body_text())),
    })
}

fn accepts(headers: &HeaderMap, media: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',')
                .map(|p| p.split(';').next().unwrap_or("").trim())
                .any(|p| {
                    p == media || p == "*/*" || p.strip_suffix("/*").is_some_and(|t| media.starts_with(t))
                })
        })
}

/// What a POST must accept: JSON and SSE (the header every SDK sends is told at a glance).
fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all(header::ACCEPT).iter();
    if let (Some(only), None) = (values.next(), values.next()) {
        if only.as_bytes() == b"application/json, text/event-stream" {
            return true;
        }
    }
    accepts(headers, "application/json") && accepts(headers, "text/event-stream")
}

fn session_id(headers: &HeaderMap) -> Result<&str, DownstreamError> {
    let value = headers
        .get(&SESSION_HEADER)
        .ok_or(DownstreamError::MissingSession)?;
    value
        .to_str()
        .map_err(|_| DownstreamError::BadRequest("invalid Mcp-Session-Id".into()))
}

/// The request's session; another principal's session is unknown to it (404, as if it did not
/// exist: its id says nothing), and so is a session of another endpoint (each profile's and the
/// main endpoint's sessions are their own). A session not held here is taken over from its
/// sealed id when another process issued it to this principal (`core::takeover`).
fn find_session(
    hub: &Hub,
    headers: &HeaderMap,
    (who, profile): (Option<&Arc<Principal>>, Option<&Arc<str>>),
) -> Result<Arc<Session>, DownstreamError> {
    let id = session_id(headers)?;
    let owner = who.map(|p| p.owner());
    let session = match hub.sessions.get(id) {
        Some(session) if session.owned_by(owner.as_deref()) => session,
        Some(_) => return Err(DownstreamError::UnknownSession),
        None => take_over(hub, id, owner.as_deref())?,
    };
    match session.profile() == profile {
        true => Ok(session),
        false => Err(DownstreamError::UnknownSession),
    }
}

/// The negotiated version the request claims; absent means 2025-03-26.
fn claimed_version(headers: &HeaderMap) -> Result<String, DownstreamError> {
    let Some(value) = headers.get(&VERSION_HEADER) else {
        return Ok(version::DEFAULT_NEGOTIATED.to_string());
    };
    let v = value.to_str().unwrap_or_default().trim();
    if version::is_supported(v) {
        Ok(v.to_string())
    } else {
        Err(DownstreamError::BadRequest(format!(
            "Unsupported protocol version {v:?}; this endpoint speaks {} (open a session with initialize)",
            version::SESSION_ERA_VERSIONS.join(", ")
        )))
    }
}

/// A random session id (legacy SSE links; session-era ids are sealed: `SessionIds::issue`).
pub(super) fn new_session_id() -> String {
    crate::util::ids::random_hex(64)
}

fn json_reply(msg: &Message, session: Option<&str>) -> Response {
    let mut resp = json_text(StatusCode::OK, msg.to_json());
    if let Some(sid) = session.and_then(|s| HeaderValue::from_str(s).ok()) {
        resp.headers_mut().insert(SESSION_HEADER, sid);
    }
    resp
}

/// One SSE event without an id.
fn sse_frame(json: &str) -> Bytes {
    crate::protocol::sse::event_bytes(None, None, json)
}

/// `frames` with a keepalive comment every [`KEEPALIVE_EVERY`] while they last, so proxies do
/// not cut an idle long-lived stream (the GET stream, a listen stream, a legacy SSE stream).
pub(super) fn with_keepalive(frames: BoxStream<'static, Bytes>) -> BoxStream<'static, Bytes> {
    let stream = async_stream::stream! {
        let mut frames = frames;
        let mut keepalive = tokio::time::interval(KEEPALIVE_EVERY);
        keepalive.tick().await;
        loop {
            tokio::select! {
                frame = frames.next() => match frame {
                    Some(frame) => yield frame,
                    None => break,
                },
                _ = keepalive.tick() => yield Bytes::from_static(b": keepalive\n\n"),
            }
        }
    };
    stream.boxed()
}

pub(super) fn sse_response(frames: BoxStream<'static, Bytes>) -> Response {
    let body = HttpBody::from_stream(frames.map(Ok::<_, Infallible>));
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

/// A POST body's text, once its `Content-Type` says JSON and it is UTF-8 (415 or a parse error
/// otherwise).
pub(super) fn json_body<'b>(headers: &HeaderMap, body: &'b Bytes) -> Result<&'b str, DownstreamError> {
    let json_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().to_ascii_lowercase().starts_with("application/json"));
    if !json_type {
        return Err(DownstreamError::UnsupportedMediaType);
    }
    std::str::from_utf8(body).map_err(|_| DownstreamError::Parse("body is not UTF-8".into()))
}

async fn post(
    hub: &Arc<Hub>,
    headers: &HeaderMap,
    (who, profile): (Option<Arc<Principal>>, Option<Arc<str>>),
    body: Bytes,
) -> Result<Response, DownstreamError> {
    if !accepts_json_and_sse(headers) {
        return Err(DownstreamError::NotAcceptable(
            "Accept must list application/json and text/event-stream",
        ));
    }
    let text = json_body(headers, &body)?;
    let parsed = match parse_body(text) {
        Ok(b) => b,
        Err(err) if err.code() == codes::PARSE_ERROR => return Err(DownstreamError::Parse(err.to_string())),
        Err(err) => {
            let msg = error_response(err.id().cloned(), err.code(), &err.to_string());
            return Ok(json_text(StatusCode::BAD_REQUEST, msg.to_json()));
        }
    };
    match parsed {
        Body::Single(Message::Request { id, method, params }) => {
            if let Err(refusal) = rate_limit::admit(hub, who.as_deref()).await {
                return Ok(refusal.into_http_for(Some(id)));
            }
            // The one parse of the request's params: everything after works on this object.
            let params = (params.as_deref())
                .map(|p| RawObject::parse(p.get()))
                .transpose()
                .map_err(|_| ());
            if method == "initialize" {
                if hub.shutdown.is_cancelled() {
                    return Err(DownstreamError::Unavailable(SHUTTING_DOWN));
                }
                let params = params.ok().flatten();
                let owner = who.as_ref().map(|p| p.owner());
                let sealed_id = |state: &_| hub.session_ids.issue(state, owner.as_deref());
                let config = hub.config_full();
                let serving = match &profile {
                    None => None,
                    // A reload removed the profile since the request was routed.
                    Some(name) => match config.profile(name) {
                        Some(serving) => Some(serving),
                        None => return Ok(StatusCode::NOT_FOUND.into_response()),
                    },
                };
                let ctx = RequestCtx::opening().by(who.clone()).at(profile.clone());
                let opening = Opening::start(hub, ctx, &id, params.as_ref());
                let (session, result) = initialize(hub, params.as_ref(), serving, sealed_id).await;
                if let Some(owner) = owner {
                    session.bind_owner(owner);
                }
                if let Some(principal) = &who {
                    session.note_viewer(principal.clone());
                }
                tracing::info!(session = %session.log_id(), version = %session.protocol_version, "session opened");
                hub.sessions.insert(session.clone());
                opening.opened(&session);
                return Ok(json_reply(&result_response(id, result), Some(&session.id)));
            }
            let object = params.as_ref().ok().and_then(Option::as_ref);
            if modern::is_modern_request(headers, &method, object) {
                return Ok(Box::pin(modern::serve(hub, headers, (who, profile), id, method, params)).await);
            }
            claimed_version(headers)?;
            let ctx = RequestCtx::on(find_session(hub, headers, (who.as_ref(), profile.as_ref()))?).by(who);
            let outcome = match params {
                Ok(params) => {
                    Box::pin(methods::request(
                        hub,
                        &ctx,
                        id,
                        method,
                        params.unwrap_or_default(),
                    ))
                    .await
                }
                Err(()) => Outcome::Reply(invalid_params_object(id)),
            };
            Ok(answer(outcome).await)
        }
        Body::Single(Message::Notification { .. }) if modern_only(headers) => {
            // A modern client's notification (only notifications/cancelled exists, and over
            // HTTP a call is cancelled by closing its stream): nothing to do.
            Ok(StatusCode::ACCEPTED.into_response())
        }
        Body::Single(msg) => {
            claimed_version(headers)?;
            let ctx = RequestCtx::on(find_session(hub, headers, (who.as_ref(), profile.as_ref()))?).by(who);
            let outcome = Box::pin(methods::dispatch(hub, &ctx, msg)).await;
            Ok(answer(outcome).await)
        }
        Body::Batch(items) => {
            let negotiated = claimed_version(headers)?;
            let session = find_session(hub, headers, (who.as_ref(), profile.as_ref()))?;
            if !version::allows_batches(&negotiated) && !version::allows_batches(&session.protocol_version) {
                return Err(DownstreamError::BadRequest(format!(
                    "JSON-RPC batches are not allowed in {negotiated}"
                )));
            }
            if items.len() > MAX_BATCH_LEN {
                return Err(DownstreamError::BadRequest(format!(
                    "a batch of {} messages is over the limit of {MAX_BATCH_LEN}",
                    items.len()
                )));
            }
            Ok(Box::pin(batch(hub, &session, who, items)).await)
        }
    }
}

/// A session-era request's HTTP answer: 202, a JSON reply, or the forwarded call's JSON
/// response or resumable stream.
async fn answer(outcome: Outcome) -> Response {
    match outcome {
        Outcome::Accepted => StatusCode::ACCEPTED.into_response(),
        Outcome::Denied { id, refusal } => refusal.into_http_for(Some(id)),
        Outcome::Refused(refusal) => refusal.into_http(),
        Outcome::Reply(reply) => json_reply(&reply, None),
        Outcome::Forward(call) => {
            let session = call.session.clone();
            match resume::start(call, session).await {
                resume::Reply::Json(json) => json_text(StatusCode::OK, json.to_string()),
                resume::Reply::Stream(frames) => sse_response(frames),
            }
        }
    }
}

/// Serve a 2025-03-26 batch: every reply on one SSE stream, or 202 when nothing needs one.
async fn batch(
    hub: &Arc<Hub>,
    session: &Arc<Session>,
    who: Option<Arc<Principal>>,
    items: Vec<Result<Message, crate::protocol::ParseError>>,
) -> Response {
    let ctx = RequestCtx::on(session.clone()).by(who);
    let mut immediate = Vec::new();
    let mut streams = Vec::new();
    for item in items {
        let msg = match item {
            Ok(Message::Request { id, method, .. }) if method == "initialize" => {
                immediate.push(error_reply(
                    id,
                    codes::INVALID_REQUEST,
                    "initialize cannot be batched",
                    None,
                ));
                continue;
            }
            Ok(msg) => msg,
            Err(err) => {
                immediate.push(error_response(err.id().cloned(), err.code(), &err.to_string()));
                continue;
            }
        };
        // Each request of a batch counts; one refused is its JSON-RPC error among the replies.
        if let Message::Request { id, .. } = &msg {
            if let Err(refusal) = rate_limit::admit(hub, ctx.principal.as_deref()).await {
                immediate.push(refusal.reply(id.clone()));
                continue;
            }
        }
        match methods::dispatch(hub, &ctx, msg).await {
            Outcome::Accepted => {}
            Outcome::Reply(reply) => immediate.push(reply),
            // One reply of many cannot set the HTTP status: the refusal is its JSON-RPC error.
            Outcome::Denied { id, refusal } => immediate.push(refusal.reply(id)),
            Outcome::Refused(refusal) => immediate.push(refusal.response(None)),
            Outcome::Forward(call) => streams.push(
                // A pause is dropped: mcpmux resumes the upstream and a batch's one stream stays open.
                call.into_frames()
                    .filter_map(|frame| async move { frame.into_json() })
                    .boxed(),
            ),
        }
    }
    if immediate.is_empty() && streams.is_empty() {
        return StatusCode::ACCEPTED.into_response();
    }
    let first: Vec<Bytes> = immediate.iter().map(|m| sse_frame(&m.to_json())).collect();
    let rest = stream::select_all(streams).map(|json| sse_frame(&json));
    sse_response(stream::iter(first).chain(rest).boxed())
}

async fn get(
    hub: &Arc<Hub>,
    headers: &HeaderMap,
    who: (Option<&Arc<Principal>>, Option<&Arc<str>>),
) -> Result<Response, DownstreamError> {
    if !accepts(headers, "text/event-stream") {
        return Err(DownstreamError::NotAcceptable(
            "Accept must list text/event-stream",
        ));
    }
    claimed_version(headers)?;
    let session = find_session(hub, headers, who)?;
    let last_event_id = headers.get(LAST_EVENT_ID_HEADER).and_then(|v| v.to_str().ok());
    let position = standalone::position(&session, last_event_id);
    match &position {
        Some(EventPosition::Call { stream, seq, .. }) => {
            if let Some(stream) = session.streams.get(*stream) {
                session.touch();
                return Ok(sse_response(resume::read(stream, *seq, session)));
            }
            // Not kept here any more (every event was delivered, or it expired unread): as if
            // no id was sent.
        }
        // The call ran in another process (the session's earlier home, gone or restarted): the
        // host resumes because its stream broke before the answer, which it gets now.
        Some(EventPosition::CallElsewhere {
            request: Some(request),
        }) => {
            let why = "it ran on another replica, which no longer holds the session";
            return Ok(sse_response(resume::lost(request.clone(), why)));
        }
        _ => {}
    }
    // No Last-Event-ID, or one naming no stream kept here: the standalone stream.
    if hub.shutdown.is_cancelled() {
        return Err(DownstreamError::Unavailable(SHUTTING_DOWN));
    }
    let queue = session.open_get_stream().ok_or(DownstreamError::Conflict(
        "this session already has an open GET stream",
    ))?;
    session.touch();
    if let Some(EventPosition::Standalone(claims)) = position {
        restore(hub, &session, who.0.cloned(), claims).await;
    }
    let events = standalone::events(queue, session, hub.shutdown.clone());
    Ok(sse_response(with_keepalive(events)))
}

fn delete(
    hub: &Arc<Hub>,
    headers: &HeaderMap,
    who: (Option<&Arc<Principal>>, Option<&Arc<str>>),
) -> Result<Response, DownstreamError> {
    let id = session_id(headers)?;
    find_session(hub, headers, who)?;
    match hub.sessions.remove(id) {
        Some(_) => {
            tracing::info!(session = %session_digest(id), "session ended by DELETE");
            Ok(StatusCode::OK.into_response())
        }
        None => Err(DownstreamError::UnknownSession),
    }
}

#[cfg(test)]
#[path = "streamable_tests.rs"]
mod tests;
