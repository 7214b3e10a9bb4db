//! Every metric's name, unit, help text and labels, in one place. The two operation durations
//! follow the OpenTelemetry semantic conventions for MCP (`mcp.server.operation.duration` for
//! what hosts ask of mcpmux, `mcp.client.operation.duration` for mcpmux's requests upstream,
//! attributes `mcp.method.name`, `gen_ai.tool.name`, `gen_ai.prompt.name`, `error.type`; a host
//! request's tool or prompt is its exposed name, `_OTHER` when the catalog does not have it; an
//! upstream leg's is the upstream's own name for it, the name that leg sent), mapped
//! to Prometheus names (dots to underscores, the unit as `_seconds`, counters with `_total`).
//! The rest are mcpmux's own, prefixed `mcpmux_`.

use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};

/// `mcp.server.operation.duration`: each host request, until its response was sent.
pub const HOST_DURATION: &str = "mcp_server_operation_duration_seconds";
/// `mcp.client.operation.duration`: each request mcpmux sent an upstream, until its answer.
pub const UPSTREAM_DURATION: &str = "mcp_client_operation_duration_seconds";
/// Upstream requests waiting for their answer, per upstream.
pub const UPSTREAM_IN_FLIGHT: &str = "mcpmux_upstream_requests_in_flight";
/// Host sessions open now, by era and transport.
pub const SESSIONS_ACTIVE: &str = "mcpmux_sessions_active";
/// 1 for an upstream's current phase, 0 for the others.
pub const UPSTREAM_PHASE: &str = "mcpmux_upstream_phase";
/// Restarts of an upstream since mcpmux started it.
pub const UPSTREAM_RESTARTS: &str = "mcpmux_upstream_restarts_total";
/// Health checks (`ping`) an upstream left unanswered.
pub const HEALTH_CHECK_FAILURES: &str = "mcpmux_upstream_health_check_failures_total";
/// Host requests refused before reaching an upstream, by reason.
pub const REFUSALS: &str = "mcpmux_refusals_total";
/// An upstream's list (tools, prompts, resources, templates) fetched again.
pub const LIST_REFRESHES: &str = "mcpmux_list_refreshes_total";
/// `notifications/*/list_changed` sent to hosts (one per session or listen stream told).
pub const LIST_CHANGED_SENT: &str = "mcpmux_list_changed_notifications_total";
/// Audit lines dropped because the audit writer's queue was full.
pub const AUDIT_DROPPED: &str = "mcpmux_audit_dropped_total";
/// Spans the OTLP exporter dropped (its queue full, or the collector unreachable or refusing).
pub const TRACE_SPANS_DROPPED: &str = "mcpmux_trace_spans_dropped_total";
/// Decisions taken without the shared store (`[cluster] store`) because it failed: a rate
/// limit counted by this replica alone.
pub const SHARED_STORE_FALLBACKS: &str = "mcpmux_shared_store_fallbacks_total";

/// Tool definitions found changed since they were pinned (`[pinning]`), by server.
pub const TOOL_DRIFT: &str = "mcpmux_tool_drift_total";

/// Labels (OpenTelemetry attribute names with `.` as `_`).
pub const METHOD: &str = "mcp_method_name";
pub const TOOL: &str = "gen_ai_tool_name";
pub const PROMPT: &str = "gen_ai_prompt_name";
pub const ERROR_TYPE: &str = "error_type";
/// mcpmux's own: the upstream's name as configured (`[servers.NAME]`).
pub const UPSTREAM: &str = "upstream";
pub const ERA: &str = "era";
pub const TRANSPORT: &str = "transport";
pub const PHASE: &str = "phase";
pub const REASON: &str = "reason";
pub const LIST: &str = "list";
/// What the shared store was asked for (`rate_limit`).
pub const USE: &str = "use";
/// A server's configured name (`[servers.NAME]`) on the pinning metric.
pub const SERVER: &str = "server";

/// What a label says for a method or name it may not carry (not a known method, not in the
/// catalog): the conventions' fallback value, so that label values stay few.
pub const OTHER: &str = "_OTHER";

/// The histograms' metric names end so (the exporter gives them [`DURATION_BUCKETS`]).
pub const DURATION_SUFFIX: &str = "_operation_duration_seconds";
/// The bucket boundaries the MCP conventions advise for operation durations.
pub const DURATION_BUCKETS: &[f64] = &[
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// The methods a `mcp_method_name` label may carry; any other is [`OTHER`].
const METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "server/discover",
    "subscriptions/listen",
    "sampling/createMessage",
    "elicitation/create",
    "roots/list",
];

/// `method` as a label value: itself when MCP defines it, else [`OTHER`].
pub fn method(method: &str) -> &'static str {
    METHODS.iter().find(|m| **m == method).copied().unwrap_or(OTHER)
}

/// Tell the recorder each metric's unit and help text (once, when it is installed).
pub(super) fn describe() {
    describe_histogram!(
        HOST_DURATION,
        Unit::Seconds,
        "Duration of host requests to mcpmux (mcp.server.operation.duration)"
    );
    describe_histogram!(
        UPSTREAM_DURATION,
        Unit::Seconds,
        "Duration of mcpmux's requests to upstream servers (mcp.client.operation.duration)"
    );
    describe_gauge!(
        UPSTREAM_IN_FLIGHT,
        "Requests sent to an upstream and not yet answered"
    );
    describe_gauge!(SESSIONS_ACTIVE, "Host sessions open, by era and transport");
    describe_gauge!(
        UPSTREAM_PHASE,
        "1 for the phase an upstream is in, 0 for the others"
    );
    describe_counter!(UPSTREAM_RESTARTS, "Restarts of an upstream");
    describe_counter!(HEALTH_CHECK_FAILURES, "Health checks an upstream left unanswered");
    describe_counter!(REFUSALS, "Host requests refused by mcpmux, by reason");
    describe_counter!(LIST_REFRESHES, "Upstream lists fetched again");
    describe_counter!(LIST_CHANGED_SENT, "list_changed notifications sent to hosts");
    describe_counter!(
        AUDIT_DROPPED,
        "Audit lines dropped (the audit writer's queue was full)"
    );
    describe_counter!(
        SHARED_STORE_FALLBACKS,
        "Decisions taken without the shared store because it failed (rate limits counted per replica)"
    );
    describe_counter!(
        TRACE_SPANS_DROPPED,
        "Spans not exported (the exporter's queue was full, or the collector did not take them)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_method_label_is_a_known_method_or_other() {
        assert_eq!(method("tools/call"), "tools/call");
        assert_eq!(method("tools/call/../../x"), OTHER);
        assert_eq!(method(""), OTHER);
    }

    #[test]
    fn names_follow_the_prometheus_conventions() {
        for name in [HOST_DURATION, UPSTREAM_DURATION] {
            assert!(name.ends_with(DURATION_SUFFIX), "{name}");
        }
        for name in [
            UPSTREAM_RESTARTS,
            HEALTH_CHECK_FAILURES,
            REFUSALS,
            LIST_REFRESHES,
            LIST_CHANGED_SENT,
            AUDIT_DROPPED,
            TRACE_SPANS_DROPPED,
            SHARED_STORE_FALLBACKS,
            TOOL_DRIFT,
        ] {
            assert!(name.starts_with("mcpmux_") && name.ends_with("_total"), "{name}");
        }
        assert!(DURATION_BUCKETS.windows(2).all(|w| w[0] < w[1]));
    }
}
