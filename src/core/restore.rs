//! Restoring a taken-over session's subscriptions and log level: the host's standalone (GET)
//! stream reconnects with its `Last-Event-ID`, whose sealed claims carry the session's resource
//! subscriptions and log level as they were on the replica it came from
//! (`session::host_tokens`). The replica that took the session over sets the level and re-makes
//! each subscription upstream through the pipeline, as the host's own requests would be
//! (`logging/setLevel`, `resources/subscribe`): policy still applies, so a URI the principal may
//! no longer read is not subscribed again. Once per session, and not after the host changed
//! either here itself (its newer word wins). The GET waits for it at most [`RESTORE_WAIT`].

use super::context::RequestCtx;
use super::forward::Frame;
use super::hub::Hub;
use super::methods::{self, Outcome};
use crate::auth::Principal;
use crate::protocol::logging::LOG_LEVELS;
use crate::protocol::message::parse_message;
use crate::protocol::{Message, RawObject, RequestId, ResponsePayload};
use crate::session::host_tokens::StandaloneClaims;
use crate::session::Session;
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;

/// How long a reconnecting GET waits for the restore before its stream opens (a slow upstream
/// does not hold the host's stream back; the restore goes on behind it).
pub const RESTORE_WAIT: Duration = Duration::from_secs(5);

/// Put `claims` in force on `session` for a GET by `principal`, when the session was taken over
/// here and nothing was restored or changed here yet. Returns when every request has been
/// answered (so the host's stream opens with its subscriptions in place), or after
/// [`RESTORE_WAIT`], the rest still going on.
pub async fn restore(
    hub: &Arc<Hub>,
    session: &Arc<Session>,
    principal: Option<Arc<Principal>>,
    claims: StandaloneClaims,
) {
    if session.taken_over_from().is_none() || !session.begin_restore() {
        return;
    }
    let work = tokio::spawn(restore_now(hub.clone(), session.clone(), principal, claims));
    if tokio::time::timeout(RESTORE_WAIT, work).await.is_err() {
        tracing::info!(
            session = %session.log_id(),
            "restoring the session's subscriptions takes a while: its GET stream opens meanwhile"
        );
    }
}

async fn restore_now(
    hub: Arc<Hub>,
    session: Arc<Session>,
    principal: Option<Arc<Principal>>,
    claims: StandaloneClaims,
) {
    let (hub, session) = (&hub, &session);
    if claims.subscriptions_dropped {
        tracing::warn!(
            session = %session.log_id(),
            "the session's subscriptions were too many to carry: the host must subscribe again"
        );
    }
    let ctx = RequestCtx::on(session.clone()).by(principal);
    if let Some(level) = claims.log_level.and_then(|rank| LOG_LEVELS.get(rank)) {
        let mut params = RawObject::default();
        params.set_str("level", level);
        let outcome = request(hub, &ctx, "logging/setLevel", params).await;
        report(session, "logging/setLevel", level, outcome);
    }
    for uri in &claims.subscriptions {
        let mut params = RawObject::default();
        params.set_str("uri", uri);
        let outcome = request(hub, &ctx, "resources/subscribe", params).await;
        report(session, "resources/subscribe", uri, outcome);
    }
    tracing::info!(
        session = %session.log_id(),
        subscriptions = claims.subscriptions.len(),
        log_level = claims.log_level.and_then(|rank| LOG_LEVELS.get(rank)).copied().unwrap_or("unset"),
        "restored the taken-over session's subscriptions and log level"
    );
}

/// One request of the restore, run to its answer: `Err` with why it was not served.
async fn request(hub: &Arc<Hub>, ctx: &RequestCtx, method: &str, params: RawObject) -> Result<(), String> {
    let id = restore_id();
    let reply = match methods::request(hub, ctx, id, method.to_string(), params).await {
        Outcome::Accepted => return Ok(()),
        Outcome::Denied { refusal, .. } | Outcome::Refused(refusal) => return Err(refusal.to_string()),
        Outcome::Reply(reply) => reply,
        Outcome::Forward(call) => {
            let mut frames = call.into_frames().boxed();
            let mut last = None;
            while let Some(frame) = frames.next().await {
                if let Frame::Response(json) = frame {
                    last = Some(json);
                    break;
                }
            }
            match last.as_deref().map(parse_message) {
                Some(Ok(reply)) => reply,
                _ => return Err("the call ended without a response".into()),
            }
        }
    };
    match reply {
        Message::Response {
            payload: ResponsePayload::Error(error),
            ..
        } => Err(error.get().to_string()),
        _ => Ok(()),
    }
}

/// A request id no host uses: the restore's requests are in flight under it like a host's.
fn restore_id() -> RequestId {
    RequestId::string(&format!("mcpmux-restore-{}", crate::util::ids::random_hex(16)))
}

fn report(session: &Session, method: &str, what: &str, outcome: Result<(), String>) {
    match outcome {
        Ok(()) => tracing::debug!(session = %session.log_id(), %method, %what, "restored"),
        Err(why) => tracing::info!(
            session = %session.log_id(),
            %method,
            %what,
            %why,
            "not restored on the replica that took the session over"
        ),
    }
}
