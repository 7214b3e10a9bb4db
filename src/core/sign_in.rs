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
use crate::credentials::sign_in::SignInLink;
use crate::credentials::LOCAL_PRINCIPAL;
use crate::protocol::message::{error_object, result_response, to_raw};
use crate::protocol::modern_result::RESULT_INPUT_REQUIRED;
use crate::protocol::{Message, RawObject, RequestId, ResponsePayload};
use crate::session::Session;
use crate::upstream::personal::PersonalState;
use crate::upstream::server_requests::AnswerTo;
use crate::upstream::sign_in_wait::AUTHORIZE_TOOL;
use crate::upstream::UpstreamSlot;
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

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
                "params": url_elicitation_params(&message, &link)
            });
            let result = json!({
                "resultType": RESULT_INPUT_REQUIRED,
                "inputRequests": { INPUT_KEY: request },
            });
            Outcome::Reply(result_response(id, to_raw(&result)))
        }
        Era::Session if url_elicitation => {
            // A host with its GET stream open is asked there, and its call goes on once signed in.
            if let Some(session) = ctx.session.as_ref().filter(|s| s.has_get_stream()) {
                let elicitation = url_elicitation_params(&message, &link);
                match ask_on_stream(hub, session, (slot, &principal), elicitation).await {
                    Asked::SignedIn => return Consent::Proceed,
                    Asked::Answered(answer) => {
                        let text = format!("The sign-in to {name} was {answer}d; its tools stay unavailable.");
                        return Consent::Asked(Outcome::Reply(tool_error(id, &text)));
                    }
                    Asked::NotDelivered => {}
                }
            }
            // Else the host opens the link and retries; it hears when the sign-in completed.
            if let Some(session) = &ctx.session {
                tell_completion(hub, session, slot, &principal, &link.state);
            }
            let data = json!({
                "elicitations": [url_elicitation_params(&message, &link)]
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

/// The params of mcpmux's URL elicitation for sign-in `link`.
fn url_elicitation_params(message: &str, link: &SignInLink) -> serde_json::Value {
    json!({ "mode": "url", "message": message, "url": link.url, "elicitationId": link.state })
}

/// How asking a session-era host on its GET stream went.
enum Asked {
    /// It accepted, and the sign-in finished.
    SignedIn,
    /// It declined or cancelled (`decline`, `cancel`).
    Answered(String),
    /// The request could not be sent, was not answered, or the sign-in did not finish in time:
    /// the host gets error -32042 instead.
    NotDelivered,
}

/// Send the session's host `elicitation/create` (URL mode) on its GET stream, wait (bounded) for
/// its answer and, when it accepted, for the sign-in to finish; then tell it the elicitation is
/// complete (`notifications/elicitation/complete`).
async fn ask_on_stream(
    hub: &Hub,
    session: &Arc<Session>,
    (slot, principal): (&UpstreamSlot, &str),
    elicitation: serde_json::Value,
) -> Asked {
    let (tx, answer) = oneshot::channel();
    let method = "elicitation/create".to_string();
    let Ok((route, json)) =
        session.address_server_request(AnswerTo::Local(tx), method, Some(to_raw(&elicitation)))
    else {
        return Asked::NotDelivered;
    };
    if !session.push_get(json) {
        session.take_server_request(route);
        return Asked::NotDelivered;
    }
    let action = match tokio::time::timeout(FINISH_WAIT, answer).await {
        Ok(Ok(ResponsePayload::Result(result))) => RawObject::parse(result.get())
            .ok()
            .and_then(|r| r.get_str("action"))
            .unwrap_or_else(|| "cancel".into()),
        Ok(_) => return Asked::NotDelivered,
        Err(_) => {
            session.take_server_request(route);
            return Asked::NotDelivered;
        }
    };
    if action != "accept" {
        return Asked::Answered(action);
    }
    if !wait_signed_in(hub, slot, principal).await {
        return Asked::NotDelivered;
    }
    let id = elicitation.get("elicitationId").cloned().unwrap_or_default();
    session.push_get(completion_json(&id));
    Asked::SignedIn
}

/// `notifications/elicitation/complete` for elicitation `id`.
fn completion_json(id: &serde_json::Value) -> Arc<str> {
    let note = json!({ "jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": { "elicitationId": id } });
    note.to_string().into()
}

/// Once the principal's sign-in `state` finished (within the sign-in's own lifetime), tell the
/// session's host on its GET stream, so that it may retry the call that got error -32042.
fn tell_completion(hub: &Hub, session: &Arc<Session>, slot: &UpstreamSlot, principal: &str, state: &str) {
    let credentials = hub.upstreams.credentials.clone();
    let (session, upstream, principal) = (session.clone(), slot.server.name.clone(), principal.to_string());
    let note = completion_json(&json!(state));
    tokio::spawn(async move {
        let mut changes = credentials.changes();
        let finished = async {
            while !credentials.signed_in(&upstream, &principal).await {
                if changes.changed().await.is_err() {
                    return false;
                }
            }
            true
        };
        tokio::select! {
            done = tokio::time::timeout(crate::credentials::sign_in::SIGN_IN_TTL, finished) => {
                if matches!(done, Ok(true)) {
                    session.push_get(note);
                }
            }
            _ = session.closed.cancelled() => {}
        }
    });
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
