//! `server/discover` (2026-07-28): the versions mcpmux speaks, the capabilities it can honour,
//! its upstreams' instructions, and the cache hint of everything listed.

use super::initialize::{combined_instructions, merged_capabilities, server_info};
use super::list::list_hint;
use crate::catalog::ListKind;
use crate::core::access::Access;
use crate::core::context::RequestCtx;
use crate::core::hub::Hub;
use crate::protocol::message::to_raw;
use crate::protocol::modern;
use crate::protocol::modern_result::{shape_result, CacheHint};
use crate::protocol::{Message, RequestId, ResponsePayload};

/// On a profile's endpoint, what its servers offer.
pub fn serve(hub: &Hub, ctx: &RequestCtx, id: RequestId) -> Message {
    let access = Access::of(hub, ctx);
    let mut result = serde_json::json!({
        "supportedVersions": modern::supported_versions(),
        "capabilities": merged_capabilities(hub, access.profile()),
    });
    if let Some(text) = combined_instructions(hub, access.profile()) {
        result["instructions"] = text.into();
    }
    let hint = ListKind::ALL
        .into_iter()
        .map(|kind| list_hint(hub, &access, kind))
        .reduce(CacheHint::combine)
        .unwrap_or(CacheHint::NONE);
    let shaped = shape_result(&to_raw(&result), Some(hint), &to_raw(&server_info()));
    Message::Response {
        id: Some(id),
        payload: ResponsePayload::Result(shaped),
    }
}
