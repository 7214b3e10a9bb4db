//! `GET /metrics`: the metrics in the Prometheus text format (0.0.4). The gauges that describe
//! the gateway's state (open sessions by era and transport, each upstream's phase and restarts,
//! the spans the exporter dropped) are set from it just before rendering, so they are never out of step with `/status`.

use crate::core::hub::Hub;
use crate::status_doc::Phase;
use crate::telemetry;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::header;
use std::collections::BTreeMap;
use std::sync::Arc;

pub const METRICS_PATH: &str = "/metrics";

/// The phases an upstream's phase gauge names.
const PHASES: &[Phase] = &[
    Phase::Starting,
    Phase::Ready,
    Phase::Restarting,
    Phase::CrashLoop,
    Phase::Stopped,
    Phase::NeedsAuthorization,
];

/// The `/metrics` route (none when the MCP path itself is `/metrics`).
pub fn router(hub: Arc<Hub>) -> axum::Router {
    if hub.config().gateway.path == METRICS_PATH {
        return axum::Router::new();
    }
    axum::Router::new()
        .route(METRICS_PATH, get(metrics))
        .with_state(hub)
}

async fn metrics(State(hub): State<Arc<Hub>>) -> Response {
    observe_state(&hub);
    let text = telemetry::render();
    ([(header::CONTENT_TYPE, telemetry::CONTENT_TYPE)], text).into_response()
}

/// Set the state gauges from the hub.
fn observe_state(hub: &Hub) {
    let mut open: BTreeMap<(&'static str, &'static str), usize> = BTreeMap::new();
    for transport in ["streamable_http", "sse"] {
        open.insert(("session", transport), 0);
    }
    for session in hub.sessions.all() {
        let era = if session.is_modern() {
            "stateless"
        } else {
            "session"
        };
        *open.entry((era, session.transport())).or_default() += 1;
    }
    for ((era, transport), count) in open {
        telemetry::record::sessions_open(era, transport, count);
    }
    let phases: Vec<&'static str> = PHASES.iter().map(|p| p.as_str()).collect();
    for slot in hub.upstreams.iter() {
        let report = slot.state.report();
        telemetry::record::upstream_state(&slot.server.name, &phases, report.phase.as_str(), report.restarts);
    }
    if let Some(tracer) = &hub.tracer {
        telemetry::record::trace_spans_dropped(tracer.dropped());
    }
}
