//! A modern upstream's input-required result, for a session-era host: mcpmux sends the host
//! real `sampling/createMessage` / `elicitation/create` / `roots/list` requests, gathers the
//! answers, and builds the retry (the original params plus `inputResponses` and the
//! upstream's `requestState` echoed byte for byte). The host only sees its call complete.

use crate::error::codes;
use crate::protocol::message::{error_object, json_string};
use crate::protocol::{RawObject, ResponsePayload};
use crate::session::host::Session;
use crate::upstream::server_requests::AnswerTo;
use serde_json::value::RawValue;
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// How many input rounds one call may take before mcpmux gives up.
pub const MAX_INPUT_ROUNDS: u32 = 10;

/// One input request sent to the host, waiting for its answer.
pub struct AskedInput {
    key: String,
    downstream_id: u64,
    answer: oneshot::Receiver<ResponsePayload>,
}

/// The host requests for one input-required result, and what waits for their answers.
pub struct InputAsk {
    pub requests: Vec<Arc<str>>,
    pub asked: Vec<AskedInput>,
}

/// The host requests to send for an input-required result, or the error to answer the call
/// with when the host cannot serve them.
pub fn ask(session: &Arc<Session>, result: &RawObject) -> Result<InputAsk, Box<RawValue>> {
    let requests = result.get_object("inputRequests").unwrap_or_default();
    let mut frames = Vec::new();
    let mut asked = Vec::new();
    for (key, request) in requests.members() {
        let Ok(request) = RawObject::parse(request.get()) else {
            return Err(error_object(
                codes::INTERNAL_ERROR,
                "the upstream sent a malformed input request",
                None,
            ));
        };
        let method = request.get_str("method").unwrap_or_default();
        let params = request.get("params").map(RawValue::to_owned);
        let parsed = params.as_deref().and_then(|p| RawObject::parse(p.get()).ok());
        if !session.caps.supports(&method, parsed.as_ref()) {
            let message = format!("the upstream needs {method}, which this session did not declare");
            return Err(error_object(codes::MISSING_CLIENT_CAPABILITY, &message, None));
        }
        let (tx, rx) = oneshot::channel();
        let (downstream_id, json) = session
            .address_server_request(AnswerTo::Local(tx), method, params)
            .map_err(|full| error_object(codes::OVERLOADED, &format!("mcpmux: {full}"), None))?;
        frames.push(json);
        asked.push(AskedInput {
            key: key.to_string(),
            downstream_id,
            answer: rx,
        });
    }
    Ok(InputAsk {
        requests: frames,
        asked,
    })
}

/// Wait (until `deadline`) for the host's answers; returns the `inputResponses` object, or the
/// error to answer the call with.
pub async fn answers(
    session: &Arc<Session>,
    asked: Vec<AskedInput>,
    deadline: Instant,
) -> Result<Box<RawValue>, Box<RawValue>> {
    let mut responses = RawObject::default();
    for item in asked {
        let outcome = tokio::time::timeout_at(deadline, item.answer).await;
        match outcome {
            Ok(Ok(ResponsePayload::Result(result))) => responses.set(&item.key, result),
            Ok(Ok(ResponsePayload::Error(error))) => return Err(error),
            Ok(Err(_)) => {
                return Err(error_object(
                    codes::INTERNAL_ERROR,
                    "the host session ended",
                    None,
                ));
            }
            Err(_) => {
                session.take_server_request(item.downstream_id);
                return Err(error_object(
                    codes::REQUEST_TIMEOUT,
                    "the host did not answer the upstream's input request in time",
                    None,
                ));
            }
        }
    }
    Ok(responses.to_raw())
}

/// The retry's params: the original ones with the answers and the upstream's `requestState`
/// exactly as it was sent.
pub fn retry_params(
    original: Option<&RawValue>,
    result: &RawObject,
    responses: Box<RawValue>,
) -> Box<RawValue> {
    let mut params = original
        .and_then(|p| RawObject::parse(p.get()).ok())
        .unwrap_or_default();
    params.set("inputResponses", responses);
    match result.get("requestState") {
        Some(state) => params.set("requestState", state.to_owned()),
        None => {
            params.remove("requestState");
        }
    }
    params.to_raw()
}

/// Whether a result asks for input.
pub fn is_input_required(result: &RawValue) -> Option<RawObject> {
    if !result.get().contains("input_required") {
        return None;
    }
    let obj = RawObject::parse(result.get()).ok()?;
    (obj.get("resultType").map(RawValue::get) == Some(&json_string("input_required"))).then_some(obj)
}

/// An error for a call that asked for input too many times.
pub fn too_many_rounds() -> Box<RawValue> {
    let message = format!("the upstream asked for input more than {MAX_INPUT_ROUNDS} times");
    error_object(codes::INTERNAL_ERROR, &message, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::message::raw;
    use crate::protocol::ClientCaps;
    use crate::upstream::ties::HostTies;

    fn value(json: &str) -> Box<RawValue> {
        raw(json.into())
    }

    #[test]
    fn input_requests_become_host_requests_and_answers_the_retry() {
        let caps = ClientCaps {
            sampling: true,
            ..ClientCaps::default()
        };
        let session = Session::new("s".into(), "2025-11-25".into(), caps, Arc::new(HostTies::new()));
        let result = RawObject::parse(
            r#"{"resultType":"input_required","inputRequests":{"q":{"method":"sampling/createMessage","params":{"maxTokens":5,"messages":[]}}},"requestState":"v1.abc"}"#,
        )
        .unwrap();
        let InputAsk {
            requests: frames,
            asked,
        } = ask(&session, &result).unwrap();
        assert_eq!(frames.len(), 1);
        let Ok(crate::protocol::Message::Request { id, method, .. }) =
            crate::protocol::message::parse_message(&frames[0])
        else {
            panic!("a request: {}", frames[0])
        };
        assert_eq!(method, "sampling/createMessage");
        assert!(id.as_string().is_some(), "sealed for the session: {id}");
        let answer = ResponsePayload::Result(value(r#"{"role":"assistant"}"#));
        assert_eq!(session.answer_host_response(&id, answer), Ok(true));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let responses = rt
            .block_on(answers(
                &session,
                asked,
                Instant::now() + std::time::Duration::from_secs(1),
            ))
            .unwrap();
        assert_eq!(responses.get(), r#"{"q":{"role":"assistant"}}"#);
        let original = value(r#"{"name":"ask","arguments":{"a":1}}"#);
        let retry = retry_params(Some(&original), &result, responses);
        assert_eq!(
            retry.get(),
            r#"{"name":"ask","arguments":{"a":1},"inputResponses":{"q":{"role":"assistant"}},"requestState":"v1.abc"}"#
        );
    }

    #[test]
    fn undeclared_capabilities_are_refused() {
        let session = Session::new(
            "s".into(),
            "2025-11-25".into(),
            ClientCaps::default(),
            Arc::new(HostTies::new()),
        );
        let result = RawObject::parse(r#"{"inputRequests":{"r":{"method":"roots/list"}}}"#).unwrap();
        let err = ask(&session, &result).err().unwrap();
        assert!(err.get().contains("-32021"));
        assert!(is_input_required(&value(r#"{"resultType":"input_required"}"#)).is_some());
        assert!(is_input_required(&value(r#"{"content":[{"text":"input_required"}]}"#)).is_none());
    }
}
