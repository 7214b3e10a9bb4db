//! The health check of a ready connection: a `ping` every `health_check_interval_secs`; any
//! answer (even an error: a 2026-07-28 server has no `ping`) proves the server alive, and two
//! checks in a row without one give the connection up, so that its pending calls fail at once
//! and its supervisor restarts it.

use super::{CallFailure, Status, UpstreamHandle};
use crate::config::ServerConfig;

/// Checks in a row that may go unanswered before the connection is given up.
const MISSED_CHECKS_ALLOWED: u32 = 1;

/// Check `handle` periodically while it lives (nothing when the server's check is disabled).
pub fn watch(handle: UpstreamHandle, server: &ServerConfig) {
    let Some(interval) = server.health_check_interval else {
        return;
    };
    let timeout = server.health_check_timeout;
    tokio::spawn(async move {
        let mut missed = 0;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = handle.closed() => return,
            }
            match handle.request("ping", None, timeout).await {
                Ok(_) | Err(CallFailure::Rpc(_)) => missed = 0,
                Err(CallFailure::Upstream(err)) => {
                    if matches!(handle.status(), Status::Down(_)) {
                        return;
                    }
                    missed += 1;
                    crate::telemetry::record::health_check_failed(handle.name());
                    tracing::warn!(upstream = %handle.name(), %err, missed, "health check unanswered");
                    if missed > MISSED_CHECKS_ALLOWED {
                        let reason = format!(
                            "no answer to {missed} health checks in a row ({} s each)",
                            timeout.as_secs()
                        );
                        handle.abandon(reason);
                        return;
                    }
                }
            }
        }
    });
}
