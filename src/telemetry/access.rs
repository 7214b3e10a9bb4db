//! The access log: one INFO line per host request under the `mcpmux::access` target (both
//! eras, each request of a batch, legacy SSE messages), with its method, exposed name, upstream,
//! duration, outcome, session, principal, client name and version, and trace id. `access_log =
//! false` in `[telemetry]` turns it off; `RUST_LOG` filters it like any other target.

use std::sync::Arc;
use std::time::Duration;

/// The target access lines are logged under (`RUST_LOG=mcpmux::access=off` silences them).
pub const TARGET: &str = "mcpmux::access";

/// What the access line says of a request besides its labels.
#[derive(Debug, Default)]
pub struct AccessFacts {
    /// The name or URI the host asked for (clipped), if the method names one.
    pub name: Option<String>,
    pub session: Option<String>,
    pub principal: Option<String>,
    pub client_name: Option<String>,
    pub client_version: Option<String>,
    pub trace_id: Option<Arc<str>>,
}

/// Whether access lines are written at all (`RUST_LOG` may filter them out): without them,
/// their facts are not gathered.
pub fn enabled() -> bool {
    tracing::enabled!(target: TARGET, tracing::Level::INFO)
}

/// Log the access line of one finished host request.
pub fn log(method: &str, upstream: Option<&str>, took: Duration, outcome: Option<&str>, facts: &AccessFacts) {
    tracing::info!(
        target: TARGET,
        method,
        name = facts.name.as_deref().unwrap_or(""),
        upstream = upstream.unwrap_or(""),
        duration_ms = took.as_micros() as f64 / 1000.0,
        outcome = outcome.unwrap_or("ok"),
        session = facts.session.as_deref().unwrap_or(""),
        principal = facts.principal.as_deref().unwrap_or(""),
        client_name = facts.client_name.as_deref().unwrap_or(""),
        client_version = facts.client_version.as_deref().unwrap_or(""),
        trace_id = facts.trace_id.as_deref().unwrap_or(""),
        "request"
    );
}
