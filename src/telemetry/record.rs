//! The one-line calls the rest of mcpmux makes: a refusal, a list refreshed, `list_changed`
//! sent, an audit line dropped, a shared store fallback, a health check missed; and the gauges `GET /metrics` sets from
//! the gateway's state just before it renders (sessions, upstream phases and restarts).

use super::names::*;
use metrics::{counter, gauge};

/// Why mcpmux refused a host request (the `reason` label of [`REFUSALS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No, or no valid, credentials (`[auth]`), or too few scopes.
    Auth,
    /// `[[policy]]` does not allow the principal the name or URI.
    Policy,
    /// A `[[policy]]` `rate_limit` was exceeded.
    RateLimit,
    /// Too many requests in flight (per session, or at an upstream's `max_in_flight`).
    Overload,
    /// The Host or Origin header is not allowed.
    Origin,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Auth => "auth",
            Refusal::Policy => "policy",
            Refusal::RateLimit => "rate_limit",
            Refusal::Overload => "overload",
            Refusal::Origin => "origin",
        }
    }
}

/// mcpmux refused a host request.
pub fn refused(reason: Refusal) {
    counter!(REFUSALS, REASON => reason.as_str()).increment(1);
}

/// `upstream`'s `list` (`tools`, `prompts`, `resources`, `resourceTemplates`) was fetched again.
pub fn list_refreshed(upstream: &str, list: &'static str) {
    counter!(LIST_REFRESHES, UPSTREAM => upstream.to_string(), LIST => list).increment(1);
}

/// `count` hosts were told `method` (a `notifications/*/list_changed`).
pub fn list_changed_sent(method: &'static str, count: usize) {
    if count > 0 {
        counter!(LIST_CHANGED_SENT, METHOD => method).increment(count as u64);
    }
}

/// A tool of `server` was found changed since it was pinned.
pub fn tool_drift(server: &str) {
    counter!(TOOL_DRIFT, SERVER => server.to_string()).increment(1);
}

/// The audit writer's queue was full: a line was dropped.
pub fn audit_dropped() {
    counter!(AUDIT_DROPPED).increment(1);
}

/// The shared store failed, so a `use` (`rate_limit`) was decided by this replica alone.
pub fn shared_store_fallback(what: &'static str) {
    counter!(SHARED_STORE_FALLBACKS, USE => what).increment(1);
}

/// The OTLP exporter has dropped `total` spans since the start.
pub fn trace_spans_dropped(total: u64) {
    counter!(TRACE_SPANS_DROPPED).absolute(total);
}

/// `upstream` left a health check unanswered.
pub fn health_check_failed(upstream: &str) {
    counter!(HEALTH_CHECK_FAILURES, UPSTREAM => upstream.to_string()).increment(1);
}

/// `count` host sessions of `era` (`session`, `modern`) over `transport` (`streamable_http`,
/// `sse`) are open.
pub fn sessions_open(era: &'static str, transport: &'static str, count: usize) {
    gauge!(SESSIONS_ACTIVE, ERA => era, TRANSPORT => transport).set(count as f64);
}

/// `upstream` is in phase `current` (one of `phases`), and was restarted `restarts` times.
pub fn upstream_state(upstream: &str, phases: &[&'static str], current: &str, restarts: u64) {
    for phase in phases {
        let value = if *phase == current { 1.0 } else { 0.0 };
        gauge!(UPSTREAM_PHASE, UPSTREAM => upstream.to_string(), PHASE => *phase).set(value);
    }
    counter!(UPSTREAM_RESTARTS, UPSTREAM => upstream.to_string()).absolute(restarts);
}
