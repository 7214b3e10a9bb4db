//! The health check of a ready connection: a `ping` every `health_check_interval_secs`; any
//! answer (even an error: a 2026-07-28 server has no `ping`) proves the server alive, and two
//! checks in a row without one give the connection up, so that its pending calls fail at once
//! and its supervisor restarts it.

use super::tunables::LiveTunables;
use super::{CallFailure, Status, UpstreamHandle};

/// Checks in a row that may go unanswered before the connection is given up.
const MISSED_CHECKS_ALLOWED: u32 = 1;
/// How often a connection whose check is disabled looks whether a reload enabled it.
const DISABLED_RECHECK: std::time::Duration = std::time::Duration::from_secs(5);

/// Check `handle` periodically while it lives. The interval and timeout are read from the
/// server's live settings each round: a reload changes them from the next check on (an interval
/// of `0`, no check, is looked at again every few seconds).
pub fn watch(handle: UpstreamHandle, tunables: LiveTunables) {
    tokio::spawn(async move {
        let mut missed = 0;
        loop {
            let (interval, timeout) = {
                let now = tunables.load();
                (now.health_check_interval, now.health_check_timeout)
            };
            tokio::select! {
                _ = tokio::time::sleep(interval.unwrap_or(DISABLED_RECHECK)) => {}
                _ = handle.closed() => return,
            }
            if interval.is_none() || tunables.load().health_check_interval.is_none() {
                missed = 0;
                continue;
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
