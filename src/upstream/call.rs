//! A request on its way to an upstream ([`OutboundCall`]), who waits for it ([`CallOrigin`]),
//! what flows back to a host call ([`CallEvent`]), and the commands a connection actor takes.

use super::call_channel::CallSink;
use super::host::HostLink;
use crate::error::UpstreamError;
use crate::protocol::{Message, RawObject};
use serde_json::value::RawValue;
use std::sync::Arc;
use tokio::sync::oneshot;

/// What flows back to the host call that caused it.
#[derive(Debug)]
pub enum CallEvent {
    /// The upstream's response (its id is the upstream-side id).
    Response(Message),
    /// A notification tied to the call (progress still carries the gateway's token).
    Notification(Message),
    /// A server-to-client request, already addressed to the host (downstream id).
    ServerRequest(Arc<str>),
    /// The call cannot complete.
    Failed(UpstreamError),
    /// The upstream ended the call's stream before answering and mcpmux is resuming it (SSE
    /// polling); `retry_ms` is the delay the upstream asked for.
    Paused { retry_ms: Option<u64> },
}

/// Who is waiting for a request's answer.
pub enum CallOrigin {
    /// mcpmux itself (initialize, list walks, setLevel).
    Internal(oneshot::Sender<Result<Box<RawValue>, CallFailure>>),
    /// A host session's call.
    Host { host: Arc<dyn HostLink>, sink: CallSink },
}

/// Why an internal request failed.
#[derive(Debug)]
pub enum CallFailure {
    Upstream(UpstreamError),
    /// The upstream answered with a JSON-RPC error object.
    Rpc(Box<RawValue>),
}

impl CallFailure {
    /// The upstream answered "method not found" (-32601): it does not serve that method.
    pub fn is_method_not_found(&self) -> bool {
        #[derive(serde::Deserialize)]
        struct Code {
            code: i64,
        }
        match self {
            CallFailure::Rpc(error) => serde_json::from_str::<Code>(error.get())
                .is_ok_and(|e| e.code == crate::protocol::codes::METHOD_NOT_FOUND),
            CallFailure::Upstream(_) => false,
        }
    }
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallFailure::Upstream(e) => write!(f, "{e}"),
            CallFailure::Rpc(e) => write!(f, "error {}", e.get()),
        }
    }
}

/// A request's params: as text, or as the object the pipeline already parsed (a modern
/// upstream's envelope is then added without parsing them again).
pub enum CallParams {
    Raw(Box<RawValue>),
    Object(RawObject),
}

impl CallParams {
    /// As an object (text that is not one gives an empty object, as an envelope needs one).
    pub fn into_object(self) -> RawObject {
        match self {
            CallParams::Object(obj) => obj,
            CallParams::Raw(raw) => RawObject::parse(raw.get()).unwrap_or_default(),
        }
    }

    /// As text.
    pub fn into_raw(self) -> Box<RawValue> {
        match self {
            CallParams::Raw(raw) => raw,
            CallParams::Object(obj) => obj.to_raw(),
        }
    }
}

/// A request to send upstream.
pub struct OutboundCall {
    pub upstream_id: u64,
    pub method: String,
    pub params: Option<CallParams>,
    /// `Mcp-Param-*` headers for a modern HTTP upstream (lowercase name, value).
    pub param_headers: Vec<(String, String)>,
    pub origin: CallOrigin,
    /// The span of the host request behind it (none for mcpmux's own): the actor records what
    /// happens to the call under it, so a call can be followed through the actor's channel.
    pub span: tracing::Span,
    /// The W3C trace context headers (`traceparent`, `tracestate`) of the call's CLIENT span,
    /// sent along to an HTTP upstream; empty when traces are off.
    pub trace_headers: Vec<(String, String)>,
    /// The tool or prompt a `tools/call` or `prompts/get` names (the upstream's own name, from
    /// the catalog): the leg's `gen_ai_tool_name` or `gen_ai_prompt_name` label.
    pub target: Option<String>,
}

/// Commands a connection actor accepts.
pub enum Command {
    Call(OutboundCall),
    Notify {
        method: String,
        params: Option<Box<RawValue>>,
    },
    /// Cancellations or answers wait in the urgent lane (when the queue is full, the actor
    /// finds them before its next command anyway).
    Wake,
    /// Give the connection up (it stopped answering): pending calls fail with this reason.
    Abandon(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_not_found_is_told_apart_from_other_failures() {
        let rpc = |text: &str| CallFailure::Rpc(RawValue::from_string(text.to_string()).expect("json"));
        assert!(rpc(r#"{"code":-32601,"message":"Method not found"}"#).is_method_not_found());
        assert!(!rpc(r#"{"code":-32603,"message":"boom"}"#).is_method_not_found());
        assert!(!rpc(r#"{"message":"no code"}"#).is_method_not_found());
        let down = CallFailure::Upstream(UpstreamError::unavailable("x".to_string(), "gone"));
        assert!(!down.is_method_not_found());
    }
}
