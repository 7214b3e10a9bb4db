//! A request's `error.type`, as the MCP conventions define it: the JSON-RPC error code
//! (`"-32602"`), `tool_error` for a tool result with `isError: true`, `timeout` for mcpmux's own
//! timeout (`-32001`), `cancelled` for a request that ended without a response. `None`: success.

use crate::protocol::{codes, ResponsePayload};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// A request's `error.type`; `None` when it succeeded.
pub type ErrorType = Option<Cow<'static, str>>;

pub const TOOL_ERROR: &str = "tool_error";
pub const TIMEOUT: &str = "timeout";
pub const CANCELLED: &str = "cancelled";

/// The `error.type` of a JSON-RPC error code.
pub fn of_code(code: i64) -> ErrorType {
    Some(match code {
        codes::REQUEST_TIMEOUT => Cow::Borrowed(TIMEOUT),
        code => Cow::Owned(code.to_string()),
    })
}

/// The `error.type` of an error object's text (its `code`; `_OTHER` without one).
pub fn of_error(error: &str) -> ErrorType {
    #[derive(Deserialize)]
    struct Peek {
        code: Option<i64>,
    }
    match serde_json::from_str::<Peek>(error).ok().and_then(|p| p.code) {
        Some(code) => of_code(code),
        None => Some(Cow::Borrowed(super::names::OTHER)),
    }
}

/// The `error.type` of a result's text: `tool_error` when it is a tool result with
/// `isError: true` (only `tools/call` results are read: `tool_result`).
pub fn of_result(result: &str, tool_result: bool) -> ErrorType {
    #[derive(Deserialize)]
    struct Peek {
        #[serde(rename = "isError")]
        is_error: Option<bool>,
    }
    // Most results have no `isError` at all: a scan for it spares them the parse.
    let failed = tool_result
        && mentions(result, "\"isError\"")
        && serde_json::from_str::<Peek>(result).is_ok_and(|p| p.is_error == Some(true));
    failed.then_some(Cow::Borrowed(TOOL_ERROR))
}

/// The `error.type` of a parsed response's payload.
pub fn of_payload(payload: &ResponsePayload, tool_result: bool) -> ErrorType {
    match payload {
        ResponsePayload::Error(error) => of_error(error.get()),
        ResponsePayload::Result(result) => of_result(result.get(), tool_result),
    }
}

/// The `error.type` of a whole JSON-RPC response's text.
pub fn of_response(response: &str, tool_result: bool) -> ErrorType {
    #[derive(Deserialize)]
    struct Peek<'a> {
        #[serde(borrow)]
        result: Option<&'a RawValue>,
        #[serde(borrow)]
        error: Option<&'a RawValue>,
    }
    // A success without `isError` is told by a scan, without parsing the response.
    let may_fail = mentions(response, "\"error\"") || (tool_result && mentions(response, "\"isError\""));
    if !may_fail {
        return None;
    }
    match serde_json::from_str::<Peek<'_>>(response) {
        Ok(Peek { error: Some(e), .. }) => of_error(e.get()),
        Ok(Peek { result: Some(r), .. }) => of_result(r.get(), tool_result),
        _ => Some(Cow::Borrowed(super::names::OTHER)),
    }
}

/// Whether `text` contains `needle` (a quoted key: a text without it cannot have that member).
fn mentions(text: &str, needle: &str) -> bool {
    memchr::memmem::find(text.as_bytes(), needle.as_bytes()).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_tool_errors_timeouts_and_success() {
        let error = |text: &str| of_response(text, true).map(|c| c.into_owned());
        assert_eq!(
            error(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}"#).as_deref(),
            Some("-32602")
        );
        assert_eq!(
            error(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"x"}}"#).as_deref(),
            Some("timeout")
        );
        assert_eq!(
            error(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}"#).as_deref(),
            Some("tool_error")
        );
        assert_eq!(
            error(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}}"#),
            None
        );
        assert_eq!(error(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#), None);
        // Only a tool result's isError counts.
        assert_eq!(
            of_response(r#"{"jsonrpc":"2.0","id":1,"result":{"isError":true}}"#, false),
            None
        );
        assert_eq!(error(r#"{"error":"#).as_deref(), Some("_OTHER"));
        // A result whose text mentions errors is still a success.
        let mentions =
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"an \"error\""}]}}"#;
        assert_eq!(error(mentions), None);
        assert_eq!(of_result(r#"{"content":[]}"#, true), None);
    }
}
