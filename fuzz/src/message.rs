//! The `message` target: the JSON-RPC envelope parser (`parse_body`, `parse_message`,
//! `RequestId::from_raw`), serialisation (`Message::to_json`), `RawObject` edits, and the
//! rewrites the gateway applies to what it parses (see `rewrite`).

use mcpmux::protocol::message::{error_response, parse_message, raw};
use mcpmux::protocol::{parse_body, Body, Message, ParseError, RawObject, RequestId, ResponsePayload};
use serde_json::value::RawValue;
use serde_json::Value;

/// Feed one input through everything; panics when an invariant breaks.
pub fn check_message(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let text: &str = &text;
    check_body(text);
    check_request_id(text);
    check_raw_object(text);
    super::rewrite::check_rewrites(data, text);
}

fn check_body(text: &str) {
    let body = parse_body(text);
    if !text.trim_start().starts_with('[') {
        // A frame that is not a batch parses exactly as a single message.
        let single = parse_message(text);
        match (&body, &single) {
            (Ok(Body::Single(a)), Ok(b)) => assert_eq!(a.to_json(), b.to_json()),
            (Err(a), Err(b)) => assert_eq!(a, b),
            _ => panic!("parse_body and parse_message disagree: {body:?} / {single:?}"),
        }
    }
    match body {
        Ok(Body::Single(msg)) => check_round_trip(&msg),
        Ok(Body::Batch(items)) => {
            assert!(!items.is_empty(), "an empty batch must be an error");
            for item in items {
                match item {
                    Ok(msg) => check_round_trip(&msg),
                    Err(err) => check_error_answer(&err),
                }
            }
        }
        Err(err) => check_error_answer(&err),
    }
}

/// The error answer the gateway sends for a frame it refused is itself a valid message.
fn check_error_answer(err: &ParseError) {
    assert!(matches!(err.code(), -32700 | -32600), "code {}", err.code());
    let answer = error_response(err.id().cloned(), err.code(), &err.to_string());
    let json = answer.to_json();
    match parse_message(&json) {
        Ok(Message::Response {
            id,
            payload: ResponsePayload::Error(_),
        }) => assert_eq!(id.as_ref(), err.id()),
        other => panic!("error answer {json} parses as {other:?}"),
    }
}

fn kind(msg: &Message) -> &'static str {
    match msg {
        Message::Request { .. } => "request",
        Message::Notification { .. } => "notification",
        Message::Response {
            payload: ResponsePayload::Result(_),
            ..
        } => "result",
        Message::Response {
            payload: ResponsePayload::Error(_),
            ..
        } => "error",
    }
}

fn id_of(msg: &Message) -> Option<&RequestId> {
    match msg {
        Message::Request { id, .. } => Some(id),
        Message::Response { id, .. } => id.as_ref(),
        Message::Notification { .. } => None,
    }
}

/// A parsed message re-serialised is one line of JSON (stdio framing and SSE data lines rely
/// on it) that parses again to the same kind, id, method and payload, and serialises the same.
fn check_round_trip(msg: &Message) {
    let json = msg.to_json();
    assert!(
        !json.contains(['\n', '\r']),
        "to_json must give one line: {json:?}"
    );
    let again = match parse_message(&json) {
        Ok(again) => again,
        Err(err) => panic!("{json} does not parse again: {err}"),
    };
    assert_eq!(kind(msg), kind(&again), "{json}");
    assert_eq!(id_of(msg), id_of(&again), "{json}");
    assert_eq!(msg.method(), again.method(), "{json}");
    assert_eq!(json, again.to_json(), "to_json is not stable");
    // (Not checked through `serde_json::Value`: raw parts may nest deeper than its recursion
    // limit or hold numbers beyond f64, which the envelope rightly passes through.)
    assert!(json.starts_with(r#"{"jsonrpc":"2.0","#), "{json}");
    if let Some(id) = id_of(msg) {
        check_id(id);
    }
}

/// An id survives being read back from its own JSON text.
fn check_id(id: &RequestId) {
    let text = id.as_json();
    let reread = RawValue::from_string(text.to_string())
        .ok()
        .and_then(|r| RequestId::from_raw(&r));
    assert_eq!(reread.as_ref(), Some(id), "id {text} does not read back");
    if let Some(n) = id.as_u64() {
        assert_eq!(&RequestId::number(n), id, "numeric id {text}");
    }
}

/// `RequestId::from_raw` accepts exactly strings and integers (that fit 64 bits).
fn check_request_id(text: &str) {
    let Ok(raw_value) = serde_json::from_str::<Box<RawValue>>(text) else {
        return;
    };
    let Ok(value) = serde_json::from_str::<Value>(raw_value.get()) else {
        return;
    };
    let id = RequestId::from_raw(&raw_value);
    match &value {
        Value::String(_) => assert!(id.is_some(), "string id {text} refused"),
        Value::Number(n) if n.is_i64() || n.is_u64() => {
            assert!(id.is_some(), "integer id {text} refused")
        }
        // `-0` reads as a float but is integral; anything else must be refused.
        Value::Number(n) => {
            if id.is_some() {
                assert_eq!(n.as_f64().map(f64::fract), Some(0.0), "id {text}");
            }
        }
        _ => assert!(id.is_none(), "id {text} accepted"),
    }
    if let Some(id) = id {
        assert_eq!(id.as_json(), raw_value.get());
        check_id(&id);
    }
}

/// `RawObject` reads, edits and re-serialises an object without touching other members.
fn check_raw_object(text: &str) {
    let Ok(mut obj) = RawObject::parse(text) else {
        return;
    };
    let members: Vec<(String, String)> = obj
        .members()
        .map(|(k, v)| (k.to_string(), v.get().to_string()))
        .collect();
    // Serialised and parsed again: the same members in the same order, byte for byte.
    let again = RawObject::parse(&obj.to_json()).unwrap_or_else(|e| panic!("{}: {e}", obj.to_json()));
    let again_members: Vec<(String, String)> = again
        .members()
        .map(|(k, v)| (k.to_string(), v.get().to_string()))
        .collect();
    assert_eq!(members, again_members);
    assert_eq!(obj.to_raw().get(), obj.to_json());
    for (k, v) in &members {
        assert_eq!(obj.get(k).map(RawValue::get), Some(v.as_str()), "member {k:?}");
        let as_str = serde_json::from_str::<String>(v).ok();
        assert_eq!(obj.get_str(k), as_str, "member {k:?}");
    }
    // Replace the first member, append a new one, then remove it: everything else is kept.
    let fresh = fresh_key(&members);
    obj.set_str(&fresh, text);
    assert_eq!(obj.get_str(&fresh).as_deref(), Some(text));
    if let Some((first, _)) = members.first() {
        obj.set(first, raw("null".into()));
        assert_eq!(obj.get(first).map(RawValue::get), Some("null"));
        obj.set(first, raw(members[0].1.clone()));
    }
    assert!(obj.remove(&fresh).is_some());
    assert!(obj.remove(&fresh).is_none());
    let edited: Vec<(String, String)> = obj
        .members()
        .map(|(k, v)| (k.to_string(), v.get().to_string()))
        .collect();
    assert_eq!(members, edited, "edits leaked into other members");
}

/// A key that is not among `members`.
fn fresh_key(members: &[(String, String)]) -> String {
    let mut key = String::from("fuzz");
    while members.iter().any(|(k, _)| *k == key) {
        key.push('_');
    }
    key
}
