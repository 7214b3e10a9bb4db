//! Consent in-band: a host calls an `oauth` upstream's `{namespace}__authorize` tool (or a tool
//! whose upstream asked for more scope), and the sign-in comes to the person through the host,
//! in whatever way the host can carry it: a session-era host that declared URL elicitation gets
//! error -32042 with the URL (it opens it and retries); a 2026-07-28 host gets `input_required`
//! with a URL elicitation (its retry waits for the sign-in to finish); any other host gets a
//! tool result with `isError` and the link. Once the callback stored the grant, the retry (or
//! the next call) succeeds and the upstream's real tools replace the authorize tool.

use super::context::{Era, RequestCtx};
use super::hub::Hub;
use super::methods::Outcome;
use crate::credentials::LOCAL_PRINCIPAL;
use crate::protocol::message::{error_object, result_response, to_raw};
use crate::protocol::modern_result::RESULT_INPUT_REQUIRED;
use crate::protocol::{Message, RawObject, RequestId, ResponsePayload};
use crate::upstream::personal::PersonalState;
use crate::upstream::sign_in_wait::AUTHORIZE_TOOL;
use crate::upstream::UpstreamSlot;
use serde_json::json;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How long a retry after consent waits for the callback and the upstream's lists.
const FINISH_WAIT: Duration = Duration::from_secs(60);
/// The key of mcpmux's own input request in an `input_required` result.
const INPUT_KEY: &str = "mcpmux_sign_in";
/// The JSON-RPC error that asks a host to complete URL elicitations and retry (2025-11-25).
const URL_ELICITATION_REQUIRED: i64 = -32042;

/// The principal a request acts for at upstreams: its own, or the local user's.
pub fn principal_of(ctx: &RequestCtx) -> String {
    match &ctx.principal {
        Some(p) => p.grant_principal(),
        None => LOCAL_PRINCIPAL.to_string(),
    }
}

/// Whether `principal` still sees `slot`'s authorize tool: the upstream (its connection for
/// the principal, when they are per principal) waits for a sign-in.
fn awaiting(slot: &UpstreamSlot, principal: &str) -> bool {
    match &slot.personal {
        Some(connections) => connections
            .of(principal)
            .is_none_or(|me| me.state() != PersonalState::Ready),
        None => slot.awaiting_sign_in.load(Ordering::Acquire),
    }
}

/// Whether a call of `original` on `slot` is the authorize tool of an upstream waiting for the
/// request's principal to sign in.
pub fn is_authorize_call(slot: &UpstreamSlot, original: &str, ctx: &RequestCtx) -> bool {
    original == AUTHORIZE_TOOL && awaiting(slot, &principal_of(ctx))
}

/// Whether the call must sign in first: the upstream asked this principal for more scope.
pub fn needs_step_up(hub: &Hub, slot: &UpstreamSlot, ctx: &RequestCtx) -> bool {
    matches!(slot.server.auth, crate::config::UpstreamAuth::OAuth(_))
        && (hub.upstreams.credentials).step_up_pending(&slot.server.name, &principal_of(ctx))
}

/// Whether the call must sign in first: the principal's grant was revoked or refused.
pub fn grant_lost(hub: &Hub, slot: &UpstreamSlot, ctx: &RequestCtx) -> bool {
    (hub.upstreams.credentials).grant_lost(&slot.server.name, &principal_of(ctx))
}

/// Whether `slot` is an `oauth` upstream the request's principal has just signed in to, now
/// connecting; waits (bounded) until its lists replaced the authorize tool.
pub async fn signed_in_and_loading(hub: &Hub, slot: &UpstreamSlot, ctx: &RequestCtx) -> bool {
    let principal = principal_of(ctx);
    matches!(slot.server.auth, crate::config::UpstreamAuth::OAuth(_))
        && awaiting(slot, &principal)
        && hub
            .upstreams
            .credentials
            .has_grant(&slot.server.name, &principal)
            .await
        && wait_signed_in(hub, slot, &principal).await
}

/// A call of the authorize tool by an exposed name no longer listed: the upstream it named is
/// signed in now (a host retrying after its consent, with the list already replaced).
pub fn signed_in_already(hub: &Hub, ctx: &RequestCtx, exposed: &str, id: &RequestId) -> Option<Outcome> {
    let principal = principal_of(ctx);
    let slot = hub.upstreams.iter().find(|slot| {
        matches!(slot.server.auth, crate::config::UpstreamAuth::OAuth(_))
            && !awaiting(slot, &principal)
            && slot.naming.expose_name(AUTHORIZE_TOOL) == exposed
    })?;
    Some(Outcome::Reply(done(id.clone(), &slot)))
}

/// What the consent step decided.
pub enum Consent {
    /// The host was asked (or refused): this is the answer to its request.
    Asked(Outcome),
    /// The principal is signed in (now): the request goes on (its `inputResponses` answered
    /// mcpmux, not the upstream, and are removed).
    Proceed,
}

/// Sign the request's principal in to `slot`'s upstream, by the host's means.
pub async fn consent(
    hub: &Hub,
    ctx: &RequestCtx,
    id: RequestId,
    slot: &UpstreamSlot,
    params: &mut RawObject,
) -> Consent {
    let credentials = &hub.upstreams.credentials;
    let principal = principal_of(ctx);
    let name = &slot.server.name;
    if let Some(answer) = answered(params) {
        // A 2026-07-28 retry carrying the host's answer.
        params.remove("inputResponses");
        if answer != "accept" {
            let text = format!("The sign-in to {name} was {answer}d; its tools stay unavailable.");
            return Consent::Asked(Outcome::Reply(tool_error(id, &text)));
        }
        if wait_signed_in(hub, slot, &principal).await {
            return Consent::Proceed;
        }
    } else if !needs_step_up(hub, slot, ctx) && credentials.has_grant(name, &principal).await {
        if !awaiting(slot, &principal) {
            return Consent::Proceed;
        }
        // Signed in a moment ago (its lists are loading): wait for them, no second sign-in.
        if wait_signed_in(hub, slot, &principal).await {
            return Consent::Proceed;
        }
    }
    let session = ctx.session.as_ref().map(|s| s.log_id().to_string());
    let link = match credentials.start_sign_in(&slot.server, &principal, session).await {
        Ok(link) => link,
        Err(e) => {
            tracing::warn!(upstream = %name, "sign-in could not start: {e}");
            let text = format!("Signing in to {name} could not start: {e}");
            return Consent::Asked(Outcome::Reply(tool_error(id, &text)));
        }
    };
    let message = format!("Sign in to {name} to let mcpmux use it on your behalf.");
    tracing::info!(upstream = %name, "sign-in started in-band (the link is on the admin page and in `mcpmux grants`)");
    let url_elicitation = ctx
        .session
        .as_ref()
        .is_some_and(|s| s.state().caps.elicitation_url);
    Consent::Asked(match ctx.era {
        Era::Modern => {
            let request = json!({
                "method": "elicitation/create",
                "params": { "mode": "url", "message": message, "url": link.url, "elicitationId": link.state }
            });
            let result = json!({
                "resultType": RESULT_INPUT_REQUIRED,
                "inputRequests": { INPUT_KEY: request },
            });
            Outcome::Reply(result_response(id, to_raw(&result)))
        }
        Era::Session if url_elicitation => {
            let data = json!({
                "elicitations": [{ "mode": "url", "elicitationId": link.state, "url": link.url, "message": message }]
            });
            let error = error_object(URL_ELICITATION_REQUIRED, &format!("{message} Open the link, then retry."), Some(&data));
            Outcome::Reply(Message::Response {
                id: Some(id),
                payload: ResponsePayload::Error(error),
            })
        }
        Era::Session => Outcome::Reply(tool_error(
            id,
            &format!(
                "{message} Open this link in a browser: {}\nThen call {} again (or just use its tools: they replace this one).",
                link.url,
                slot.naming.expose_name(AUTHORIZE_TOOL)
            ),
        )),
    })
}

/// The host's answer to mcpmux's sign-in elicitation in a 2026-07-28 retry (`accept`,
/// `decline`, `cancel`), if the params carry one.
fn answered(params: &RawObject) -> Option<String> {
    let responses = params.get_object("inputResponses")?;
    let answer = RawObject::parse(responses.get(INPUT_KEY)?.get()).ok()?;
    Some(answer.get_str("action").unwrap_or_else(|| "cancel".into()))
}

/// Wait (bounded) until the principal holds a grant and the upstream's lists replaced the
/// authorize tool.
async fn wait_signed_in(hub: &Hub, slot: &UpstreamSlot, principal: &str) -> bool {
    let credentials = &hub.upstreams.credentials;
    let mut changes = credentials.changes();
    let name = &slot.server.name;
    let waited = tokio::time::timeout(FINISH_WAIT, async {
        loop {
            if credentials.step_up_pending(name, principal) {
                // The new grant was refused for want of scope: not signed in after all.
                return false;
            }
            if credentials.has_grant(name, principal).await && !awaiting(slot, principal) {
                return true;
            }
            tokio::select! {
                _ = changes.changed() => {}
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
        }
    });
    waited.await.unwrap_or(false)
}

/// The authorize tool's result once signed in.
pub fn done(id: RequestId, slot: &UpstreamSlot) -> Message {
    let text = format!(
        "Signed in to {}: its tools are available now (list the tools again to see them).",
        slot.server.name
    );
    let result = json!({ "content": [{ "type": "text", "text": text }], "isError": false });
    result_response(id, to_raw(&result))
}

/// A tool result with `isError` and `text`.
fn tool_error(id: RequestId, text: &str) -> Message {
    let result = json!({ "content": [{ "type": "text", "text": text }], "isError": true });
    result_response(id, to_raw(&result))
}
