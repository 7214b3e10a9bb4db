//! `logging/setLevel`: kept per session; a shared upstream gets the most verbose level any
//! session asked for (mcpmux filters per session), a session's own connections its own level.

use super::Outcome;
use crate::config::Isolation;
use crate::core::context::RequestCtx;
use crate::core::hub::Hub;
use crate::error::RequestError;
use crate::protocol::logging::{log_level_rank, LOG_LEVELS};
use crate::protocol::message::{json_string, raw, result_response};
use crate::protocol::{RawObject, RequestId};
use std::sync::Arc;
use std::time::Duration;

/// How long `logging/setLevel` waits for upstreams to acknowledge.
const SET_LEVEL_WAIT: Duration = Duration::from_secs(5);

pub async fn serve(hub: &Arc<Hub>, ctx: &RequestCtx, id: RequestId, params: &RawObject) -> Outcome {
    let Some(session) = ctx.session.as_ref() else {
        return Outcome::refused(id, RequestError::NoSession);
    };
    let level = params.get_str("level").unwrap_or_default();
    let Some(rank) = log_level_rank(&level) else {
        return Outcome::refused(id, RequestError::InvalidLogLevel(level));
    };
    session.set_log_level(rank);
    // A shared upstream gets the most verbose level any session asked for; mcpmux filters per session.
    let shared_rank = hub
        .sessions
        .all()
        .iter()
        .filter_map(|s| s.log_level())
        .min()
        .unwrap_or(rank)
        .min(rank);
    let mut targets = Vec::new();
    for slot in hub.upstreams.iter() {
        if !slot.facts.load().as_ref().is_some_and(|f| f.has("logging")) {
            continue;
        }
        let (handle, level_rank) = match slot.server.isolation {
            Isolation::Shared => (slot.shared.load_full().map(|h| (*h).clone()), shared_rank),
            Isolation::PerSession => (session.connection(&slot.id), rank),
        };
        if let Some(handle) = handle {
            targets.push((handle, LOG_LEVELS[level_rank]));
        }
    }
    let sends = targets.into_iter().map(|(handle, level)| async move {
        let params = raw(format!("{{\"level\":{}}}", json_string(level)));
        if let Err(err) = handle
            .request("logging/setLevel", Some(params), SET_LEVEL_WAIT)
            .await
        {
            tracing::warn!(upstream = %handle.name(), %err, "logging/setLevel failed upstream");
        }
    });
    futures_util::future::join_all(sends).await;
    Outcome::Reply(result_response(id, raw("{}".into())))
}
