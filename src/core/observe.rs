//! What telemetry hears of each host request the pipeline serves: its method, the tool or
//! prompt it names when the catalog has it, the upstream it goes to, and how it ended, timed
//! from the pipeline's start to the response (a forwarded call's, when its stream sends it);
//! with `[telemetry] access_log`, the request's access line too.

use super::context::RequestCtx;
use super::hub::Hub;
use super::methods::Outcome;
use crate::catalog::ListKind;
use crate::protocol::{Message, RawObject, ResponsePayload};
use crate::telemetry::access::AccessFacts;
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
        let catalog = hub.catalog.snapshot();
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
            session: session.map(|s| s.id.clone()),
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
