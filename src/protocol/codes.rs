//! JSON-RPC error codes mcpmux emits.

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// Implementation-defined: the upstream that owns the request cannot serve it now.
pub const UPSTREAM_UNAVAILABLE: i64 = -32000;
/// Implementation-defined: the request ran past its deadline.
pub const REQUEST_TIMEOUT: i64 = -32001;
/// Legacy MCP: resource not found.
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// Implementation-defined: a bounded queue or in-flight limit is full.
pub const OVERLOADED: i64 = -32003;
/// Implementation-defined: the principal is over a `[[policy]]` rule's `rate_limit` (HTTP 429;
/// `data.retryAfter` is the `Retry-After` in seconds).
pub const RATE_LIMITED: i64 = -32004;
/// 2026-07-28: HTTP request-metadata headers missing, malformed or not matching the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// 2026-07-28: the request needs a client capability its `_meta` does not declare.
pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
/// 2026-07-28: the requested protocol version is not supported (`data.supported`).
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// A few words for a code mcpmux knows (the admin page's recent errors); `None` for others.
pub fn name(code: i64) -> Option<&'static str> {
    Some(match code {
        PARSE_ERROR => "parse error",
        INVALID_REQUEST => "invalid request",
        METHOD_NOT_FOUND => "method not found",
        INVALID_PARAMS => "invalid params",
        INTERNAL_ERROR => "internal error",
        UPSTREAM_UNAVAILABLE => "upstream unavailable",
        REQUEST_TIMEOUT => "timed out",
        RESOURCE_NOT_FOUND => "resource not found",
        OVERLOADED => "overloaded",
        RATE_LIMITED => "rate limited",
        HEADER_MISMATCH => "header mismatch",
        MISSING_CLIENT_CAPABILITY => "missing client capability",
        UNSUPPORTED_PROTOCOL_VERSION => "unsupported protocol version",
        _ => return None,
    })
}
