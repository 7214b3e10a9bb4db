//! The names traces use, in one place: span names are `{mcp.method.name} {target}` per the
//! OpenTelemetry semantic conventions for MCP, the method alone when there is no low-cardinality
//! target (a name the catalog does not have is none); attribute keys and the `error.type` values
//! mcpmux sets. Never an argument, result, token or prompt text.

/// `mcp.method.name`: the JSON-RPC method.
pub const MCP_METHOD_NAME: &str = "mcp.method.name";
/// `mcp.protocol.version`: the MCP version the request speaks.
pub const MCP_PROTOCOL_VERSION: &str = "mcp.protocol.version";
/// `mcp.session.id`: recommended by the conventions when the request is part of a session.
pub const MCP_SESSION_ID: &str = "mcp.session.id";
/// `mcp.resource.uri`: conditionally required on resource requests (never in the span name).
pub const MCP_RESOURCE_URI: &str = "mcp.resource.uri";
/// `gen_ai.tool.name`: the tool of a `tools/call`.
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
/// `gen_ai.prompt.name`: the prompt of a `prompts/get`.
pub const GEN_AI_PROMPT_NAME: &str = "gen_ai.prompt.name";
/// `gen_ai.operation.name`: `execute_tool` on a `tools/call`.
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
/// The value of `gen_ai.operation.name` for a tool call.
pub const EXECUTE_TOOL: &str = "execute_tool";
/// `jsonrpc.request.id`: the request's id as text.
pub const JSONRPC_REQUEST_ID: &str = "jsonrpc.request.id";
/// `rpc.response.status_code`: the JSON-RPC error code of an error answer.
pub const RPC_RESPONSE_STATUS_CODE: &str = "rpc.response.status_code";
/// `network.transport`: `tcp` for HTTP, `pipe` for stdio.
pub const NETWORK_TRANSPORT: &str = "network.transport";
/// `network.protocol.name`: `http` when the transport is HTTP.
pub const NETWORK_PROTOCOL_NAME: &str = "network.protocol.name";
/// `server.address` / `server.port`: the upstream an HTTP leg goes to.
pub const SERVER_ADDRESS: &str = "server.address";
pub const SERVER_PORT: &str = "server.port";
/// `error.type`: the JSON-RPC code, `tool_error`, `timeout` or `cancelled`.
pub const ERROR_TYPE: &str = "error.type";
/// `mcpmux.upstream`: the configured name of the upstream a CLIENT span goes to.
pub const MCPMUX_UPSTREAM: &str = "mcpmux.upstream";
/// The resource attribute naming the service.
pub const SERVICE_NAME: &str = "service.name";

/// `error.type` of a `tools/call` answered with `isError: true`.
pub const TOOL_ERROR: &str = "tool_error";
/// `error.type` of a request that ended without an answer (the host cancelled it or left).
pub const CANCELLED: &str = "cancelled";
/// `error.type` of a request mcpmux stopped waiting for.
pub const TIMEOUT: &str = "timeout";

/// The instrumentation scope of every span.
pub const SCOPE_NAME: &str = "mcpmux";

/// A span's name: `{mcp.method.name} {target}`, or the method alone without a target. The
/// caller passes only a low-cardinality target (a name the catalog has), never what a host
/// made up.
pub fn span_name(method: &str, target: Option<&str>) -> String {
    match target {
        Some(target) if !target.is_empty() => format!("{method} {target}"),
        _ => method.to_string(),
    }
}

/// The attribute that names the target of `method` (the tool or the prompt), if it has one.
pub fn target_attribute(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" => Some(GEN_AI_TOOL_NAME),
        "prompts/get" => Some(GEN_AI_PROMPT_NAME),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_names_follow_method_then_target() {
        assert_eq!(span_name("tools/call", Some("echo")), "tools/call echo");
        assert_eq!(span_name("tools/list", None), "tools/list");
        assert_eq!(span_name("prompts/get", Some("")), "prompts/get");
        assert_eq!(target_attribute("prompts/get"), Some("gen_ai.prompt.name"));
        assert_eq!(target_attribute("resources/read"), None);
    }
}
