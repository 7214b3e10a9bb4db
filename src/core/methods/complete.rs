//! `completion/complete`: the prompt name or resource URI of its reference resolved to the
//! upstream that owns it, then forwarded.

use super::{start_call, Outcome, Target};
use crate::catalog::results::ResultShape;
use crate::catalog::ListKind;
use crate::core::access::Access;
use crate::core::context::RequestCtx;
use crate::core::hub::Hub;
use crate::error::RequestError;
use crate::protocol::{RawObject, RequestId};
use std::sync::Arc;

pub async fn serve(
    hub: &Arc<Hub>,
    ctx: &RequestCtx,
    id: RequestId,
    method: String,
    mut params: RawObject,
) -> Outcome {
    let Some(mut reference) = params.get_object("ref") else {
        return Outcome::refused(id, RequestError::MissingParam("ref"));
    };
    let catalog = hub.catalog.snapshot();
    // A reference the policy hides is as unknown as one that does not exist.
    let access = Access::of(hub, ctx);
    let target = match reference.get_str("type").as_deref() {
        Some("ref/prompt") => reference.get_str("name").and_then(|name| {
            let item = catalog.list(ListKind::Prompts).lookup(&name)?;
            access
                .permits(&name)
                .then(|| (item.upstream.clone(), "name", item.original.clone()))
        }),
        Some("ref/resource") => reference
            .get_str("uri")
            .and_then(|uri| catalog.resolve_uri(&uri).ok())
            .filter(|(upstream, original)| {
                let exposed = catalog.naming(upstream).map(|n| n.expose_uri(original));
                exposed.is_some_and(|exposed| access.permits(&exposed))
            })
            .map(|(upstream, original)| (upstream, "uri", original)),
        _ => None,
    };
    let Some((upstream, key, original)) = target else {
        return Outcome::refused(id, RequestError::UnknownReference);
    };
    reference.set_str(key, &original);
    params.set("ref", reference.to_raw());
    start_call(
        hub,
        ctx,
        id,
        method,
        params,
        Target::new(upstream, ResultShape::Opaque),
    )
    .await
}
