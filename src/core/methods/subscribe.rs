//! `resources/subscribe` and `resources/unsubscribe`: kept per session; a shared upstream is
//! asked once for as long as any session (or listen stream) wants the resource; a modern upstream
//! has the URI join mcpmux's listen filter instead.

use super::{down_upstream, required_str, resolve_uri, start_call, Outcome, Target};
use crate::catalog::results::ResultShape;
use crate::config::Isolation;
use crate::core::audit_trail::Trail;
use crate::core::context::RequestCtx;
use crate::core::hub::Hub;
use crate::error::RequestError;
use crate::protocol::message::{raw, result_response};
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
    let Some(session) = ctx.session.as_ref() else {
        return Outcome::refused(id, RequestError::NoSession);
    };
    let uri = match required_str(&params, "uri", &id) {
        Ok(uri) => uri,
        Err(refusal) => return refusal,
    };
    let resolved = match resolve_uri(hub, ctx, (&uri, &params), &id, trail) {
        Ok(found) => found,
        Err(refusal) => return refusal,
    };
    // Kept under the URI mcpmux's updates name (a bare URI's owner may be namespaced).
    if let Some(refusal) = super::call::step_up(hub, ctx, &resolved.exposed, trail) {
        return Outcome::Denied { id, refusal };
    }
    if let Some(down) = down_upstream(hub, &resolved.upstream, &uri) {
        return Outcome::refused(id, down);
    }
    let (upstream, original, uri) = (resolved.upstream, resolved.original, resolved.exposed);
    if method == "resources/subscribe" {
        session.subscribe(&uri);
    } else {
        session.unsubscribe(&uri);
        let shared = (hub.upstreams.get(&upstream)).is_some_and(|s| s.server.isolation == Isolation::Shared);
        let still_watched = hub.sessions.all().iter().any(|s| s.is_subscribed_exact(&uri));
        if shared && still_watched {
            return Outcome::Reply(result_response(id, raw("{}".into())));
        }
    }
    let handle = match hub.connection_for(&upstream, session).await {
        Ok(handle) => handle,
        Err(err) => return Outcome::refused(id, err.into()),
    };
    if handle.facts().is_some_and(|f| f.is_modern()) {
        // No resources/subscribe in 2026-07-28: the URI joins mcpmux's listen filter instead.
        return Outcome::Reply(
            match handle
                .watch_resource(&original, method == "resources/subscribe")
                .await
            {
                Ok(()) => result_response(id, raw("{}".into())),
                Err(err) => RequestError::Refused(err.to_string()).reply(id),
            },
        );
    }
    params.set_str("uri", &original);
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
