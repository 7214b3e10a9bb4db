//! What a host sends that needs no answer: `notifications/cancelled` (cancels exactly the
//! upstream request behind it), `notifications/roots/list_changed` (to the session's own
//! connections), and its answers to server-to-client requests (back where they came from; an
//! answer under an id mcpmux did not seal for the session is refused and goes nowhere).

use crate::core::context::RequestCtx;
use crate::error::DownstreamError;
use crate::protocol::{RawObject, RequestId, ResponsePayload};

pub fn notification(ctx: &RequestCtx, method: &str, params: Option<RawObject>) {
    let Some(session) = ctx.session.as_ref() else {
        return;
    };
    match method {
        "notifications/cancelled" => {
            let Some(request) = params
                .as_ref()
                .and_then(|p| p.get("requestId"))
                .and_then(RequestId::from_raw)
            else {
                return;
            };
            let reason = params
                .as_ref()
                .and_then(|p| p.get_str("reason"))
                .unwrap_or_else(|| "cancelled by the host".into());
            if let Some(call) = session.take_inflight(&request) {
                call.upstream.cancel(call.upstream_id, &reason);
            }
        }
        "notifications/roots/list_changed" => {
            for conn in session.connections() {
                conn.notify(method, None);
            }
        }
        _ => {}
    }
}

/// A host's answer to a server-to-client request: refused (HTTP 400) when its id is not one
/// mcpmux sealed for this session (forged, altered, another session's or another key's); an
/// answer without an id (an error about a message the host could not read) has nowhere to go.
pub fn response(
    ctx: &RequestCtx,
    id: Option<RequestId>,
    payload: ResponsePayload,
) -> Result<(), DownstreamError> {
    let Some(session) = ctx.session.as_ref() else {
        return Ok(());
    };
    let Some(id) = id else {
        tracing::debug!(session = %session.log_id(), "a response without an id");
        return Ok(());
    };
    match session.answer_host_response(&id, payload) {
        Ok(true) => Ok(()),
        Ok(false) => {
            tracing::debug!(session = %session.log_id(), %id, "response to a request nothing here waits for");
            Ok(())
        }
        Err(why) => {
            tracing::debug!(session = %session.log_id(), %id, %why, "response refused");
            Err(DownstreamError::BadRequest(format!(
                "the response's id {} names no request mcpmux sent this session",
                crate::util::text::clip(id.as_json())
            )))
        }
    }
}
