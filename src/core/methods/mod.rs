//! One request pipeline for both eras. A host face builds a [`RequestCtx`] and hands the message
//! over: [`dispatch`] (a session-era message) or [`request`] (a request whose params are already
//! parsed). One file per method; each method's `serve` is the one place where a policy decision,
//! an audit event or a metric for that method hooks in. Replies come back in the request's era.

pub mod call;
pub mod complete;
pub mod discover;
pub mod initialize;
pub mod list;
pub mod meta_tools;
#[cfg(test)]
mod meta_tools_tests;
pub mod notify;
pub mod params;
#[cfg(test)]
mod profile_tests;
pub mod read;
pub mod set_level;
pub mod subscribe;
#[cfg(test)]
mod tests;

use super::access::Access;
use super::audit_trail::Trail;
use super::context::{Era, RequestCtx};
use super::forward::{Deadline, DrainTicket, ForwardedCall};
use super::hub::Hub;
use super::request_spans;
use crate::catalog::results::ResultShape;
use crate::catalog::{ListKind, UriMiss};
use crate::config::{Isolation, UpstreamId};
use crate::error::{RequestError, UpstreamError};
use crate::protocol::message::{raw, result_response, to_raw};
use crate::protocol::modern_result::{shape_error, shape_result, CacheHint};
use crate::protocol::{Message, RawObject, RequestId, ResponsePayload};
use crate::session::host::InflightCall;
use crate::status_doc::Phase;
use crate::upstream::call_channel::call_channel;
use crate::upstream::{CallOrigin, CallParams, OutboundCall, UpstreamSlot, CALL_EVENT_QUEUE};
use initialize::server_info;
use std::sync::Arc;

/// What a host message turned into.
pub enum Outcome {
    /// A notification or response: nothing to send back.
    Accepted,
    /// Answered by mcpmux itself, in the request's era.
    Reply(Message),
    /// Answered by an upstream, over a stream.
    Forward(Box<ForwardedCall>),
    /// Refused with an HTTP status of its own (403 `insufficient_scope` on step-up); where one
    /// reply cannot set the status, its JSON-RPC error.
    Denied {
        id: RequestId,
        refusal: crate::error::DownstreamError,
    },
    /// A notification or response mcpmux cannot accept (an answer under an id it never sent
    /// the session): an HTTP error whose JSON-RPC error has no id.
    Refused(crate::error::DownstreamError),
}

/// Route one session-era message from a host session.
pub async fn dispatch(hub: &Arc<Hub>, ctx: &RequestCtx, msg: Message) -> Outcome {
    match msg {
        Message::Request { id, method, params } => {
            let params = match params.as_deref().map(|p| RawObject::parse(p.get())).transpose() {
                Ok(params) => params.unwrap_or_default(),
                Err(_) => return Outcome::Reply(invalid_params_object(id)),
            };
            request(hub, ctx, id, method, params).await
        }
        Message::Notification { method, params } => {
            ctx.touch();
            notify::notification(ctx, &method, RawObject::parse_opt(params.as_deref()));
            Outcome::Accepted
        }
        Message::Response { id, payload } => {
            ctx.touch();
            match notify::response(ctx, id, payload) {
                Ok(()) => Outcome::Accepted,
                Err(refusal) => Outcome::Refused(refusal),
            }
        }
    }
}

impl Outcome {
    /// The pipeline's own error answer to request `id` (codes and messages: `error.rs`).
    pub fn refused(id: RequestId, error: RequestError) -> Outcome {
        Outcome::Reply(error.reply(id))
    }
}

/// A string member the request must carry, or the -32602 answer naming it.
fn required_str(params: &RawObject, key: &'static str, id: &RequestId) -> Result<String, Outcome> {
    (params.get_str(key)).ok_or_else(|| Outcome::refused(id.clone(), RequestError::MissingParam(key)))
}

/// A name that is not in the catalog but carries the namespace prefix of a configured upstream
/// that is not ready: the answer says that upstream is down and why (its tools and prompts are
/// out of the catalog while it is), retryable, instead of "Unknown tool".
/// Only an upstream the request's endpoint serves `name` of counts.
fn down_owner(hub: &Hub, access: &Access, kind: ListKind, name: &str) -> Option<RequestError> {
    let slot = owner_by_prefix(hub, access, kind, name)?;
    match &slot.personal {
        Some(_) => personal_down(&slot, access.principal()?),
        None => down(&slot, name),
    }
}

/// Why the principal's own connection to `slot`'s upstream failed (a refused token exchange,
/// no inbound token, the upstream unreachable), while that is still its answer.
fn personal_down(slot: &UpstreamSlot, principal: &crate::auth::Principal) -> Option<RequestError> {
    let me = slot.personal.as_ref()?.of(&principal.grant_principal())?;
    match me.state() {
        crate::upstream::personal::PersonalState::Failed(why) => {
            Some(UpstreamError::unavailable(slot.server.name.clone(), why).into())
        }
        _ => None,
    }
}

/// The upstream whose namespace prefixes `name` (the longest such), among those the request's
/// view holds.
fn owner_by_prefix(hub: &Hub, access: &Access, kind: ListKind, name: &str) -> Option<Arc<UpstreamSlot>> {
    (hub.upstreams.iter())
        .filter(|slot| !slot.naming.namespace.is_empty())
        .filter(|slot| access.in_view(kind, &slot.id, name))
        .filter(|slot| {
            (name.strip_prefix(slot.naming.namespace.as_str()))
                .and_then(|rest| rest.strip_prefix(slot.naming.separator.as_str()))
                .is_some_and(|rest| !rest.is_empty())
        })
        .max_by_key(|slot| slot.naming.namespace.len())
}

/// The answer for a request to `upstream` by `what` (a URI) when its shared connection is
/// down: the same words as for a name of a down server.
fn down_upstream(hub: &Hub, upstream: &UpstreamId, what: &str) -> Option<RequestError> {
    let slot = hub.upstreams.get(upstream)?;
    let unconnected = slot.server.isolation == Isolation::Shared && slot.shared.load().is_none();
    unconnected.then(|| down(&slot, what)).flatten()
}

/// That the upstream of `slot` is down, why, and that `what` returns once it is ready; `None`
/// when it is ready.
fn down(slot: &UpstreamSlot, what: &str) -> Option<RequestError> {
    let report = slot.state.report();
    if report.phase == Phase::Ready {
        return None;
    }
    let why = (report.last_error)
        .or_else(|| slot.down_reason.load_full().map(|r| (*r).clone()))
        .unwrap_or_else(|| "it has not finished starting".into());
    let reason = format!(
        "it is {} ({why}); {:?} is served again once it is ready",
        report.phase.as_str(),
        crate::util::text::clip(what)
    );
    Some(UpstreamError::unavailable(slot.server.name.clone(), reason).into())
}

/// A resource URI a host sent, resolved: its upstream, the upstream's own URI, and the URI
/// under which mcpmux reports on it (notifications name this one).
struct ResolvedUri {
    upstream: UpstreamId,
    original: String,
    exposed: String,
}

/// A host's resource URI resolved (a bare upstream URI too, when one upstream owns it), or the
/// answer saying why not: which `mcpmux://` forms would work, or that the upstream is down.
/// A URI the request's principal may not see is answered as one that does not exist, and the
/// forms an ambiguous URI names are only those it may see (one left: that one is meant).
/// The decision is noted on `trail`.
fn resolve_uri(
    hub: &Hub,
    ctx: &RequestCtx,
    (uri, params): (&str, &RawObject),
    id: &RequestId,
    trail: &mut Trail,
) -> Result<ResolvedUri, Outcome> {
    let catalog = hub.catalog_for(ctx);
    let access = Access::of(hub, ctx);
    let not_found = || {
        Outcome::refused(
            id.clone(),
            RequestError::ResourceNotFound { uri: uri.to_string() },
        )
    };
    let resolved = match catalog.resolve_uri(uri) {
        Err(UriMiss::Ambiguous(candidates)) => {
            let seen = |c: &String| {
                let served =
                    (catalog.resolve_uri(c)).is_ok_and(|(u, _)| access.in_view(ListKind::Resources, &u, c));
                served && access.permits(c)
            };
            let candidates: Vec<String> = candidates.into_iter().filter(seen).collect();
            match candidates.as_slice() {
                [] => {
                    trail.decide(hub, &access, uri, None, params);
                    return Err(not_found());
                }
                [only] => catalog.resolve_uri(only),
                _ => Err(UriMiss::Ambiguous(candidates)),
            }
        }
        other => other,
    };
    match resolved {
        Ok((upstream, original)) => {
            let exposed = catalog
                .naming(&upstream)
                .map_or_else(|| uri.to_string(), |n| n.expose_uri(&original));
            // Outside the profile of the request's endpoint: as unknown as a URI no one has.
            if !access.in_view(ListKind::Resources, &upstream, &exposed) {
                return Err(not_found());
            }
            let permitted = trail.decide(hub, &access, &exposed, Some((&upstream, &original)), params);
            if !permitted {
                return Err(not_found());
            }
            Ok(ResolvedUri {
                upstream,
                original,
                exposed,
            })
        }
        Err(UriMiss::Ambiguous(candidates)) => {
            let error = RequestError::AmbiguousUri {
                uri: uri.to_string(),
                candidates,
            };
            Err(Outcome::refused(id.clone(), error))
        }
        Err(UriMiss::Unknown) => {
            let error = RequestError::ResourceNotFound { uri: uri.to_string() };
            Err(Outcome::refused(id.clone(), error))
        }
    }
}

/// The answer to a request whose params are not an object.
pub fn invalid_params_object(id: RequestId) -> Message {
    RequestError::ParamsNotObject.reply(id)
}

/// Serve one request; the reply is in the request's era. Telemetry times it to its answer and,
/// with traces on, it is served inside its SERVER span.
pub async fn request(
    hub: &Arc<Hub>,
    ctx: &RequestCtx,
    id: RequestId,
    method: String,
    params: RawObject,
) -> Outcome {
    // A call through `mcpmux__call_tool` is the call it names from here on.
    let params = match meta_tools::unwrap_call(hub, ctx, &method, params) {
        Ok(params) => params,
        Err(refusal) => return refuse_in_era(ctx, id, refusal),
    };
    let parents = request_spans::Parents::of(ctx, &params);
    let retraced = parents.retrace(ctx);
    let ctx = retraced.as_ref().unwrap_or(ctx);
    let observed = super::observe::start(hub, ctx, &method, &params);
    let known = observed.known_target();
    let mut outcome = traced(hub, (ctx, &parents), known, id, method, params).await;
    super::observe::ended(observed, &mut outcome);
    outcome
}

/// [`serve_request`], inside the request's SERVER span when traces are on (named after `known`,
/// the tool or prompt the catalog has).
async fn traced(
    hub: &Arc<Hub>,
    (ctx, parents): (&RequestCtx, &request_spans::Parents),
    known: Option<&str>,
    id: RequestId,
    method: String,
    params: RawObject,
) -> Outcome {
    let traced = (hub.tracer.as_ref()).and_then(|tracer| {
        request_spans::server_span(tracer, (ctx, parents), (&id, &method), &params, known)
    });
    let Some(span) = traced else {
        return serve_request(hub, ctx, id, method, params).await;
    };
    let serving = serve_request(hub, ctx, id, method, params);
    let mut outcome = match span.context().cloned() {
        Some(context) => crate::telemetry::trace_context::serving(context, serving).await,
        None => serving.await,
    };
    request_spans::settle(span, &mut outcome);
    outcome
}

async fn serve_request(
    hub: &Arc<Hub>,
    ctx: &RequestCtx,
    id: RequestId,
    method: String,
    params: RawObject,
) -> Outcome {
    ctx.touch();
    if let Err(error) = params::check(&method, &params) {
        return refuse_in_era(ctx, id, error);
    }
    // The principal's own upstream connections: started at `initialize`, their lists waited
    // for by the requests that read the catalog.
    let wait = match method.as_str() {
        "initialize" => std::time::Duration::ZERO,
        _ => crate::upstream::personal::LISTS_WAIT,
    };
    hub.open_personal(ctx.principal.as_deref(), wait).await;
    match method.as_str() {
        // These answer in the request's era themselves.
        "server/discover" => return Outcome::Reply(discover::serve(hub, ctx, id)),
        "tools/list" => return Outcome::Reply(list::serve(hub, ctx, id, ListKind::Tools, &params)),
        "prompts/list" => return Outcome::Reply(list::serve(hub, ctx, id, ListKind::Prompts, &params)),
        "resources/list" => return Outcome::Reply(list::serve(hub, ctx, id, ListKind::Resources, &params)),
        "resources/templates/list" => {
            return Outcome::Reply(list::serve(hub, ctx, id, ListKind::Templates, &params))
        }
        _ => {}
    }
    // What the audit log hears of the gated methods: the decision their `serve` notes, then the outcome.
    let mut trail = Trail::start(hub, ctx, &method);
    let outcome = match method.as_str() {
        "ping" => Outcome::Reply(result_response(id, raw("{}".into()))),
        "initialize" => Outcome::refused(id, RequestError::AlreadyInitialized),
        "tools/call" => {
            call::serve(
                hub,
                ctx,
                id,
                method,
                params,
                (ListKind::Tools, ResultShape::ToolResult),
                &mut trail,
            )
            .await
        }
        "prompts/get" => {
            call::serve(
                hub,
                ctx,
                id,
                method,
                params,
                (ListKind::Prompts, ResultShape::PromptResult),
                &mut trail,
            )
            .await
        }
        "resources/read" => read::serve(hub, ctx, id, method, params, &mut trail).await,
        "resources/subscribe" | "resources/unsubscribe" => {
            subscribe::serve(hub, ctx, id, method, params, &mut trail).await
        }
        "completion/complete" => complete::serve(hub, ctx, id, method, params, &mut trail).await,
        "logging/setLevel" => set_level::serve(hub, ctx, id, &params).await,
        _ => Outcome::refused(id, RequestError::MethodNotFound(method)),
    };
    let outcome = trail.finish(outcome);
    match (ctx.era, outcome) {
        (Era::Modern, Outcome::Reply(reply)) => Outcome::Reply(shape_reply(reply, None)),
        (_, outcome) => outcome,
    }
}

/// The pipeline's own error answer, in the request's era.
fn refuse_in_era(ctx: &RequestCtx, id: RequestId, error: RequestError) -> Outcome {
    match ctx.era {
        Era::Modern => Outcome::Reply(shape_reply(error.reply(id), None)),
        _ => Outcome::refused(id, error),
    }
}

/// A reply mcpmux made itself, as a modern host must see it.
pub fn shape_reply(reply: Message, cache: Option<CacheHint>) -> Message {
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

/// Which upstream a host request goes to, how its result is exposed, and the `Mcp-Param-*`
/// headers a modern upstream expects for it (its own tool schema's annotations).
#[derive(Clone)]
struct Target {
    upstream: UpstreamId,
    shape: ResultShape,
    param_headers: Vec<(String, String)>,
    /// The tool or prompt it names, as the upstream knows it.
    name: Option<String>,
}

impl Target {
    fn new(upstream: UpstreamId, shape: ResultShape) -> Self {
        Target {
            upstream,
            shape,
            param_headers: Vec::new(),
            name: None,
        }
    }
}

/// Send a host request to upstream `index`, swapping the progress token for the upstream id.
async fn start_call(
    hub: &Arc<Hub>,
    ctx: &RequestCtx,
    id: RequestId,
    method: String,
    mut params: RawObject,
    target: Target,
) -> Outcome {
    let Some(session) = ctx.session.as_ref() else {
        return Outcome::refused(id, RequestError::NoSession);
    };
    if hub.shutdown.is_cancelled() {
        // HTTP 503 (in every era): the request never ran, so a balancer may send it to another
        // replica (nginx `proxy_next_upstream http_503`).
        let refusal = crate::error::DownstreamError::Unavailable("mcpmux is shutting down");
        return Outcome::Denied { id, refusal };
    }
    let Target {
        upstream,
        shape,
        param_headers,
        name: target,
    } = target;
    let slot = match hub.upstreams.slot(&upstream) {
        Ok(slot) => slot,
        Err(err) => return Outcome::refused(id, err.into()),
    };
    let principal = ctx.principal.as_ref().map(|p| p.grant_principal());
    let link = session.link();
    let handle = match hub
        .upstreams
        .connection_to(&slot, (&link, principal.as_deref()))
        .await
    {
        Ok(handle) => handle,
        Err(err) => return Outcome::refused(id, err.into()),
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
    let (client_span, trace_headers) = match request_spans::client_span(
        &hub.tracer,
        (&slot.server, &handle),
        (upstream_id, &method),
        &mut params,
    ) {
        Some((span, headers)) => (Some(span), headers),
        None => (None, Vec::new()),
    };
    let config = hub.config();
    let gateway = &config.gateway;
    // The server's live settings as they are now: this call keeps them (a reload changes the
    // next call's).
    let tunables = slot.tunables.load_full();
    let timeout = tunables.effective_request_timeout(gateway);
    let (sink, events) = call_channel(CALL_EVENT_QUEUE);
    let inflight = InflightCall {
        upstream: handle.clone(),
        upstream_id,
    };
    if !session.try_add_inflight(id.clone(), inflight, gateway.max_in_flight_per_session) {
        crate::telemetry::record::refused(crate::telemetry::Refusal::Overload);
        return Outcome::refused(id, RequestError::SessionBusy(gateway.max_in_flight_per_session));
    }
    // The text is kept for a retry with input; a modern upstream gets the parsed object too, to
    // add its envelope to without parsing the text again.
    let upstream_params = params.to_raw();
    let outbound = match handle.is_modern() {
        true => CallParams::Object(params),
        false => CallParams::Raw(upstream_params.clone()),
    };
    let call = OutboundCall {
        upstream_id,
        method: method.clone(),
        params: Some(outbound),
        param_headers: param_headers.clone(),
        origin: CallOrigin::Host {
            host: session.link(),
            sink,
        },
        span: ctx.span.clone(),
        trace_headers: trace_headers.clone(),
        target: target.clone(),
    };
    if let Err(err) = handle.send_call(call) {
        session.finish_inflight(&id, upstream_id);
        return Outcome::refused(id, err.into());
    }
    Outcome::Forward(Box::new(ForwardedCall {
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
        span: ctx.span.clone(),
        audit: None,
        spans: request_spans::CallSpans {
            server: None,
            client: client_span,
        },
        trace_headers,
        observed: None,
        target,
        deadline: Deadline::new(
            timeout,
            tunables.timeout_resets_on_progress,
            gateway.max_request_timeout,
        ),
        drain: DrainTicket {
            expired: hub.drain_expired.clone(),
            secs: gateway.drain_timeout.as_secs(),
            in_flight: hub.calls.token(),
        },
    }))
}
