//! Routing of host messages: initialize, lists served from the catalog, calls forwarded to the
//! upstream that owns the name or URI, cancellations, logging levels, subscriptions, and host
//! answers to server-to-client requests.

use super::forward::{
    error_reply, method_not_found, upstream_error_reply, Deadline, ForwardedCall, ResultShape,
};
use crate::catalog::ListKind;
use crate::config::Isolation;
use crate::core::hub::Hub;
use crate::error::codes;
use crate::protocol::logging::{log_level_rank, LOG_LEVELS};
use crate::protocol::message::{json_string, raw, result_response, to_raw};
use crate::protocol::ClientCaps;
use crate::protocol::{modern_params, version, Message, RawObject, RequestId};
use crate::session::host::{InflightCall, Session};
use crate::upstream::call_channel::call_channel;
use crate::upstream::{CallOrigin, OutboundCall, CALL_EVENT_QUEUE};
use std::sync::Arc;
use std::time::Duration;

/// How long `logging/setLevel` waits for upstreams to acknowledge.
const SET_LEVEL_WAIT: Duration = Duration::from_secs(5);

/// What a host message turned into.
pub enum Dispatch {
    /// A notification or response: nothing to send back.
    Accepted,
    /// Answered by mcpmux itself.
    Reply(Message),
    /// Answered by an upstream, over a stream.
    Forward(ForwardedCall),
}

/// Open a session for an `initialize` request; returns it with the result to send.
pub async fn initialize(
    hub: &Arc<Hub>,
    params: Option<&RawObject>,
    session_id: String,
) -> (Arc<Session>, Box<serde_json::value::RawValue>) {
    hub.wait_startup().await;
    let requested = params
        .and_then(|p| p.get_str("protocolVersion"))
        .unwrap_or_default();
    let negotiated = version::negotiate(&requested);
    let caps = ClientCaps::from_capabilities(params.and_then(|p| p.get_object("capabilities")).as_ref());
    let session = hub.new_session(session_id, negotiated.to_string(), caps);
    let mut result = serde_json::json!({
        "protocolVersion": negotiated,
        "capabilities": merged_capabilities(hub),
        "serverInfo": { "name": "mcpmux", "version": env!("CARGO_PKG_VERSION") },
    });
    if let Some(text) = combined_instructions(hub) {
        result["instructions"] = text.into();
    }
    (session, to_raw(&result))
}

/// The capabilities mcpmux can honour given what its upstreams offer.
pub fn merged_capabilities(hub: &Hub) -> serde_json::Value {
    let facts: Vec<_> = hub.upstreams.iter().filter_map(|s| s.facts.load_full()).collect();
    let any = |cap: &str| facts.iter().any(|f| f.has(cap));
    let mut caps = serde_json::json!({ "tools": { "listChanged": true } });
    if any("prompts") {
        caps["prompts"] = serde_json::json!({ "listChanged": true });
    }
    if any("resources") {
        let subscribe = facts.iter().any(|f| {
            f.capabilities
                .pointer("/resources/subscribe")
                .and_then(|v| v.as_bool())
                == Some(true)
        });
        caps["resources"] = serde_json::json!({ "listChanged": true, "subscribe": subscribe });
    }
    if any("logging") {
        caps["logging"] = serde_json::json!({});
    }
    if any("completions") {
        caps["completions"] = serde_json::json!({});
    }
    caps
}

pub fn combined_instructions(hub: &Hub) -> Option<String> {
    let parts: Vec<String> = hub
        .upstreams
        .iter()
        .filter_map(|slot| {
            let facts = slot.facts.load_full()?;
            let text = facts.instructions.as_deref()?.trim();
            (!text.is_empty()).then(|| format!("## {}\n{}", slot.server.name, text))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// Route one message from a host session.
pub async fn dispatch(hub: &Arc<Hub>, session: &Arc<Session>, msg: Message) -> Dispatch {
    session.touch();
    match msg {
        Message::Request { id, method, params } => request(hub, session, id, method, params).await,
        Message::Notification { method, params } => {
            notification(session, &method, RawObject::parse_opt(params.as_deref()));
            Dispatch::Accepted
        }
        Message::Response { id, payload } => {
            match id
                .as_ref()
                .and_then(RequestId::as_u64)
                .and_then(|i| session.take_server_request(i))
            {
                Some(route) => route.answer_to.answer(payload),
                None => tracing::debug!(session = %session.id, id = ?id, "response to an unknown request"),
            }
            Dispatch::Accepted
        }
    }
}

async fn request(
    hub: &Arc<Hub>,
    session: &Arc<Session>,
    id: RequestId,
    method: String,
    params: Option<Box<serde_json::value::RawValue>>,
) -> Dispatch {
    let params = match params {
        Some(p) => match RawObject::parse(p.get()) {
            Ok(obj) => obj,
            Err(_) => {
                return Dispatch::Reply(error_reply(
                    id,
                    codes::INVALID_PARAMS,
                    "params must be an object",
                    None,
                ))
            }
        },
        None => RawObject::default(),
    };
    match method.as_str() {
        "ping" => Dispatch::Reply(result_response(id, raw("{}".into()))),
        "initialize" => Dispatch::Reply(error_reply(
            id,
            codes::INVALID_REQUEST,
            "session already initialized",
            None,
        )),
        "tools/list" => Dispatch::Reply(list_page(hub, id, ListKind::Tools, &params)),
        "prompts/list" => Dispatch::Reply(list_page(hub, id, ListKind::Prompts, &params)),
        "resources/list" => Dispatch::Reply(list_page(hub, id, ListKind::Resources, &params)),
        "resources/templates/list" => Dispatch::Reply(list_page(hub, id, ListKind::Templates, &params)),
        "tools/call" => {
            by_name(
                hub,
                session,
                id,
                method,
                params,
                ListKind::Tools,
                ResultShape::ToolResult,
            )
            .await
        }
        "prompts/get" => {
            by_name(
                hub,
                session,
                id,
                method,
                params,
                ListKind::Prompts,
                ResultShape::PromptResult,
            )
            .await
        }
        "resources/read" => by_uri(hub, session, id, method, params).await,
        "resources/subscribe" | "resources/unsubscribe" => {
            subscription(hub, session, id, method, params).await
        }
        "completion/complete" => completion(hub, session, id, method, params).await,
        "logging/setLevel" => set_level(hub, session, id, &params).await,
        _ => Dispatch::Reply(method_not_found(id, &method)),
    }
}

/// A page of a merged list: the snapshot's kept result, copied into the reply (no JSON is
/// written or parsed per request).
pub fn list_page(hub: &Hub, id: RequestId, kind: ListKind, params: &RawObject) -> Message {
    let cursor = params.get_str("cursor");
    let page_size = hub.config.gateway.page_size;
    match hub.catalog.snapshot().page(kind, cursor.as_deref(), page_size) {
        Some(result) => result_response(id, (*result).to_owned()),
        None => invalid_cursor(id),
    }
}

/// The answer to a list request whose cursor this gateway did not issue.
pub fn invalid_cursor(id: RequestId) -> Message {
    error_reply(id, codes::INVALID_PARAMS, "invalid cursor", None)
}

async fn by_name(
    hub: &Arc<Hub>,
    session: &Arc<Session>,
    id: RequestId,
    method: String,
    mut params: RawObject,
    kind: ListKind,
    shape: ResultShape,
) -> Dispatch {
    let Some(name) = params.get_str("name") else {
        return Dispatch::Reply(error_reply(
            id,
            codes::INVALID_PARAMS,
            "params.name is required",
            None,
        ));
    };
    let catalog = hub.catalog.snapshot();
    let Some(item) = catalog.list(kind).lookup(&name) else {
        let what = if kind == ListKind::Tools { "tool" } else { "prompt" };
        return Dispatch::Reply(error_reply(
            id,
            codes::INVALID_PARAMS,
            &format!("Unknown {what}: {name}"),
            None,
        ));
    };
    let mut target = Target::new(item.upstream, shape);
    let modern_upstream = hub.upstreams[item.upstream]
        .facts
        .load()
        .as_ref()
        .is_some_and(|f| f.is_modern());
    if kind == ListKind::Tools && modern_upstream {
        if let Some((annotations, arguments)) = annotated_arguments(item.json.get(), &params) {
            target.param_headers = modern_params::param_header_values(&annotations, &arguments);
        }
    }
    params.set_str("name", &item.original);
    forward(hub, session, id, method, params, target).await
}

/// Which upstream a host request goes to, how its result is exposed, and the `Mcp-Param-*`
/// headers a modern upstream expects for it (its own tool schema's annotations).
struct Target {
    upstream: usize,
    shape: ResultShape,
    param_headers: Vec<(String, String)>,
}

impl Target {
    fn new(upstream: usize, shape: ResultShape) -> Self {
        Target {
            upstream,
            shape,
            param_headers: Vec::new(),
        }
    }
}

fn resource_not_found(id: RequestId, uri: &str) -> Dispatch {
    let data = serde_json::json!({ "uri": uri });
    Dispatch::Reply(error_reply(
        id,
        codes::RESOURCE_NOT_FOUND,
        "Resource not found",
        Some(&data),
    ))
}

async fn by_uri(
    hub: &Arc<Hub>,
    session: &Arc<Session>,
    id: RequestId,
    method: String,
    mut params: RawObject,
) -> Dispatch {
    let Some(uri) = params.get_str("uri") else {
        return Dispatch::Reply(error_reply(
            id,
            codes::INVALID_PARAMS,
            "params.uri is required",
            None,
        ));
    };
    let Some((upstream, original)) = hub.catalog.snapshot().resolve_uri(&uri) else {
        return resource_not_found(id, &uri);
    };
    params.set_str("uri", &original);
    forward(
        hub,
        session,
        id,
        method,
        params,
        Target::new(upstream, ResultShape::ReadResult),
    )
    .await
}

async fn subscription(
    hub: &Arc<Hub>,
    session: &Arc<Session>,
    id: RequestId,
    method: String,
    mut params: RawObject,
) -> Dispatch {
    let Some(uri) = params.get_str("uri") else {
        return Dispatch::Reply(error_reply(
            id,
            codes::INVALID_PARAMS,
            "params.uri is required",
            None,
        ));
    };
    let Some((upstream, original)) = hub.catalog.snapshot().resolve_uri(&uri) else {
        return resource_not_found(id, &uri);
    };
    if method == "resources/subscribe" {
        session.subscribe(&uri);
    } else {
        session.unsubscribe(&uri);
        let shared = hub.upstreams[upstream].server.isolation == Isolation::Shared;
        let still_watched = hub.sessions.all().iter().any(|s| s.is_subscribed_exact(&uri));
        if shared && still_watched {
            return Dispatch::Reply(result_response(id, raw("{}".into())));
        }
    }
    let handle = match hub.connection_for(upstream, session).await {
        Ok(handle) => handle,
        Err(err) => return Dispatch::Reply(upstream_error_reply(id, &err)),
    };
    if handle.facts().is_some_and(|f| f.is_modern()) {
        // No resources/subscribe in 2026-07-28: the URI joins mcpmux's listen filter instead.
        return Dispatch::Reply(
            match handle
                .watch_resource(&original, method == "resources/subscribe")
                .await
            {
                Ok(()) => result_response(id, raw("{}".into())),
                Err(err) => error_reply(id, codes::INTERNAL_ERROR, &err.to_string(), None),
            },
        );
    }
    params.set_str("uri", &original);
    forward(
        hub,
        session,
        id,
        method,
        params,
        Target::new(upstream, ResultShape::Opaque),
    )
    .await
}

async fn completion(
    hub: &Arc<Hub>,
    session: &Arc<Session>,
    id: RequestId,
    method: String,
    mut params: RawObject,
) -> Dispatch {
    let Some(mut reference) = params.get_object("ref") else {
        return Dispatch::Reply(error_reply(
            id,
            codes::INVALID_PARAMS,
            "params.ref is required",
            None,
        ));
    };
    let catalog = hub.catalog.snapshot();
    let target = match reference.get_str("type").as_deref() {
        Some("ref/prompt") => reference.get_str("name").and_then(|name| {
            let item = catalog.list(ListKind::Prompts).lookup(&name)?;
            Some((item.upstream, "name", item.original.clone()))
        }),
        Some("ref/resource") => reference
            .get_str("uri")
            .and_then(|uri| catalog.resolve_uri(&uri))
            .map(|(upstream, original)| (upstream, "uri", original)),
        _ => None,
    };
    let Some((upstream, key, original)) = target else {
        return Dispatch::Reply(error_reply(
            id,
            codes::INVALID_PARAMS,
            "unknown completion reference",
            None,
        ));
    };
    reference.set_str(key, &original);
    params.set("ref", reference.to_raw());
    forward(
        hub,
        session,
        id,
        method,
        params,
        Target::new(upstream, ResultShape::Opaque),
    )
    .await
}

async fn set_level(hub: &Arc<Hub>, session: &Arc<Session>, id: RequestId, params: &RawObject) -> Dispatch {
    let level = params.get_str("level").unwrap_or_default();
    let Some(rank) = log_level_rank(&level) else {
        return Dispatch::Reply(error_reply(
            id,
            codes::INVALID_PARAMS,
            &format!("invalid log level {level:?}"),
            None,
        ));
    };
    session.set_log_level(rank);
    // A shared upstream gets the most verbose level any session asked for; mcpmux filters per session.
    let shared_rank = hub
        .sessions
        .all()
        .iter()
        .filter_map(|s| s.log_level())
        .min()
        .unwrap_or(rank)
        .min(rank);
    let mut targets = Vec::new();
    for slot in hub.upstreams.iter() {
        if !slot.facts.load().as_ref().is_some_and(|f| f.has("logging")) {
            continue;
        }
        let (handle, level_rank) = match slot.server.isolation {
            Isolation::Shared => (slot.shared.load_full().map(|h| (*h).clone()), shared_rank),
            Isolation::PerSession => (session.connection(slot.index), rank),
        };
        if let Some(handle) = handle {
            targets.push((handle, LOG_LEVELS[level_rank]));
        }
    }
    let sends = targets.into_iter().map(|(handle, level)| async move {
        let params = raw(format!("{{\"level\":{}}}", json_string(level)));
        if let Err(err) = handle
            .request("logging/setLevel", Some(params), SET_LEVEL_WAIT)
            .await
        {
            tracing::warn!(upstream = %handle.name(), %err, "logging/setLevel failed upstream");
        }
    });
    futures_util::future::join_all(sends).await;
    Dispatch::Reply(result_response(id, raw("{}".into())))
}

/// Send a host request to upstream `index`, swapping the progress token for the upstream id.
async fn forward(
    hub: &Arc<Hub>,
    session: &Arc<Session>,
    id: RequestId,
    method: String,
    mut params: RawObject,
    target: Target,
) -> Dispatch {
    let Target {
        upstream: index,
        shape,
        param_headers,
    } = target;
    let handle = match hub.connection_for(index, session).await {
        Ok(handle) => handle,
        Err(err) => return Dispatch::Reply(upstream_error_reply(id, &err)),
    };
    let upstream_id = handle.next_id();
    let mut client_progress_token = None;
    if let Some(mut meta) = params.get_object("_meta") {
        if let Some(token) = meta.get("progressToken") {
            client_progress_token = Some(token.to_owned());
            meta.set("progressToken", raw(upstream_id.to_string()));
            params.set("_meta", meta.to_raw());
        }
    }
    let slot = &hub.upstreams[index];
    let gateway = &hub.config.gateway;
    let timeout = slot.server.effective_request_timeout(gateway);
    let (sink, events) = call_channel(CALL_EVENT_QUEUE);
    let inflight = InflightCall {
        upstream: handle.clone(),
        upstream_id,
    };
    if !session.try_add_inflight(id.clone(), inflight, gateway.max_in_flight_per_session) {
        let message = format!(
            "mcpmux: this session already has {} requests in flight (gateway.max_in_flight_per_session)",
            gateway.max_in_flight_per_session
        );
        return Dispatch::Reply(error_reply(id, codes::OVERLOADED, &message, None));
    }
    let upstream_params = params.to_raw();
    let call = OutboundCall {
        upstream_id,
        method: method.clone(),
        params: Some(upstream_params.clone()),
        param_headers: param_headers.clone(),
        origin: CallOrigin::Host {
            host: session.link(),
            sink,
        },
    };
    if let Err(err) = handle.send_call(call) {
        session.finish_inflight(&id, upstream_id);
        return Dispatch::Reply(upstream_error_reply(id, &err));
    }
    Dispatch::Forward(ForwardedCall {
        events,
        method,
        params: Some(upstream_params),
        param_headers,
        client_id: id,
        client_progress_token,
        upstream: handle,
        upstream_id,
        session: session.clone(),
        shape,
        naming: slot.naming.clone(),
        deadline: Deadline::new(
            timeout,
            slot.server.timeout_resets_on_progress,
            gateway.max_request_timeout,
        ),
    })
}

/// The `x-mcp-header` annotations of a listed tool with the arguments of a call to it; `None`
/// when the tool annotates nothing.
pub fn annotated_arguments(
    tool_json: &str,
    params: &RawObject,
) -> Option<(Vec<modern_params::ParamHeader>, serde_json::Value)> {
    if !tool_json.contains("x-mcp-header") {
        return None;
    }
    let tool = serde_json::from_str::<serde_json::Value>(tool_json).ok()?;
    let annotations = modern_params::param_headers(tool.get("inputSchema")?);
    if annotations.is_empty() {
        return None;
    }
    let arguments = params
        .get("arguments")
        .and_then(|a| serde_json::from_str(a.get()).ok())
        .unwrap_or(serde_json::Value::Null);
    Some((annotations, arguments))
}

fn notification(session: &Arc<Session>, method: &str, params: Option<RawObject>) {
    match method {
        "notifications/cancelled" => {
            let Some(request) = params
                .as_ref()
                .and_then(|p| p.get("requestId"))
                .and_then(RequestId::from_raw)
            else {
                return;
            };
            let reason = params
                .as_ref()
                .and_then(|p| p.get_str("reason"))
                .unwrap_or_else(|| "cancelled by the host".into());
            if let Some(call) = session.take_inflight(&request) {
                call.upstream.cancel(call.upstream_id, &reason);
            }
        }
        "notifications/roots/list_changed" => {
            for conn in session.connections() {
                conn.notify(method, None);
            }
        }
        _ => {}
    }
}
