//! The trace of one host request: its SERVER span (parent: the request's `_meta.traceparent`,
//! else the HTTP `traceparent` header) and the CLIENT span of its upstream leg, whose context
//! goes to the upstream in `_meta` (and HTTP headers). Only with `[telemetry] otlp_endpoint`.

use super::context::{Era, RequestCtx};
use super::methods::Outcome;
use crate::audit::record;
use crate::config::{ServerConfig, TransportConfig};
use crate::protocol::modern::MODERN_VERSION;
use crate::protocol::{codes, Message, RawObject, RequestId, ResponsePayload};
use crate::telemetry::spans::{ActiveSpan, Tracer};
use crate::telemetry::trace_context::{self, SpanContext};
use crate::telemetry::trace_names::*;
use crate::upstream::UpstreamHandle;
use std::sync::Arc;

/// The `sampled` bit of W3C trace flags.
const SAMPLED: u8 = 1;

/// The spans a forwarded call ends when its response reaches the host.
#[derive(Debug, Default)]
pub struct CallSpans {
    pub server: Option<ActiveSpan>,
    pub client: Option<ActiveSpan>,
}

impl CallSpans {
    /// The call's response (its JSON-RPC text) reached the host: both spans end with its outcome.
    pub fn finish(&mut self, response: &str) {
        if self.server.is_none() && self.client.is_none() {
            // Without traces (no `otlp_endpoint`, or not sampled) nothing reads the response.
            return;
        }
        let ending = record::outcome_of(response);
        for span in [self.client.take(), self.server.take()].into_iter().flatten() {
            end_with(span, ending);
        }
    }
}

/// The remote contexts a host request may name: its own `_meta.traceparent`, and (through the
/// trace id the tracing layer gave the HTTP request) its HTTP `traceparent` header.
#[derive(Debug)]
pub struct Parents {
    /// The request's `_meta.traceparent`, when valid: the trace the request is in.
    pub meta: Option<SpanContext>,
    /// The HTTP request's trace id (its header's, else a fresh one).
    pub header_trace: Arc<str>,
}

impl Parents {
    /// The parents of a request with `params` in `ctx`.
    pub fn of(ctx: &RequestCtx, params: &RawObject) -> Parents {
        Parents {
            meta: meta_parent(params),
            header_trace: ctx.trace_id.clone(),
        }
    }

    /// `ctx` moved into the trace its `_meta` names, when that is another one than `ctx`'s: a
    /// request that names its own parent is in that trace (its spans, access line and audit
    /// record all say so).
    pub fn retrace(&self, ctx: &RequestCtx) -> Option<RequestCtx> {
        let meta = self.meta.as_ref().filter(|meta| meta.trace_id != ctx.trace_id)?;
        Some(ctx.in_trace(meta.trace_id.clone()))
    }
}

/// The parent a request names in its `_meta` (`traceparent`, `tracestate`), if valid. A request
/// whose `_meta` does not mention `traceparent` costs a scan of its text and nothing else.
pub fn meta_parent(params: &RawObject) -> Option<SpanContext> {
    let text = params.get("_meta")?.get();
    if !text.contains("\"traceparent\"") {
        return None;
    }
    let meta = RawObject::parse(text).ok()?;
    let traceparent = meta.get_str("traceparent")?;
    SpanContext::from_headers(&traceparent, meta.get_str("tracestate").as_deref())
}

/// Start the SERVER span of request `id`. The parent is the request's own `_meta.traceparent`
/// when it has a valid one (as the MCP conventions ask: one HTTP request may carry several MCP
/// requests, and a message's context is its own), linked to the HTTP header's context when that
/// differs; else the HTTP `traceparent`; else none, in the request's own trace id. A parent
/// whose flags say "not sampled" is obeyed: no span (and the request's `_meta` goes on as sent).
/// The span is named after `known`, the tool or prompt when the catalog has it; a name it does
/// not have is no low-cardinality target, and the span is named after the method alone.
pub fn server_span(
    tracer: &Arc<Tracer>,
    (ctx, parents): (&RequestCtx, &Parents),
    (id, method): (&RequestId, &str),
    params: &RawObject,
    known: Option<&str>,
) -> Option<ActiveSpan> {
    let meta = parents.meta.clone();
    let http = trace_context::http_parent().filter(|p| p.trace_id == parents.header_trace);
    if (meta.as_ref().or(http.as_ref())).is_some_and(|parent| parent.flags & SAMPLED == 0) {
        return None;
    }
    let (trace, parent, link) = match (meta, http) {
        (Some(meta), http) => {
            let link = http.filter(|h| h.span_id != meta.span_id || h.trace_id != meta.trace_id);
            ((meta.trace_id, meta.tracestate), Some(meta.span_id), link)
        }
        (None, Some(http)) => ((http.trace_id, http.tracestate), Some(http.span_id), None),
        (None, None) => ((ctx.trace_id.clone(), None), None, None),
    };
    // A made-up name is still the attribute (clipped): the conventions require it on a tool call.
    let target = (target_attribute(method).and_then(|_| params.get_str("name"))).map(|name| match known {
        Some(_) => name,
        None => crate::util::text::clip(&name).into_owned(),
    });
    let mut span = tracer.server(span_name(method, known), trace, parent);
    if let Some(link) = link {
        span.link(link);
    }
    set_common(&mut span, method, target, params);
    span.set(
        JSONRPC_REQUEST_ID,
        id.as_string().unwrap_or_else(|| id.as_json().to_string()),
    );
    let version = match (&ctx.session, ctx.era) {
        (Some(session), Era::Session) => {
            span.set(MCP_SESSION_ID, session.id.clone());
            session.protocol_version.clone()
        }
        _ => MODERN_VERSION.to_string(),
    };
    span.set(MCP_PROTOCOL_VERSION, version);
    span.set(NETWORK_TRANSPORT, "tcp");
    span.set(NETWORK_PROTOCOL_NAME, "http");
    Some(span)
}

/// The attributes both kinds share: the method, its target, and a resource's URI.
fn set_common(span: &mut ActiveSpan, method: &str, target: Option<String>, params: &RawObject) {
    span.set(MCP_METHOD_NAME, method);
    if let (Some(key), Some(target)) = (target_attribute(method), target) {
        span.set(key, target);
    }
    if method == "tools/call" {
        span.set(GEN_AI_OPERATION_NAME, EXECUTE_TOOL);
    }
    if method.starts_with("resources/") {
        if let Some(uri) = params.get_str("uri") {
            span.set(MCP_RESOURCE_URI, uri);
        }
    }
}

/// The SERVER span's part in `outcome`: an answer of mcpmux's own ends it now; a forwarded
/// call carries it until its response reaches the host.
pub fn settle(mut span: ActiveSpan, outcome: &mut Outcome) {
    match outcome {
        Outcome::Forward(call) => {
            call.spans.server = Some(span);
        }
        Outcome::Reply(Message::Response { payload, .. }) => {
            let ending = match payload {
                ResponsePayload::Error(error) => record::error_ending(error.get()),
                ResponsePayload::Result(result) => record::result_ending(result.get()),
            };
            end_with(span, ending);
        }
        Outcome::Denied { refusal, .. } | Outcome::Refused(refusal) => {
            span.fail("_OTHER", Some(refusal.to_string()));
            span.end();
        }
        Outcome::Accepted | Outcome::Reply(_) => span.end(),
    }
}

fn end_with(mut span: ActiveSpan, (_, code, is_error): record::Ending) {
    match (code, is_error) {
        (Some(code), _) => {
            span.set(RPC_RESPONSE_STATUS_CODE, code.to_string());
            let error_type = match code {
                codes::REQUEST_TIMEOUT => TIMEOUT.to_string(),
                code => code.to_string(),
            };
            span.fail(error_type, None);
        }
        (None, Some(true)) => span.fail(TOOL_ERROR, None),
        _ => {}
    }
    span.end();
}

/// The CLIENT span of a leg to upstream `server` over `connection`, child of the SERVER span
/// being served, with
/// its context written into `params._meta` (`traceparent`, and `tracestate` when the trace has
/// one; the other `_meta` members and params untouched); and the HTTP headers carrying it.
/// `None` (and `params` untouched) when no SERVER span is being served.
pub fn client_span(
    tracer: &Option<Arc<Tracer>>,
    (server, connection): (&ServerConfig, &UpstreamHandle),
    (id, method): (u64, &str),
    params: &mut RawObject,
) -> Option<(ActiveSpan, Vec<(String, String)>)> {
    let tracer = tracer.as_ref()?;
    let parent = trace_context::current_server()?;
    let target = target_attribute(method).and_then(|_| params.get_str("name"));
    let mut span = tracer.client(&parent, span_name(method, target.as_deref()));
    set_common(&mut span, method, target, params);
    span.set(JSONRPC_REQUEST_ID, id.to_string());
    span.set(MCPMUX_UPSTREAM, server.name.clone());
    if let Some(facts) = connection.facts() {
        span.set(MCP_PROTOCOL_VERSION, facts.protocol_version.clone());
    }
    match &server.transport {
        TransportConfig::Stdio { .. } => span.set(NETWORK_TRANSPORT, "pipe"),
        TransportConfig::Http { url, .. } => {
            span.set(NETWORK_TRANSPORT, "tcp");
            span.set(NETWORK_PROTOCOL_NAME, "http");
            if let Ok(url) = url::Url::parse(url) {
                if let Some(host) = url.host_str() {
                    span.set(SERVER_ADDRESS, host.to_string());
                }
                if let Some(port) = url.port_or_known_default() {
                    span.set(SERVER_PORT, i64::from(port));
                }
            }
        }
    }
    let context = span.context()?.clone();
    let traceparent = context.traceparent();
    let mut meta = params.get_object("_meta").unwrap_or_default();
    meta.set_str("traceparent", &traceparent);
    let mut headers = vec![("traceparent".to_string(), traceparent)];
    match &context.tracestate {
        Some(state) => {
            meta.set_str("tracestate", state);
            headers.push(("tracestate".to_string(), state.to_string()));
        }
        // A `tracestate` beside a `traceparent` that was not valid belongs to no trace we carry.
        None => {
            meta.remove("tracestate");
        }
    }
    params.set("_meta", meta.to_raw());
    Some((span, headers))
}
