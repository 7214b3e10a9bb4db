//! `resources/read`: the exposed URI resolved to its upstream and original URI, then forwarded;
//! URIs in the contents are exposed again on the way back.

use super::{down_upstream, required_str, resolve_uri, start_call, Outcome, Target};
use crate::catalog::results::ResultShape;
use crate::core::audit_trail::Trail;
use crate::core::context::RequestCtx;
use crate::core::hub::Hub;
use crate::protocol::{RawObject, RequestId};
use std::sync::Arc;

pub async fn serve(
    hub: &Arc<Hub>,
    ctx: &RequestCtx,
    id: RequestId,
    method: String,
    mut params: RawObject,
    trail: &mut Trail,
) -> Outcome {
    let uri = match required_str(&params, "uri", &id) {
        Ok(uri) => uri,
        Err(refusal) => return refusal,
    };
    let resolved = match resolve_uri(hub, ctx, (&uri, &params), &id, trail) {
        Ok(found) => found,
        Err(refusal) => return refusal,
    };
    if let Some(refusal) = super::call::step_up(hub, ctx, &resolved.exposed, trail) {
        return Outcome::Denied { id, refusal };
    }
    if let Some(down) = down_upstream(hub, &resolved.upstream, &uri) {
        return Outcome::refused(id, down);
    }
    params.set_str("uri", &resolved.original);
    start_call(
        hub,
        ctx,
        id,
        method,
        params,
        Target::new(resolved.upstream, ResultShape::ReadResult),
    )
    .await
}
