//! The 2026-07-28 face of the endpoint: a request carrying the modern `_meta` is served without
//! a session. Its version, metadata and headers are checked; `server/discover` and the lists are
//! answered from the catalog; calls run in a throwaway session whose answers are reshaped for a
//! modern host and whose upstream requests become input-required results.

use super::forward::{error_reply, Frame};
use super::input_required::{self, ModernCall};
use super::request_state::{principal_digest, request_digest, PREFIX as STATE_PREFIX};
use super::resume;
use super::router::{self, Dispatch};
use super::session::{log_level_rank, ClientCaps, Session};
use crate::catalog::ListKind;
use crate::error::codes;
use crate::hub::{Hub, UpstreamSlot};
use crate::protocol::message::{error_object, result_response, to_raw};
use crate::protocol::modern::{self, RequestMeta, MODERN_VERSION};
use crate::protocol::modern_params;
use crate::protocol::modern_result::{own_result_members, shape_error, shape_result, CacheHint};
use crate::protocol::{version, Message, RawObject, RequestId, ResponsePayload};
use crate::upstream::ConnectionEvent;
use axum::response::Response;
use futures_util::StreamExt;
use http::{header, HeaderMap, StatusCode};
use serde_json::value::RawValue;
use std::sync::Arc;
use std::time::Instant;

/// How long a session-era upstream's list may be reused when the upstream announces changes
/// (mcpmux re-fetches and notifies listeners as soon as it does).
const ANNOUNCED_LIST_TTL_MS: u64 = 60_000;

/// Methods a modern host may call; anything else is 404 with -32601.
const MODERN_METHODS: &[&str] = &[
    "server/discover",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
    "subscriptions/listen",
];

/// The `_meta` keys of the modern envelope, which are not forwarded to session-era upstreams.
const ENVELOPE_KEYS: &[&str] = &[
    modern::META_PROTOCOL_VERSION,
    modern::META_CLIENT_CAPABILITIES,
    modern::META_CLIENT_INFO,
    modern::META_LOG_LEVEL,
];

/// Whether a POST is a modern request: its `_meta` names a protocol version, or it comes
/// without a session and its `MCP-Protocol-Version` header is not a session-era revision.
pub fn is_modern_request(headers: &HeaderMap, method: &str, params: Option<&RawObject>) -> bool {
    if method == "initialize" {
        return false;
    }
    if modern::is_modern(params) {
        return true;
    }
    let header_version = headers
        .get(modern::HEADER_PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    !headers.contains_key("mcp-session-id") && header_version.is_some_and(|v| !version::is_supported(v))
}

/// mcpmux's `serverInfo`.
pub fn server_info() -> serde_json::Value {
    serde_json::json!({ "name": "mcpmux", "version": env!("CARGO_PKG_VERSION") })
}

fn json_response(status: StatusCode, msg: &Message) -> Response {
    super::http::json_text(status, msg.to_json())
}

fn refuse(
    status: StatusCode,
    id: RequestId,
    code: i64,
    message: &str,
    data: Option<&serde_json::Value>,
) -> Response {
    json_response(status, &error_reply(id, code, message, data))
}

/// Serve one modern request.
pub async fn serve(
    hub: &Arc<Hub>,
    headers: &HeaderMap,
    id: RequestId,
    method: String,
    params: Option<Box<RawValue>>,
) -> Response {
    let params = match params.as_deref().map(|p| RawObject::parse(p.get())).transpose() {
        Ok(p) => p,
        Err(_) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                id,
                codes::INVALID_PARAMS,
                "params must be an object",
                None,
            )
        }
    };
    let header_version = headers
        .get(modern::HEADER_PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_string());
    let meta = modern::request_meta(params.as_ref());
    let requested = match &meta {
        Ok(m) => Some(m.protocol_version.clone()),
        Err(_) => header_version.clone(),
    };
    if let Some(requested) = requested.filter(|v| v != MODERN_VERSION) {
        let data = serde_json::json!({ "supported": modern::supported_versions(), "requested": requested });
        let message = format!("Unsupported protocol version {requested:?} for a request without a session");
        return refuse(
            StatusCode::BAD_REQUEST,
            id,
            codes::UNSUPPORTED_PROTOCOL_VERSION,
            &message,
            Some(&data),
        );
    }
    let meta = match meta {
        Ok(meta) => meta,
        Err(why) => return refuse(StatusCode::BAD_REQUEST, id, codes::INVALID_PARAMS, &why, None),
    };
    let lookup = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Err(why) = modern::check_headers(lookup, &method, params.as_ref(), &meta) {
        return refuse(StatusCode::BAD_REQUEST, id, codes::HEADER_MISMATCH, &why, None);
    }
    if let Err(why) = check_tool_params(hub, &method, params.as_ref(), lookup) {
        return refuse(StatusCode::BAD_REQUEST, id, codes::HEADER_MISMATCH, &why, None);
    }
    if !MODERN_METHODS.contains(&method.as_str()) {
        let message = format!("Method not found: {method}");
        return refuse(StatusCode::NOT_FOUND, id, codes::METHOD_NOT_FOUND, &message, None);
    }
    if let Some(level) = &meta.log_level {
        if log_level_rank(level).is_none() {
            let message = format!("invalid log level {level:?}");
            return refuse(StatusCode::BAD_REQUEST, id, codes::INVALID_PARAMS, &message, None);
        }
    }
    hub.wait_startup().await;
    let params = params.unwrap_or_default();
    match method.as_str() {
        "server/discover" => discover(hub, id),
        "tools/list" => list(hub, id, ListKind::Tools, &params),
        "prompts/list" => list(hub, id, ListKind::Prompts, &params),
        "resources/list" => list(hub, id, ListKind::Resources, &params),
        "resources/templates/list" => list(hub, id, ListKind::Templates, &params),
        "subscriptions/listen" => super::listen::open(hub, id, &params),
        _ => call(hub, headers, id, method, params, &meta).await,
    }
}

/// Check a `tools/call`'s `Mcp-Param-*` headers against the arguments its tool annotates.
fn check_tool_params<'h>(
    hub: &Hub,
    method: &str,
    params: Option<&RawObject>,
    lookup: impl Fn(&str) -> Option<&'h str>,
) -> Result<(), String> {
    let Some(params) = params.filter(|_| method == "tools/call") else {
        return Ok(());
    };
    let Some(name) = params.get_str("name") else {
        return Ok(());
    };
    let catalog = hub.catalog.snapshot();
    let Some(tool) = catalog.list(ListKind::Tools).lookup(&name) else {
        return Ok(());
    };
    match router::annotated_arguments(tool.json.get(), params) {
        Some((annotations, arguments)) => {
            modern_params::check_param_headers(lookup, &annotations, &arguments)
        }
        None => Ok(()),
    }
}

/// The cache hint of one merged list: the shortest lifetime and most private scope of its
/// parts. A modern upstream's part is what it said, less the list's age (and a list that
/// outlived it is fetched again in the background); a session-era upstream's part is
/// [`ANNOUNCED_LIST_TTL_MS`] public if it announces changes, else 0.
fn list_hint(hub: &Hub, kind: ListKind) -> CacheHint {
    let public_for = |ttl_ms| CacheHint {
        ttl_ms,
        private: false,
    };
    let now = Instant::now();
    hub.upstreams
        .iter()
        .filter_map(|slot| Some((slot, slot.facts.load_full()?)))
        .filter(|(_, facts)| facts.has(kind.capability()))
        .map(|(slot, facts)| {
            if slot.list_freshness.is_stale(kind, now) {
                refetch(slot, kind);
            }
            match slot.list_freshness.remaining(kind, now) {
                Some(hint) => hint,
                None if facts.announces_changes(kind) => public_for(ANNOUNCED_LIST_TTL_MS),
                None => public_for(0),
            }
        })
        .fold(public_for(ANNOUNCED_LIST_TTL_MS), CacheHint::combine)
}

/// Ask an upstream's supervisor to fetch a list again (on its shared connection).
fn refetch(slot: &UpstreamSlot, kind: ListKind) {
    if let Some(handle) = slot.shared.load_full() {
        let via = (*handle).clone();
        // A full queue already holds a refetch.
        let _ = slot.events.try_send(ConnectionEvent::ListChanged { kind, via });
    }
}

fn discover(hub: &Hub, id: RequestId) -> Response {
    let mut result = serde_json::json!({
        "supportedVersions": modern::supported_versions(),
        "capabilities": router::merged_capabilities(hub),
    });
    if let Some(text) = router::combined_instructions(hub) {
        result["instructions"] = text.into();
    }
    let hint = ListKind::ALL
        .into_iter()
        .map(|kind| list_hint(hub, kind))
        .reduce(CacheHint::combine)
        .unwrap_or(CacheHint::NONE);
    let shaped = shape_result(&to_raw(&result), Some(hint), &to_raw(&server_info()));
    json_response(
        StatusCode::OK,
        &Message::Response {
            id: Some(id),
            payload: ResponsePayload::Result(shaped),
        },
    )
}

/// A list page as a modern host sees it, written in one pass from the catalog's raw items.
fn list(hub: &Hub, id: RequestId, kind: ListKind, params: &RawObject) -> Response {
    let members = own_result_members(Some(list_hint(hub, kind)), &to_raw(&server_info()));
    let cursor = params.get_str("cursor");
    let page_size = hub.config.gateway.page_size;
    let reply = match hub
        .catalog
        .snapshot()
        .page_with(kind, cursor.as_deref(), page_size, &members)
    {
        Some(result) => result_response(id, result),
        None => shape_reply(router::invalid_cursor(id), None),
    };
    json_response(StatusCode::OK, &reply)
}

/// A reply mcpmux made itself, as a modern host must see it.
fn shape_reply(reply: Message, cache: Option<CacheHint>) -> Message {
    match reply {
        Message::Response {
            id,
            payload: ResponsePayload::Result(result),
        } => Message::Response {
            id,
            payload: ResponsePayload::Result(shape_result(&result, cache, &to_raw(&server_info()))),
        },
        Message::Response {
            id,
            payload: ResponsePayload::Error(error),
        } => Message::Response {
            id,
            payload: ResponsePayload::Error(shape_error(&error)),
        },
        other => other,
    }
}

/// A throwaway session carrying what the request's `_meta` declares.
fn request_session(meta: &RequestMeta) -> Arc<Session> {
    let id = crate::util::ids::random_hex(24);
    let caps = ClientCaps::from_capabilities(Some(&meta.client_capabilities));
    let session = Session::new(format!("stateless-{id}"), MODERN_VERSION.to_string(), caps);
    match meta.log_level.as_deref().and_then(log_level_rank) {
        Some(rank) => session.set_log_level(rank),
        None => session.mute_logs(),
    }
    session
}

/// `params` without the host's modern envelope: a session-era upstream must not see it, and a
/// modern upstream gets mcpmux's own. An upstream's `requestState` and the `inputResponses`
/// answering it stay (mcpmux's own never reach this point).
fn strip_envelope(mut params: RawObject) -> RawObject {
    if let Some(mut meta) = params.get_object("_meta") {
        for key in ENVELOPE_KEYS {
            meta.remove(key);
        }
        if meta.members().next().is_none() {
            params.remove("_meta");
        } else {
            params.set("_meta", meta.to_raw());
        }
    }
    params
}

fn sse(frames: futures_util::stream::BoxStream<'static, bytes::Bytes>) -> Response {
    super::http::sse_response(frames)
}

async fn call(
    hub: &Arc<Hub>,
    headers: &HeaderMap,
    id: RequestId,
    method: String,
    params: RawObject,
    meta: &RequestMeta,
) -> Response {
    let principal = principal_digest(headers.get(header::AUTHORIZATION).map(|v| v.as_bytes()));
    let request = request_digest(&method, &params);
    let server_info: Arc<RawValue> = Arc::from(to_raw(&server_info()));
    if let Some(state) = params
        .get_str("requestState")
        .filter(|s| s.starts_with(STATE_PREFIX))
    {
        let resumed = input_required::resume(
            hub.parked.clone(),
            &state,
            &params,
            id.clone(),
            &principal,
            &request,
            server_info,
        );
        // A state that fails verification, or whose call is gone, is invalid params (400).
        return match resumed {
            Ok(frames) => sse(frames),
            Err(err) => refuse(
                StatusCode::BAD_REQUEST,
                id,
                codes::INVALID_PARAMS,
                &err.to_string(),
                None,
            ),
        };
    }
    let session = request_session(meta);
    let progress_token = params
        .get_object("_meta")
        .and_then(|m| m.get("progressToken").map(RawValue::to_owned));
    let forwarded = strip_envelope(params);
    let msg = Message::Request {
        id: id.clone(),
        method: method.clone(),
        params: Some(forwarded.to_raw()),
    };
    match router::dispatch(hub, &session, msg).await {
        Dispatch::Forward(forwarded) => {
            let mut call = ModernCall {
                frames: forwarded.into_frames().boxed(),
                session,
                method,
                request,
                principal,
                progress_token,
            };
            // As for session-era hosts: a lone response within the window goes back as JSON.
            match resume::first_frame(&mut call.frames, &call.session, &hub.shutdown).await {
                Some(Some(Frame::Response(json))) => {
                    let body = input_required::modern_response(&json, &id, &call.method, &server_info);
                    drop(call);
                    super::http::json_text(StatusCode::OK, body)
                }
                first => {
                    if let Some(Some(frame)) = first {
                        let rest = std::mem::replace(&mut call.frames, futures_util::stream::empty().boxed());
                        call.frames = futures_util::stream::once(std::future::ready(frame))
                            .chain(rest)
                            .boxed();
                    }
                    sse(input_required::respond(hub.parked.clone(), call, id, server_info))
                }
            }
        }
        Dispatch::Reply(reply) => {
            session.close();
            json_response(StatusCode::OK, &shape_reply(reply, None))
        }
        Dispatch::Accepted => {
            session.close();
            let error = error_object(codes::INTERNAL_ERROR, "the request produced no answer", None);
            json_response(
                StatusCode::OK,
                &Message::Response {
                    id: Some(id),
                    payload: ResponsePayload::Error(error),
                },
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_is_not_forwarded_to_session_era_upstreams() {
        let p = RawObject::parse(
            r#"{"name":"t","requestState":"x","inputResponses":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":3}}"#,
        )
        .unwrap();
        assert_eq!(
            strip_envelope(p).to_json(),
            r#"{"name":"t","requestState":"x","inputResponses":{},"_meta":{"progressToken":3}}"#
        );
        let bare = RawObject::parse(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#)
            .unwrap();
        assert_eq!(strip_envelope(bare).to_json(), "{}");
    }

    #[test]
    fn modern_requests_are_told_apart() {
        let mut h = HeaderMap::new();
        let meta = RawObject::parse(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#)
            .unwrap();
        assert!(is_modern_request(&h, "tools/list", Some(&meta)));
        assert!(!is_modern_request(&h, "initialize", Some(&meta)));
        assert!(!is_modern_request(&h, "tools/list", None));
        h.insert("mcp-protocol-version", "2026-07-28".parse().unwrap());
        assert!(is_modern_request(&h, "tools/list", None));
        h.insert("mcp-session-id", "abc".parse().unwrap());
        assert!(!is_modern_request(&h, "tools/list", None));
    }
}
