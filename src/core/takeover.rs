//! Session takeover: a session-era request whose `Mcp-Session-Id` is not in this process's
//! registry opens the sealed id ([`crate::session::sealed_id`]) and, when another process (another
//! replica, or this one before a restart) issued it to the same principal, restores the session
//! from its claims, binds its owner and registers it under the same id; no new `initialize`.
//! While the session's home replica lives, the request does not get here: `cluster::send`
//! forwards it there; a takeover is for a home that is gone, stopping, or cannot open this
//! replica's passport.
//!
//! Carried by the session id: the negotiated version, client capabilities, `clientInfo` (name,
//! title, version), the log level as it was at `initialize`, and the owner. Carried by the
//! standalone (GET) stream's event ids, and restored when the host reconnects that stream here
//! with its `Last-Event-ID` (`core::restore`, once): the current log level (`logging/setLevel`)
//! and the resource subscriptions, each re-made upstream through the pipeline, so policy applies
//! again (when they are too many for an event id, over 4 KiB sealed, only the level). Not carried:
//! streams and calls in flight on the old home (a `Last-Event-ID` of one of its call streams gets
//! the standalone stream here), server-to-client requests waiting there (an answer to one opens
//! here but reaches nothing), and `isolation = "per-session"` connections (they start fresh here).

use crate::core::hub::Hub;
use crate::error::DownstreamError;
use crate::session::Session;
use std::sync::Arc;

/// The session `id` taken over for a request by `owner`; unknown (404) when it does not open,
/// is another principal's, was issued by this process, or was taken over and then ended here;
/// unavailable (503, the balancer tries another replica) when this process is stopping.
pub fn take_over(hub: &Hub, id: &str, owner: Option<&str>) -> Result<Arc<Session>, DownstreamError> {
    if hub.sessions.ended.contains(id) {
        tracing::debug!("session id refused: taken over and ended here");
        return Err(DownstreamError::UnknownSession);
    }
    let claims = match hub.session_ids.open(id, owner) {
        Ok(claims) => claims,
        Err(why) => {
            tracing::debug!(%why, "session id refused");
            return Err(DownstreamError::UnknownSession);
        }
    };
    if hub.shutdown.is_cancelled() {
        return Err(DownstreamError::Unavailable("mcpmux is shutting down"));
    }
    let session = hub.open_session(id.to_string(), claims.state);
    if let Some(owner) = claims.owner {
        session.bind_owner(owner);
    }
    session.mark_taken_over(claims.home.url.clone());
    let session = hub.sessions.adopt(session);
    tracing::info!(
        session = %crate::util::ids::session_digest(id),
        old_home = %claims.home.url,
        old_boot = %claims.home.boot,
        issued_ms = claims.issued_ms,
        "session taken over"
    );
    Ok(session)
}
