//! `tools/call` and `prompts/get`: the exposed name resolved in the catalog to its upstream and
//! original name (never by splitting on the separator), the `Mcp-Param-*` headers a modern
//! upstream's tool annotates, then the call forwarded. A tool or prompt of an `[[auth.step_up]]`
//! rule needs its scopes first (403 `insufficient_scope`; reads of a rule's URIs too, in read.rs).

use super::{down_owner, required_str, start_call, Outcome, Target};
use crate::catalog::results::ResultShape;
use crate::catalog::ListKind;
use crate::core::access::Access;
use crate::core::audit_trail::Trail;
use crate::core::context::RequestCtx;
use crate::core::hub::Hub;
use crate::core::sign_in;
use crate::error::RequestError;
use crate::protocol::{modern_params, RawObject, RequestId};
use std::sync::Arc;

pub async fn serve(
    hub: &Arc<Hub>,
    ctx: &RequestCtx,
    id: RequestId,
    method: String,
    mut params: RawObject,
    (kind, shape): (ListKind, ResultShape),
    trail: &mut Trail,
) -> Outcome {
    if kind == ListKind::Tools {
        if let Some(reply) = super::meta_tools::answer(hub, ctx, &id, &params) {
            return Outcome::Reply(reply);
        }
    }
    let name = match required_str(&params, "name", &id) {
        Ok(name) => name,
        Err(refusal) => return refusal,
    };
    let catalog = hub.catalog_for(ctx);
    // A name the policy hides is answered as one that does not exist.
    let access = Access::of(hub, ctx);
    // A name outside the profile of the request's endpoint does not exist there.
    let found =
        (catalog.list(kind).lookup(&name)).filter(|item| access.in_view(kind, &item.upstream, &item.exposed));
    let target = found.map(|item| (&item.upstream, item.original.as_str()));
    let permitted = trail.decide(hub, &access, &name, target, &params);
    let Some(item) = found.filter(|_| permitted) else {
        // A host retrying right after its sign-in: the upstream is connecting with the new grant.
        if let Some(slot) = (permitted && kind == ListKind::Tools && hub.upstreams.any_oauth())
            .then(|| super::owner_by_prefix(hub, &access, kind, &name))
            .flatten()
        {
            // Boxed, as `consent` below: rare branches, whose state would else make every
            // call's future (moved whole at each layer) kilobytes larger.
            if Box::pin(sign_in::signed_in_and_loading(hub, &slot, ctx)).await {
                return Box::pin(serve(hub, ctx, id, method, params, (kind, shape), trail)).await;
            }
        }
        if let Some(down) = down_owner(hub, &access, kind, &name).filter(|_| permitted) {
            return Outcome::refused(id, down);
        }
        if let Some(done) = (kind == ListKind::Tools)
            .then(|| sign_in::signed_in_already(hub, ctx, &name, &id))
            .flatten()
        {
            return done;
        }
        // A tool left out because its definition drifted from its pin: say why, not "unknown".
        if let Some(why) = (kind == ListKind::Tools && permitted)
            .then(|| catalog.list(kind).blocked(&name))
            .flatten()
            .filter(|blocked| access.in_view(kind, &blocked.upstream, &name))
        {
            return Outcome::refused(id, RequestError::ToolDrifted(why.message.clone()));
        }
        let what = if kind == ListKind::Tools { "tool" } else { "prompt" };
        return Outcome::refused(id, RequestError::UnknownName { what, name });
    };
    if let Some(refusal) = step_up(hub, ctx, &name, trail) {
        return Outcome::Denied { id, refusal };
    }
    // An `oauth` upstream nobody signed in to, or one that asked for more scope: consent first.
    let oauth = (kind == ListKind::Tools && hub.upstreams.any_oauth())
        .then(|| hub.upstreams.get(&item.upstream))
        .flatten()
        .filter(|slot| matches!(slot.server.auth, crate::config::UpstreamAuth::OAuth(_)));
    if let Some(slot) = &oauth {
        let authorize = sign_in::is_authorize_call(slot, &item.original, ctx);
        if authorize || sign_in::needs_step_up(hub, slot, ctx) || sign_in::grant_lost(hub, slot, ctx) {
            match Box::pin(sign_in::consent(hub, ctx, id.clone(), slot, &mut params)).await {
                sign_in::Consent::Asked(outcome) => return outcome,
                sign_in::Consent::Proceed if authorize => return Outcome::Reply(sign_in::done(id, slot)),
                sign_in::Consent::Proceed => {}
            }
        }
    }
    let mut target = Target::new(item.upstream.clone(), shape);
    let modern_upstream = || {
        (hub.upstreams.get(&item.upstream))
            .is_some_and(|slot| slot.facts.load().as_ref().is_some_and(|f| f.is_modern()))
    };
    if kind == ListKind::Tools {
        // Only an annotated tool of a modern upstream needs `Mcp-Param-*` headers.
        if let Some((annotations, arguments)) = annotated_arguments(item.json.get(), &params) {
            if modern_upstream() {
                target.param_headers = modern_params::param_header_values(&annotations, &arguments);
            }
        }
    }
    params.set_str("name", &item.original);
    target.name = Some(item.original.clone());
    if trail.is_on() {
        // The identity the call goes out as: the upstream's own, or the principal's at an
        // upstream whose connections are per principal (the same bearer its connection holds).
        let bearer = hub
            .upstreams
            .get(&item.upstream)
            .and_then(|slot| match &slot.personal {
                Some(_) => (hub.upstreams.credentials).bearer(&slot.server, &sign_in::principal_of(ctx)),
                None => slot.bearer.clone(),
            });
        trail.used_grant(bearer.and_then(|b| b.grant_id()));
    }
    let Some(slot) = oauth else {
        return start_call(hub, ctx, id, method, params, target).await;
    };
    let retry = (params.clone(), method.clone(), target.clone());
    match start_call(hub, ctx, id.clone(), method, params, target).await {
        // The upstream refused the grant for want of scope: the same call asks for it (step-up).
        Outcome::Forward(mut call) => {
            let principal = sign_in::principal_of(ctx);
            let credentials = &hub.upstreams.credentials;
            let name = &slot.server.name;
            let refused = (call.events)
                .take_first_failure(|_| {
                    credentials.step_up_pending(name, &principal) || credentials.grant_lost(name, &principal)
                })
                .await;
            match refused {
                Some(_) => {
                    let (mut params, method, target) = retry;
                    match Box::pin(sign_in::consent(hub, ctx, id.clone(), &slot, &mut params)).await {
                        sign_in::Consent::Asked(outcome) => outcome,
                        // Signed in within the call (the host was asked on its stream): once more.
                        sign_in::Consent::Proceed => start_call(hub, ctx, id, method, params, target).await,
                    }
                }
                None => Outcome::Forward(call),
            }
        }
        other => other,
    }
}

/// The refusal of a use of `exposed` (a tool or prompt name, a resource URI) by a principal
/// without the scopes `[[auth.step_up]]` asks of it.
/// The refusal is noted on `trail`.
pub(super) fn step_up(
    hub: &Hub,
    ctx: &RequestCtx,
    exposed: &str,
    trail: &mut Trail,
) -> Option<crate::error::DownstreamError> {
    use crate::auth::challenge::{refusal, Failure};
    let (auth, principal) = (hub.auth.current()?, ctx.principal.as_ref()?);
    let needed = auth.step_up(principal, exposed)?;
    trail.refused_by_step_up(&needed);
    crate::telemetry::record::refused(crate::telemetry::Refusal::Auth);
    tracing::info!(principal = %principal.name, name = exposed, "step-up: it needs scopes {needed:?}");
    let failure = Failure::InsufficientScope(needed);
    // On a profile's endpoint the challenge names the profile's metadata.
    let config = hub.config();
    let resource = (ctx.profile.as_deref())
        .and_then(|name| config.profile(name))
        .map(|profile| crate::config::resource_url(&config.gateway, &profile.path));
    Some(refusal(
        &failure,
        auth.challenge_at(resource.as_deref(), &failure),
    ))
}

/// The `x-mcp-header` annotations of a listed tool with the arguments of a call to it; `None`
/// when the tool annotates nothing.
pub fn annotated_arguments(
    tool_json: &str,
    params: &RawObject,
) -> Option<(Vec<modern_params::ParamHeader>, serde_json::Value)> {
    static ANNOTATION: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new("x-mcp-header"));
    ANNOTATION.find(tool_json.as_bytes())?;
    let tool = serde_json::from_str::<serde_json::Value>(tool_json).ok()?;
    let annotations = modern_params::param_headers(tool.get("inputSchema")?);
    if annotations.is_empty() {
        return None;
    }
    let arguments = params
        .get("arguments")
        .and_then(|a| serde_json::from_str(a.get()).ok())
        .unwrap_or(serde_json::Value::Null);
    Some((annotations, arguments))
}
