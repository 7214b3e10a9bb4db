//! `resources/read`: the exposed URI resolved to its upstream and original URI, then forwarded;
//! URIs in the contents are exposed again on the way back.

use super::{resource_not_found, start_call, Outcome, Target};
use crate::catalog::results::ResultShape;
use crate::core::context::RequestCtx;
use crate::core::hub::Hub;
use crate::error::codes;
use crate::protocol::message::error_reply;
use crate::protocol::{RawObject, RequestId};
use std::sync::Arc;

pub async fn serve(
    hub: &Arc<Hub>,
    ctx: &RequestCtx,
    id: RequestId,
    method: String,
    mut params: RawObject,
) -> Outcome {
    let Some(uri) = params.get_str("uri") else {
        return Outcome::Reply(error_reply(
            id,
            codes::INVALID_PARAMS,
            "params.uri is required",
            None,
        ));
    };
    let Some((upstream, original)) = hub.catalog.snapshot().resolve_uri(&uri) else {
        return resource_not_found(id, &uri);
    };
    params.set_str("uri", &original);
    start_call(
        hub,
        ctx,
        id,
        method,
        params,
        Target::new(upstream, ResultShape::ReadResult),
    )
    .await
}
