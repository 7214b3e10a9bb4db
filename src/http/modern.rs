//! The 2026-07-28 face of the endpoint: a request carrying the modern `_meta` is served without
//! a session. Its version, metadata and headers are checked; `server/discover` and the lists are
//! answered from the catalog; calls run in a throwaway session whose answers are reshaped for a
//! modern host and whose upstream requests become input-required results.

use super::resume;
use crate::auth::Principal;
use crate::catalog::ListKind;
use crate::core::context::{ClientName, RequestCtx};
use crate::core::forward::Frame;
use crate::core::hub::Hub;
use crate::core::input_required::{self, ModernCall, ParkedElsewhere, ResumeError};
use crate::core::methods::{self, initialize, Outcome};
use crate::core::request_state::{is_ours as state_is_ours, principal_digest, request_digest};
use crate::error::codes;
use crate::protocol::logging::log_level_rank;
use crate::protocol::message::error_reply;
use crate::protocol::message::{error_object, to_raw};
use crate::protocol::modern::{self, RequestMeta, MODERN_VERSION};
use crate::protocol::modern_params;
use crate::protocol::ClientCaps;
use crate::protocol::{Message, RawObject, RequestId, ResponsePayload};
use crate::session::host::Session;
use crate::session::SessionState;
use axum::response::Response;
use futures_util::StreamExt;
use http::{header, HeaderMap, StatusCode};
use serde_json::value::RawValue;
use std::sync::Arc;

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
    // Else its headers tell: no session, and a version after the session era.
    super::modern_only(headers)
}

fn json_response(status: StatusCode, msg: &Message) -> Response {
    crate::error::json_text(status, msg.to_json())
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

/// Serve one modern request (to the endpoint of `profile`, or the main one).
pub async fn serve(
    hub: &Arc<Hub>,
    headers: &HeaderMap,
    (who, profile): (Option<Arc<Principal>>, Option<Arc<str>>),
    id: RequestId,
    method: String,
    params: Result<Option<RawObject>, ()>,
) -> Response {
    let params = match params {
        Ok(p) => p,
        Err(()) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                id,
                codes::INVALID_PARAMS,
                "params must be an object",
                None,
            )
        }
    };
    // A refusal here is still a host request: it gets its metric, access line and span.
    let refused = |status: StatusCode, code: i64, message: &str, data: Option<&serde_json::Value>| {
        let ctx = RequestCtx::modern().by(who.clone()).at(profile.clone());
        let reply = error_reply(id.clone(), code, message, data);
        let reply = crate::core::observe::answered(hub, ctx, (&id, &method), params.as_ref(), reply);
        json_response(status, &reply)
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
        return refused(
            StatusCode::BAD_REQUEST,
            codes::UNSUPPORTED_PROTOCOL_VERSION,
            &message,
            Some(&data),
        );
    }
    let meta = match meta {
        Ok(meta) => meta,
        Err(why) => return refused(StatusCode::BAD_REQUEST, codes::INVALID_PARAMS, &why, None),
    };
    let lookup = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Err(why) = modern::check_headers(lookup, &method, params.as_ref(), &meta) {
        return refused(StatusCode::BAD_REQUEST, codes::HEADER_MISMATCH, &why, None);
    }
    // The tools of the principal's own upstream connections are known once they are open.
    hub.open_personal(who.as_deref(), crate::upstream::personal::LISTS_WAIT)
        .await;
    let asked = (&method[..], profile.as_deref(), who.as_deref());
    if let Err(why) = check_tool_params(hub, asked, params.as_ref(), lookup) {
        return refused(StatusCode::BAD_REQUEST, codes::HEADER_MISMATCH, &why, None);
    }
    if !MODERN_METHODS.contains(&method.as_str()) {
        let message = format!("Method not found: {}", crate::util::text::clip(&method));
        return refused(StatusCode::NOT_FOUND, codes::METHOD_NOT_FOUND, &message, None);
    }
    if let Some(level) = &meta.log_level {
        if log_level_rank(level).is_none() {
            let message = format!("invalid log level {level:?}");
            return refused(StatusCode::BAD_REQUEST, codes::INVALID_PARAMS, &message, None);
        }
    }
    hub.wait_startup().await;
    let params = params.unwrap_or_default();
    // The client names itself on every request; only the access line reads it.
    let client = (crate::core::observe::wants_access(hub))
        .then(|| meta.client_info.as_ref().and_then(ClientName::of))
        .flatten();
    match method.as_str() {
        "subscriptions/listen" => {
            let ctx = RequestCtx::modern().by(who).at(profile).from_client(client);
            super::listen::open(hub, &ctx, id, &params)
        }
        "server/discover" | "tools/list" | "prompts/list" | "resources/list" | "resources/templates/list" => {
            let ctx = RequestCtx::modern().by(who).at(profile).from_client(client);
            let outcome = methods::request(hub, &ctx, id.clone(), method, params).await;
            match outcome {
                Outcome::Reply(reply) => json_response(StatusCode::OK, &reply),
                _ => no_answer(id),
            }
        }
        _ => {
            let ctx = (who, profile, client);
            call(hub, headers, ctx, id, method, params, &meta).await
        }
    }
}

/// Check a `tools/call`'s `Mcp-Param-*` headers against the arguments its tool annotates.
/// A tool outside the profile of the request's endpoint is not looked at (the call is then
/// refused as an unknown tool, as on any endpoint that does not have it).
fn check_tool_params<'h>(
    hub: &Hub,
    (method, profile, who): (&str, Option<&str>, Option<&Principal>),
    params: Option<&RawObject>,
    lookup: impl Fn(&str) -> Option<&'h str>,
) -> Result<(), String> {
    let Some(params) = params.filter(|_| method == "tools/call") else {
        return Ok(());
    };
    let Some(name) = params.get_str("name") else {
        return Ok(());
    };
    let catalog = hub.catalog_of(who);
    let Some(tool) = catalog.list(ListKind::Tools).lookup(&name) else {
        return Ok(());
    };
    if let Some(name) = profile {
        let config = hub.config();
        let seen = (config.profile(name))
            .is_some_and(|p| crate::catalog::profile::admits_item(p, ListKind::Tools, tool));
        if !seen {
            return Ok(());
        }
    }
    match methods::call::annotated_arguments(tool.json.get(), params) {
        Some((annotations, arguments)) => {
            modern_params::check_param_headers(lookup, &annotations, &arguments)
        }
        None => Ok(()),
    }
}

/// The answer when a request produced none (a defect, not something a host can cause).
fn no_answer(id: RequestId) -> Response {
    let error = error_object(codes::INTERNAL_ERROR, "the request produced no answer", None);
    json_response(
        StatusCode::OK,
        &Message::Response {
            id: Some(id),
            payload: ResponsePayload::Error(error),
        },
    )
}

/// A throwaway session carrying what the request's `_meta` declares.
fn request_session(hub: &Hub, meta: &RequestMeta, profile: Option<&str>) -> Arc<Session> {
    let id = crate::util::ids::random_hex(24);
    let caps = ClientCaps::from_capabilities(Some(&meta.client_capabilities));
    let state = SessionState::new(MODERN_VERSION, caps).in_profile(profile);
    let session = hub.open_session(format!("stateless-{id}"), state);
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
    super::streamable::sse_response(frames)
}

async fn call(
    hub: &Arc<Hub>,
    headers: &HeaderMap,
    (who, profile, client): (Option<Arc<Principal>>, Option<Arc<str>>, Option<ClientName>),
    id: RequestId,
    method: String,
    params: RawObject,
    meta: &RequestMeta,
) -> Response {
    // A sealed requestState is bound to the principal (with [auth]), else to the raw header.
    let principal = match &who {
        Some(p) => principal_digest(Some(p.owner().as_bytes())),
        None => principal_digest(headers.get(header::AUTHORIZATION).map(|v| v.as_bytes())),
    };
    let request = request_digest(&method, &params);
    let server_info: Arc<RawValue> = Arc::from(to_raw(&initialize::server_info()));
    if let Some(state) = params.get_str("requestState").filter(|s| state_is_ours(s)) {
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
            Err(err) => {
                let mut refusal = refuse(
                    StatusCode::BAD_REQUEST,
                    id,
                    codes::INVALID_PARAMS,
                    &err.to_string(),
                    None,
                );
                if let ResumeError::Elsewhere(home) = err {
                    refusal.extensions_mut().insert(ParkedElsewhere(home));
                }
                refusal
            }
        };
    }
    let session = request_session(hub, meta, profile.as_deref());
    let progress_token = params
        .get_object("_meta")
        .and_then(|m| m.get("progressToken").map(RawValue::to_owned));
    let forwarded = strip_envelope(params);
    let ctx = RequestCtx::on(session.clone()).by(who).from_client(client);
    match methods::request(hub, &ctx, id.clone(), method.clone(), forwarded).await {
        Outcome::Denied { id, refusal } => {
            session.close();
            refusal.into_http_for(Some(id))
        }
        Outcome::Refused(refusal) => {
            session.close();
            refusal.into_http()
        }
        Outcome::Forward(forwarded) => {
            let mut call = ModernCall {
                frames: forwarded.into_frames().boxed(),
                session,
                method,
                request,
                principal,
                progress_token,
            };
            // As for session-era hosts: a lone response within the window goes back as JSON.
            match resume::first_frame(&mut call.frames, &call.session).await {
                Some(Some(Frame::Response(json))) => {
                    let body = input_required::modern_response(&json, &id, &call.method, &server_info);
                    drop(call);
                    crate::error::json_text(StatusCode::OK, body)
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
        Outcome::Reply(reply) => {
            session.close();
            json_response(StatusCode::OK, &reply)
        }
        Outcome::Accepted => {
            session.close();
            no_answer(id)
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
