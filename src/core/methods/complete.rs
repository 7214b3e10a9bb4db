//! `completion/complete`: the prompt name or resource URI of its reference resolved to the
//! upstream that owns it, then forwarded.

use super::{start_call, Outcome, Target};
use crate::catalog::results::ResultShape;
use crate::catalog::ListKind;
use crate::core::access::Access;
use crate::core::audit_trail::Trail;
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
    trail: &mut Trail,
) -> Outcome {
    let Some(mut reference) = params.get_object("ref") else {
        return Outcome::refused(id, RequestError::MissingParam("ref"));
    };
    let catalog = hub.catalog_for(ctx);
    // The exposed name or URI the reference names, and the upstream and original it resolves to.
    let (exposed, found) = match reference.get_str("type").as_deref() {
        Some("ref/prompt") => match reference.get_str("name") {
            Some(name) => {
                let item = catalog.list(ListKind::Prompts).lookup(&name);
                let found = item.map(|item| (item.upstream.clone(), "name", item.original.clone()));
                (Some(name), found)
            }
            None => (None, None),
        },
        Some("ref/resource") => match reference.get_str("uri") {
            Some(uri) => match catalog.resolve_uri(&uri) {
                Ok((upstream, original)) => {
                    let exposed = catalog.naming(&upstream).map_or(uri, |n| n.expose_uri(&original));
                    (Some(exposed), Some((upstream, "uri", original)))
                }
                Err(_) => (Some(uri), None),
            },
            None => (None, None),
        },
        _ => (None, None),
    };
    // A reference the policy hides is as unknown as one that does not exist.
    let access = Access::of(hub, ctx);
    // Outside the profile of the request's endpoint, a reference names nothing.
    let found = found.filter(|(upstream, key, _)| {
        let kind = if *key == "name" {
            ListKind::Prompts
        } else {
            ListKind::Resources
        };
        exposed
            .as_deref()
            .is_some_and(|e| access.in_view(kind, upstream, e))
    });
    let target = exposed.and_then(|exposed| {
        let at = found
            .as_ref()
            .map(|(upstream, _, original)| (upstream, original.as_str()));
        let permitted = trail.decide(hub, &access, &exposed, at, &params);
        found.filter(|_| permitted)
    });
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
