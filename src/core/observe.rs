//! What telemetry hears of each host request the pipeline serves: its method, the tool or
//! prompt it names when the catalog has it, the upstream it goes to, and how it ended, timed
//! from the pipeline's start to the response (a forwarded call's, when its stream sends it);
//! with `[telemetry] access_log`, the request's access line too.

use super::context::RequestCtx;
use super::hub::Hub;
use super::methods::Outcome;
use super::request_spans::{self, Parents};
use crate::catalog::ListKind;
use crate::protocol::message::error_reply;
use crate::protocol::{Message, RawObject, RequestId, ResponsePayload};
use crate::session::Session;
use crate::telemetry::access::AccessFacts;
use crate::telemetry::spans::ActiveSpan;
use crate::telemetry::trace_names::{MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
use crate::telemetry::{outcome, HostOp};

/// A host request to `method` with `params` begins.
pub fn start(hub: &Hub, ctx: &RequestCtx, method: &str, params: &RawObject) -> HostOp {
    let mut op = HostOp::start(method);
    op.noting_failures(hub.recent_errors.clone());
    let kind = match method {
        "tools/call" => Some(ListKind::Tools),
        "prompts/get" => Some(ListKind::Prompts),
        _ => None,
    };
    let name = match kind {
        Some(_) => params.get_str("name"),
        None if method.starts_with("resources/") => params.get_str("uri"),
        None => None,
    };
    if let Some(kind) = kind {
        let catalog = hub.catalog_for(ctx);
        let item = name.as_deref().and_then(|name| catalog.list(kind).lookup(name));
        op.naming(kind == ListKind::Tools, item.map(|item| &*item.exposed));
        if let Some(slot) = item.and_then(|item| hub.upstreams.get(&item.upstream)) {
            op.to_upstream(&slot.server.name);
        }
    }
    if wants_access(hub) {
        let session = ctx.session.as_deref();
        let (client_name, client_version) = match &ctx.client {
            Some(client) => (Some(client.name.clone()), client.version.clone()),
            None => (
                session.and_then(|s| s.client_part("name")),
                session.and_then(|s| s.client_part("version")),
            ),
        };
        op.logging(AccessFacts {
            name: name.map(|name| crate::util::text::clip(&name).into_owned()),
            session: session.map(|s| s.log_id().to_string()),
            principal: ctx.principal.as_ref().map(|p| p.name.clone()),
            client_name,
            client_version,
            trace_id: Some(ctx.trace_id.clone()),
        });
    }
    op
}

/// Whether host requests get access lines (then, and only then, their facts are gathered).
pub fn wants_access(hub: &Hub) -> bool {
    hub.config().telemetry.access_log && crate::telemetry::access::enabled()
}

/// The pipeline answered with `outcome`: an answer of mcpmux's own ends `op` now, a forwarded
/// call carries it until its response (or, dropped without one, records it as cancelled).
pub fn ended(mut op: HostOp, outcome: &mut Outcome) {
    match outcome {
        Outcome::Reply(Message::Response { payload, .. }) => {
            let tool = op.is_tool_call();
            op.finish(match payload {
                ResponsePayload::Error(error) => outcome::of_error(error.get()),
                ResponsePayload::Result(result) => outcome::of_result(result.get(), tool),
            })
        }
        Outcome::Forward(call) => {
            op.to_upstream(call.upstream.name());
            call.observed = Some(op);
        }
        Outcome::Denied { refusal, .. } => op.finish(outcome::of_code(refusal.code())),
        Outcome::Reply(_) | Outcome::Accepted | Outcome::Refused(_) => op.finish(None),
    }
}

/// The parents of a request with `params` in `ctx`, and `ctx` in the trace its `_meta` names
/// when that is another one.
fn in_its_trace(ctx: RequestCtx, params: &RawObject) -> (RequestCtx, Parents) {
    let parents = Parents::of(&ctx, params);
    let ctx = parents.retrace(&ctx).unwrap_or(ctx);
    (ctx, parents)
}

/// An `initialize` being served (it opens a session rather than run in one): its metric, access
/// line and SERVER span, ended when the session is open ([`Opening::opened`]); dropped before,
/// they end as cancelled.
pub struct Opening {
    op: HostOp,
    span: Option<ActiveSpan>,
}

impl Opening {
    /// Request `id` to `initialize` with `params` begins (in the trace its `_meta` names, if any).
    pub fn start(hub: &Hub, ctx: RequestCtx, id: &RequestId, params: Option<&RawObject>) -> Opening {
        let none = RawObject::default();
        let params = params.unwrap_or(&none);
        let (ctx, parents) = in_its_trace(ctx, params);
        let op = start(hub, &ctx, "initialize", params);
        let span = (hub.tracer.as_ref()).and_then(|tracer| {
            request_spans::server_span(tracer, (&ctx, &parents), (id, "initialize"), params, None)
        });
        Opening { op, span }
    }

    /// It opened `session`: the access line and the span name it (and the version it speaks).
    pub fn opened(mut self, session: &Session) {
        if let Some(facts) = self.op.access_mut() {
            facts.session = Some(session.log_id().to_string());
            facts.client_name = session.client_part("name");
            facts.client_version = session.client_part("version");
        }
        if let Some(mut span) = self.span.take() {
            span.set(MCP_SESSION_ID, session.id.clone());
            span.set(MCP_PROTOCOL_VERSION, session.protocol_version.clone());
            span.end();
        }
        self.op.finish(None);
    }
}

/// A host request a face answered itself with `reply`, before the pipeline (a 2026-07-28
/// request refused for its version, envelope, headers or method; a listen stream opened): it
/// gets its metric, access line and SERVER span like any other. `reply` comes back unchanged.
pub fn answered(
    hub: &Hub,
    ctx: RequestCtx,
    (id, method): (&RequestId, &str),
    params: Option<&RawObject>,
    reply: Message,
) -> Message {
    let none = RawObject::default();
    let params = params.unwrap_or(&none);
    let (ctx, parents) = in_its_trace(ctx, params);
    let op = start(hub, &ctx, method, params);
    let span = (hub.tracer.as_ref()).and_then(|tracer| {
        request_spans::server_span(tracer, (&ctx, &parents), (id, method), params, op.known_target())
    });
    let mut outcome = Outcome::Reply(reply);
    if let Some(span) = span {
        request_spans::settle(span, &mut outcome);
    }
    ended(op, &mut outcome);
    match outcome {
        Outcome::Reply(reply) => reply,
        // `settle` and `ended` leave a reply as it is.
        _ => error_reply(id.clone(), crate::error::codes::INTERNAL_ERROR, "no answer", None),
    }
}
