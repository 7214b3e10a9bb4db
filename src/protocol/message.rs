//! The JSON-RPC envelope: a message's kind, id and method decoded; params, results and errors
//! kept as raw JSON so everything mcpmux does not act on passes through byte for byte.

use serde::Deserialize;
use serde_json::value::RawValue;
use std::fmt;

/// A JSON-RPC request id exactly as the peer wrote it (a string or an integer).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RequestId(Box<str>);

impl RequestId {
    /// Accept a raw JSON value as an id when it is a string or an integer.
    pub fn from_raw(raw: &RawValue) -> Option<Self> {
        let text = raw.get();
        let valid = if text.starts_with('"') {
            serde_json::from_str::<String>(text).is_ok()
        } else {
            text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok()
        };
        valid.then(|| RequestId(text.into()))
    }

    /// An integer id.
    pub fn number(n: u64) -> Self {
        RequestId(n.to_string().into())
    }

    /// A string id (`text` as a JSON string).
    pub fn string(text: &str) -> Self {
        RequestId(json_string(text).into())
    }

    /// The id's text when it is a string.
    pub fn as_string(&self) -> Option<String> {
        match self.0.starts_with('"') {
            true => serde_json::from_str(&self.0).ok(),
            false => None,
        }
    }

    /// The id's JSON text, as it goes on the wire.
    pub fn as_json(&self) -> &str {
        &self.0
    }

    /// The id as an unsigned integer, when it is one.
    pub fn as_u64(&self) -> Option<u64> {
        self.0.parse().ok()
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The outcome carried by a response.
#[derive(Debug, Clone)]
pub enum ResponsePayload {
    Result(Box<RawValue>),
    Error(Box<RawValue>),
}

/// One JSON-RPC message.
#[derive(Debug, Clone)]
pub enum Message {
    Request {
        id: RequestId,
        method: String,
        params: Option<Box<RawValue>>,
    },
    Notification {
        method: String,
        params: Option<Box<RawValue>>,
    },
    Response {
        /// `None` only for errors about a message whose id could not be read.
        id: Option<RequestId>,
        payload: ResponsePayload,
    },
}

/// A POST body or a stdio line: one message, or a JSON-RPC batch.
#[derive(Debug)]
pub enum Body {
    Single(Message),
    /// Each entry is a message or the reason it is not one (answered with -32600 per entry).
    Batch(Vec<Result<Message, ParseError>>),
}

/// Why a frame is not a usable message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("parse error: {0}")]
    Json(String),
    #[error("invalid request: {reason}")]
    Invalid {
        reason: &'static str,
        /// The id, when one could be read, so the error can answer it.
        id: Option<RequestId>,
    },
    #[error("invalid request: empty batch")]
    EmptyBatch,
}

impl ParseError {
    /// The JSON-RPC error code for this failure.
    pub fn code(&self) -> i64 {
        match self {
            ParseError::Json(_) => -32700,
            ParseError::Invalid { .. } | ParseError::EmptyBatch => -32600,
        }
    }

    /// The id to answer with, when known.
    pub fn id(&self) -> Option<&RequestId> {
        match self {
            ParseError::Invalid { id, .. } => id.as_ref(),
            _ => None,
        }
    }
}

#[derive(Deserialize)]
struct Envelope {
    jsonrpc: Option<Box<RawValue>>,
    /// `Some("null")` when the member is there and null: that is not the same as no id.
    #[serde(default, deserialize_with = "present")]
    id: Option<Box<RawValue>>,
    method: Option<String>,
    params: Option<Box<RawValue>>,
    result: Option<Box<RawValue>>,
    error: Option<Box<RawValue>>,
}

/// A member that is there, null included (serde would read a null as an absent `Option`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

fn from_envelope(env: Envelope) -> Result<Message, ParseError> {
    let null_id = env.id.as_deref().is_some_and(|raw| raw.get() == "null");
    let id_raw = env.id.filter(|_| !null_id);
    let id = match &id_raw {
        Some(raw) => Some(RequestId::from_raw(raw).ok_or(ParseError::Invalid {
            reason: "id must be a string or an integer",
            id: None,
        })?),
        None => None,
    };
    let invalid = |reason| ParseError::Invalid {
        reason,
        id: id.clone(),
    };
    if env.jsonrpc.as_deref().map(RawValue::get) != Some("\"2.0\"") {
        return Err(invalid("jsonrpc must be \"2.0\""));
    }
    match (env.method, env.result, env.error) {
        // A request whose id is null is invalid (MCP: an id is a string or an integer), not a
        // notification: taken for one, it was accepted with 202 and never run.
        (Some(_), None, None) if null_id => Err(ParseError::Invalid {
            reason: "id must be a string or an integer (a notification has no id member)",
            id: None,
        }),
        (Some(method), None, None) => Ok(match id {
            Some(id) => Message::Request {
                id,
                method,
                params: env.params,
            },
            None => Message::Notification {
                method,
                params: env.params,
            },
        }),
        (None, Some(result), None) => {
            let id = id.ok_or(ParseError::Invalid {
                reason: "a result needs an id",
                id: None,
            })?;
            Ok(Message::Response {
                id: Some(id),
                payload: ResponsePayload::Result(result),
            })
        }
        (None, None, Some(error)) => Ok(Message::Response {
            id,
            payload: ResponsePayload::Error(error),
        }),
        _ => Err(invalid("a message needs exactly one of method, result or error")),
    }
}

/// Parse one JSON object into a message.
pub fn parse_message(text: &str) -> Result<Message, ParseError> {
    let env: Envelope = serde_json::from_str(text).map_err(|e| classify(text, e))?;
    from_envelope(env)
}

fn classify(text: &str, err: serde_json::Error) -> ParseError {
    // Well-formed JSON of the wrong shape is an invalid request, not a parse error.
    if serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok() {
        ParseError::Invalid {
            reason: "not a JSON-RPC message object",
            id: None,
        }
    } else {
        ParseError::Json(err.to_string())
    }
}

/// Parse a frame that may hold one message or a batch.
pub fn parse_body(text: &str) -> Result<Body, ParseError> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        let items: Vec<Box<RawValue>> = serde_json::from_str(text).map_err(|e| classify(text, e))?;
        if items.is_empty() {
            return Err(ParseError::EmptyBatch);
        }
        Ok(Body::Batch(
            items.iter().map(|raw| parse_message(raw.get())).collect(),
        ))
    } else {
        parse_message(text).map(Body::Single)
    }
}

impl Message {
    /// The method of a request or notification.
    pub fn method(&self) -> Option<&str> {
        match self {
            Message::Request { method, .. } | Message::Notification { method, .. } => Some(method),
            Message::Response { .. } => None,
        }
    }

    /// Serialise compactly, always on one line: stdio framing and SSE `data:` lines depend on it.
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(64 + self.payload_len());
        out.push_str("{\"jsonrpc\":\"2.0\"");
        match self {
            Message::Request { id, method, params } => {
                push_field(&mut out, "id", id.as_json());
                push_method(&mut out, method);
                if let Some(p) = params {
                    push_field(&mut out, "params", p.get());
                }
            }
            Message::Notification { method, params } => {
                push_method(&mut out, method);
                if let Some(p) = params {
                    push_field(&mut out, "params", p.get());
                }
            }
            Message::Response { id, payload } => {
                push_field(&mut out, "id", id.as_ref().map_or("null", RequestId::as_json));
                match payload {
                    ResponsePayload::Result(r) => push_field(&mut out, "result", r.get()),
                    ResponsePayload::Error(e) => push_field(&mut out, "error", e.get()),
                }
            }
        }
        out.push('}');
        // Raw parts keep the peer's bytes, including the line breaks of pretty-printed JSON (a
        // POST body may be). In valid JSON a CR or LF can only be whitespace between tokens
        // (inside strings they are escaped), so a space is equivalent; left as they were, one
        // request split into broken lines on a stdio upstream's stdin. Found by fuzzing.
        if has_line_break(&out) {
            out = out.replace(['\r', '\n'], " ");
        }
        out
    }

    fn payload_len(&self) -> usize {
        match self {
            Message::Request { params, .. } | Message::Notification { params, .. } => {
                params.as_ref().map_or(0, |p| p.get().len())
            }
            Message::Response {
                payload: ResponsePayload::Result(r),
                ..
            } => r.get().len(),
            Message::Response {
                payload: ResponsePayload::Error(e),
                ..
            } => e.get().len(),
        }
    }
}

/// Whether text holds a CR or LF. Checked in blocks without an early exit inside one, which the
/// compiler vectorises: a list page of megabytes is scanned on every reply.
pub fn has_line_break(text: &str) -> bool {
    text.as_bytes().chunks(64).any(|block| {
        block
            .iter()
            .fold(0u8, |seen, &b| seen | u8::from(b == b'\n') | u8::from(b == b'\r'))
            != 0
    })
}

fn push_field(out: &mut String, key: &str, raw: &str) {
    out.push_str(",\"");
    out.push_str(key);
    out.push_str("\":");
    out.push_str(raw);
}

fn push_method(out: &mut String, method: &str) {
    out.push_str(",\"method\":");
    out.push_str(&json_string(method));
}

/// Quote a string as JSON.
pub fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

/// Build a raw JSON value from text known to be valid JSON produced by this crate.
pub fn raw(text: String) -> Box<RawValue> {
    RawValue::from_string(text).unwrap_or_else(|_| null())
}

/// The JSON `null` as a raw value.
pub fn null() -> Box<RawValue> {
    serde_json::value::to_raw_value(&()).unwrap_or_default()
}

/// Serialise any value to a raw JSON value.
pub fn to_raw<T: serde::Serialize + ?Sized>(value: &T) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).unwrap_or_else(|_| null())
}

/// A JSON-RPC error object `{code, message, data?}` as raw JSON.
pub fn error_object(code: i64, message: &str, data: Option<&serde_json::Value>) -> Box<RawValue> {
    let mut obj = serde_json::Map::new();
    obj.insert("code".into(), code.into());
    obj.insert("message".into(), message.into());
    if let Some(d) = data {
        obj.insert("data".into(), d.clone());
    }
    to_raw(&obj)
}

/// A complete error response.
pub fn error_response(id: Option<RequestId>, code: i64, message: &str) -> Message {
    Message::Response {
        id,
        payload: ResponsePayload::Error(error_object(code, message, None)),
    }
}

/// A complete success response.
pub fn result_response(id: RequestId, result: Box<RawValue>) -> Message {
    Message::Response {
        id: Some(id),
        payload: ResponsePayload::Result(result),
    }
}

/// A `notifications/cancelled` for a request id.
pub fn cancelled_notification(request_id: &str, reason: &str) -> Message {
    Message::Notification {
        method: "notifications/cancelled".into(),
        params: Some(raw(format!(
            "{{\"requestId\":{request_id},\"reason\":{}}}",
            json_string(reason)
        ))),
    }
}

/// An error response for a host request.
pub fn error_reply(id: RequestId, code: i64, message: &str, data: Option<&serde_json::Value>) -> Message {
    Message::Response {
        id: Some(id),
        payload: ResponsePayload::Error(error_object(code, message, data)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trips_with_unknown_fields_kept_in_params() {
        let text = r#"{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"x","weird":[1,2.50,{"k":null}],"_meta":{"v":"1"}}}"#;
        let msg = parse_message(text).unwrap();
        assert_eq!(msg.to_json(), text);
        match msg {
            Message::Request { id, method, .. } => {
                assert_eq!(id.as_json(), "\"a-1\"");
                assert_eq!(method, "tools/call");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn kinds_are_told_apart() {
        assert!(matches!(
            parse_message(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Message::Notification { .. })
        ));
        assert!(matches!(
            parse_message(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#),
            Ok(Message::Response {
                payload: ResponsePayload::Result(_),
                ..
            })
        ));
        assert!(matches!(
            parse_message(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#),
            Ok(Message::Response {
                id: None,
                payload: ResponsePayload::Error(_)
            })
        ));
    }

    #[test]
    fn bad_frames_get_the_right_codes() {
        assert_eq!(parse_body("{not json").unwrap_err().code(), -32700);
        assert_eq!(parse_body("42").unwrap_err().code(), -32600);
        assert_eq!(parse_body("[]").unwrap_err().code(), -32600);
        let e = parse_message(r#"{"jsonrpc":"1.0","id":3,"method":"x"}"#).unwrap_err();
        assert_eq!(e.code(), -32600);
        assert_eq!(e.id().map(RequestId::as_json), Some("3"));
        assert!(parse_message(r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#).is_err());
        assert!(parse_message(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#).is_err());
        assert!(parse_message(r#"{"jsonrpc":"2.0","id":1,"method":"x","result":{}}"#).is_err());
    }

    #[test]
    fn a_null_id_is_an_invalid_request_not_a_notification() {
        let e =
            parse_message(r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{}}"#).unwrap_err();
        assert_eq!((e.code(), e.id()), (-32600, None));
        assert!(parse_message(r#"{"jsonrpc":"2.0","id":null,"result":{}}"#).is_err());
        let answer = error_response(e.id().cloned(), e.code(), &e.to_string()).to_json();
        assert!(
            answer.starts_with(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600"#),
            "{answer}"
        );
        // No id member at all is still a notification; an error about an unreadable id keeps null.
        assert!(matches!(
            parse_message(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Message::Notification { .. })
        ));
        let body = parse_body(r#"[{"jsonrpc":"2.0","id":null,"method":"ping"}]"#).unwrap();
        assert!(matches!(body, Body::Batch(items) if items[0].is_err()));
    }

    #[test]
    fn batches_keep_per_entry_errors() {
        let body = parse_body(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}, 5]"#).unwrap();
        match body {
            Body::Batch(items) => {
                assert!(items[0].is_ok());
                assert!(items[1].is_err());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pretty_printed_parts_serialise_on_one_line() {
        let text = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\r\n \"a\": [1,\n2]}}";
        let json = parse_message(text).unwrap().to_json();
        assert_eq!(
            json,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{   "a": [1, 2]}}"#
        );
        assert!(parse_message(&json).is_ok());
    }

    #[test]
    fn error_responses_serialise() {
        let msg = error_response(Some(RequestId::number(4)), -32601, "Method not found");
        assert_eq!(
            msg.to_json(),
            r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"Method not found"}}"#
        );
    }
}
