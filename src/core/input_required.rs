//! Calls of modern (2026-07-28) hosts: the call's frames reshaped for a modern host, closing the
//! stream cancels the call upstream, and an upstream's server-to-client request (sampling,
//! elicitation, roots) becomes an input-required result. The upstream call then waits, parked,
//! until the host retries with the answers and mcpmux's sealed `requestState`.

use super::forward::Frame;
use super::request_state::{StateClaims, StateError, StateSealer};
use crate::error::codes;
use crate::protocol::message::parse_message;
use crate::protocol::message::{error_object, json_string, raw};
use crate::protocol::modern_result::{shape_error, shape_result, CacheHint, RESULT_INPUT_REQUIRED};
use crate::protocol::{Message, RawObject, RequestId, ResponsePayload};
use crate::seal::Sealer;
use crate::session::host::Session;
use bytes::Bytes;
use futures_util::stream::{BoxStream, StreamExt};
use parking_lot::Mutex;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a parked call waits for the host's retry.
pub const PARK_TTL: Duration = Duration::from_secs(600);
/// At most this many calls wait for retries at once; beyond it, input requests fail fast.
pub const MAX_PARKED: usize = 1024;

/// A modern host's call in flight. Dropping it before it completed (the host closed the
/// stream, the retry never came) cancels it upstream and ends its throwaway session.
pub struct ModernCall {
    pub frames: BoxStream<'static, Frame>,
    pub session: Arc<Session>,
    pub method: String,
    /// Digest of the originating request (what a retry must match).
    pub request: String,
    /// Digest of the caller's credentials.
    pub principal: String,
    /// The progress token of the request currently waiting on the call.
    pub progress_token: Option<Box<RawValue>>,
}

impl Drop for ModernCall {
    fn drop(&mut self) {
        // Runs before `frames` is dropped, so an unfinished call is still in flight and is
        // cancelled upstream; a finished one has nothing left to cancel.
        self.session.close_because("the host closed the request's stream");
    }
}

/// One input request put to the host.
struct Asked {
    key: String,
    downstream_id: u64,
    request: Box<RawValue>,
}

struct Parked {
    call: ModernCall,
    asked: Vec<Asked>,
}

/// Why a retry could not continue a parked call.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error(transparent)]
    State(#[from] StateError),
    #[error("requestState refers to a call that has finished or expired")]
    Gone,
    /// The call is parked on another replica, at this `advertise` URL (the retry is forwarded
    /// there; if that replica is gone, so is the call).
    #[error("requestState refers to a call that has finished or expired")]
    Elsewhere(String),
}

/// In the extensions of the answer to a retry whose call is parked on another replica: where
/// (its `advertise` URL). The answer itself says the call is gone, which is true here; the
/// cluster layer forwards the retry instead when that replica answers.
#[derive(Debug, Clone)]
pub struct ParkedElsewhere(pub String);

/// Calls waiting for a modern host's retry, keyed by the id sealed into their `requestState`.
pub struct ParkedCalls {
    key: StateSealer,
    calls: Mutex<HashMap<String, Parked>>,
    /// This replica's `advertise` URL, sealed into each state.
    home: String,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl ParkedCalls {
    /// No call parked yet; their `requestState`s are sealed with `sealer` and name `home`
    /// (this replica's `advertise` URL).
    pub fn new(sealer: Arc<Sealer>, home: String) -> Self {
        ParkedCalls {
            key: StateSealer::new(sealer),
            calls: Mutex::new(HashMap::new()),
            home,
        }
    }

    /// How many calls are parked.
    pub fn len(&self) -> usize {
        self.calls.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Park a call until the host retries; returns the input-required result to send, or the
    /// call back when too many are parked.
    fn park(self: &Arc<Self>, call: ModernCall, asked: Vec<Asked>) -> Result<Box<RawValue>, ModernCall> {
        let mut calls = self.calls.lock();
        if calls.len() >= MAX_PARKED {
            return Err(call);
        }
        let id = crate::util::ids::random_hex(32);
        let state = self.key.seal(&StateClaims {
            parked: id.clone(),
            principal: call.principal.clone(),
            request: call.request.clone(),
            expires_ms: now_ms() + PARK_TTL.as_millis() as u64,
            home: Some(self.home.clone()),
        });
        let requests: Vec<String> = asked
            .iter()
            .map(|a| format!("{}:{}", json_string(&a.key), a.request.get()))
            .collect();
        let result = format!(
            "{{\"resultType\":{},\"inputRequests\":{{{}}},\"requestState\":{}}}",
            json_string(RESULT_INPUT_REQUIRED),
            requests.join(","),
            json_string(&state)
        );
        calls.insert(id.clone(), Parked { call, asked });
        drop(calls);
        let store = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(PARK_TTL).await;
            let expired = store.upgrade().and_then(|s| s.calls.lock().remove(&id));
            if expired.is_some() {
                tracing::debug!("a parked call expired without a retry");
            }
        });
        Ok(raw(result))
    }

    /// Take the call a retry's `requestState` names, after checking it was sealed here for this
    /// caller and this request and has not expired.
    fn take(&self, state: &str, principal: &str, request: &str) -> Result<Parked, ResumeError> {
        let claims = self.key.open(state, principal, request, now_ms())?;
        if let Some(parked) = self.calls.lock().remove(&claims.parked) {
            return Ok(parked);
        }
        match claims.home {
            Some(home) if home != self.home => Err(ResumeError::Elsewhere(home)),
            _ => Err(ResumeError::Gone),
        }
    }
}

/// One SSE event without an id (a modern stream is not resumable).
fn event(json: &str) -> Bytes {
    crate::protocol::sse::event_bytes(None, None, json)
}

fn error_event(id: &RequestId, code: i64, message: &str, data: Option<&serde_json::Value>) -> Bytes {
    let msg = Message::Response {
        id: Some(id.clone()),
        payload: ResponsePayload::Error(error_object(code, message, data)),
    };
    event(&msg.to_json())
}

/// The server-to-client request a frame carries: its downstream id and its method and params
/// as an input request.
fn input_request(json: &str) -> Option<(u64, String, Option<RawObject>, Box<RawValue>)> {
    let Ok(Message::Request { id, method, params }) = parse_message(json) else {
        return None;
    };
    let downstream_id = id.as_u64()?;
    let parsed = RawObject::parse_opt(params.as_deref());
    let mut request = RawObject::default();
    request.set("method", raw(json_string(&method)));
    if let Some(p) = params {
        request.set("params", p);
    }
    Some((downstream_id, method, parsed, request.to_raw()))
}

/// The capability a server-to-client request needs, as `requiredCapabilities` data.
fn required_capability(method: &str, params: Option<&RawObject>) -> serde_json::Value {
    match method {
        "sampling/createMessage" => serde_json::json!({ "sampling": {} }),
        "roots/list" => serde_json::json!({ "roots": {} }),
        _ => {
            let mode = params
                .and_then(|p| p.get_str("mode"))
                .unwrap_or_else(|| "form".into());
            serde_json::json!({ "elicitation": { mode: {} } })
        }
    }
}

/// Give `frame`'s progress notification the token of the request now waiting on the call.
fn retag_progress(json: Arc<str>, token: Option<&RawValue>) -> Arc<str> {
    let Some(token) = token else { return json };
    match parse_message(&json) {
        Ok(Message::Notification { method, params }) if method == "notifications/progress" => {
            let Some(mut p) = RawObject::parse_opt(params.as_deref()) else {
                return json;
            };
            p.set("progressToken", token.to_owned());
            Message::Notification {
                method,
                params: Some(p.to_raw()),
            }
            .to_json()
            .into()
        }
        _ => json,
    }
}

/// The call's response as a modern host must see it, under the id of the request now waiting.
/// The host's answer to a modern call from the upstream's response frame.
pub fn modern_response(json: &str, id: &RequestId, method: &str, server_info: &RawValue) -> String {
    let payload = match parse_message(json) {
        Ok(Message::Response { payload, .. }) => payload,
        _ => ResponsePayload::Error(error_object(
            codes::INTERNAL_ERROR,
            "mcpmux could not read the upstream's response",
            None,
        )),
    };
    let payload = match payload {
        ResponsePayload::Result(result) => {
            let cache = (method == "resources/read")
                .then(|| {
                    RawObject::parse(result.get())
                        .map(|r| CacheHint::of_result(&r))
                        .ok()
                })
                .flatten();
            ResponsePayload::Result(shape_result(&result, cache, server_info))
        }
        ResponsePayload::Error(error) => ResponsePayload::Error(shape_error(&error)),
    };
    Message::Response {
        id: Some(id.clone()),
        payload,
    }
    .to_json()
}

/// Stream a modern host's call: notifications, then its response; or, when the upstream asks
/// for input, an input-required result while the call waits parked for the retry.
pub fn respond(
    parked: Arc<ParkedCalls>,
    mut call: ModernCall,
    id: RequestId,
    server_info: Arc<RawValue>,
) -> BoxStream<'static, Bytes> {
    async_stream::stream! {
        // Only a cancelled call ends without a response.
        while let Some(frame) = call.frames.next().await {
            match frame {
                Frame::Pause { .. } => {}
                Frame::Message(json) => yield event(&retag_progress(json, call.progress_token.as_deref())),
                Frame::Response(json) => {
                    yield event(&modern_response(&json, &id, &call.method, &server_info));
                    break;
                }
                Frame::Request(json) => {
                    let Some((downstream_id, method, params, request)) = input_request(&json) else {
                        yield error_event(&id, codes::INTERNAL_ERROR, "mcpmux could not read an upstream request", None);
                        break;
                    };
                    if !call.session.caps.supports(&method, params.as_ref()) {
                        let data = serde_json::json!({
                            "requiredCapabilities": required_capability(&method, params.as_ref())
                        });
                        let message = format!("the upstream needs {method}, which this client did not declare");
                        yield error_event(&id, codes::MISSING_CLIENT_CAPABILITY, &message, Some(&data));
                        break;
                    }
                    let asked = vec![Asked { key: format!("mcpmux-{downstream_id}"), downstream_id, request }];
                    match parked.park(call, asked) {
                        Ok(result) => {
                            yield event(&Message::Response { id: Some(id.clone()), payload: ResponsePayload::Result(result) }.to_json());
                        }
                        Err(returned) => {
                            drop(returned);
                            let message = format!("more than {MAX_PARKED} calls are waiting for input");
                            yield error_event(&id, codes::OVERLOADED, &message, None);
                        }
                    }
                    return;
                }
            }
        }
    }
    .boxed()
}

/// Continue a parked call with a retry's answers. Answers the upstream's pending requests; any
/// the host left unanswered are asked again. Returns the stream to send the retrying host.
pub fn resume(
    parked: Arc<ParkedCalls>,
    state: &str,
    params: &RawObject,
    id: RequestId,
    principal: &str,
    request: &str,
    server_info: Arc<RawValue>,
) -> Result<BoxStream<'static, Bytes>, ResumeError> {
    let Parked { mut call, asked } = parked.take(state, principal, request)?;
    let answers = params.get_object("inputResponses").unwrap_or_default();
    let mut unanswered = Vec::new();
    for item in asked {
        match answers.get(&item.key) {
            Some(answer) => {
                let answer = ResponsePayload::Result(answer.to_owned());
                if !call.session.answer_server_request(item.downstream_id, answer) {
                    tracing::debug!(key = %item.key, "the upstream no longer waits for this input");
                }
            }
            None => unanswered.push(item),
        }
    }
    call.progress_token = params
        .get_object("_meta")
        .and_then(|m| m.get("progressToken").map(RawValue::to_owned));
    if !unanswered.is_empty() {
        let result = parked.park(call, unanswered).map_err(|_| ResumeError::Gone)?;
        let msg = Message::Response {
            id: Some(id),
            payload: ResponsePayload::Result(result),
        };
        return Ok(futures_util::stream::once(async move { event(&msg.to_json()) }).boxed());
    }
    Ok(respond(parked, call, id, server_info))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_requests_become_input_requests() {
        let json = r#"{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{"maxTokens":5,"messages":[]}}"#;
        let (id, method, params, request) = input_request(json).unwrap();
        assert_eq!((id, method.as_str()), (7, "sampling/createMessage"));
        assert!(params.is_some());
        assert_eq!(
            request.get(),
            r#"{"method":"sampling/createMessage","params":{"maxTokens":5,"messages":[]}}"#
        );
        let url = RawObject::parse(r#"{"mode":"url"}"#).unwrap();
        assert_eq!(
            required_capability("elicitation/create", Some(&url)),
            serde_json::json!({"elicitation":{"url":{}}})
        );
    }

    #[test]
    fn responses_are_reshaped_under_the_waiting_id() {
        let info = raw(r#"{"name":"mcpmux"}"#.into());
        let ok = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;
        let out = modern_response(ok, &RequestId::number(9), "tools/call", &info);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["id"], 9);
        assert_eq!(v["result"]["resultType"], "complete");
        assert!(v["result"].get("ttlMs").is_none());
        let read = r#"{"jsonrpc":"2.0","id":1,"result":{"contents":[]}}"#;
        let v: serde_json::Value = serde_json::from_str(&modern_response(
            read,
            &RequestId::number(2),
            "resources/read",
            &info,
        ))
        .unwrap();
        assert_eq!(v["result"]["ttlMs"], 0);
        assert_eq!(v["result"]["cacheScope"], "private");
        let missing = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"nope"}}"#;
        assert!(modern_response(missing, &RequestId::number(3), "resources/read", &info).contains("-32602"));
    }

    #[test]
    fn progress_is_retagged_for_the_retry() {
        let json: Arc<str> =
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"a","progress":1}}"#.into();
        let token = raw("\"b\"".into());
        assert!(retag_progress(json.clone(), Some(&token)).contains(r#""progressToken":"b""#));
        assert_eq!(&*retag_progress(json.clone(), None), &*json);
    }
}
