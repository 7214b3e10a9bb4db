//! What a host sends that needs no answer: `notifications/cancelled` (cancels exactly the
//! upstream request behind it), `notifications/roots/list_changed` (to the session's own
//! connections), and its answers to server-to-client requests (back where they came from).

use crate::core::context::RequestCtx;
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

/// A host's answer to a server-to-client request.
pub fn response(ctx: &RequestCtx, id: Option<RequestId>, payload: ResponsePayload) {
    let Some(session) = ctx.session.as_ref() else {
        return;
    };
    let answered =
        (id.as_ref().and_then(RequestId::as_u64)).is_some_and(|i| session.answer_server_request(i, payload));
    if !answered {
        let id = id.map_or_else(|| "null".to_string(), |id| id.to_string());
        tracing::debug!(session = %session.id, %id, "response to an unknown request");
    }
}
