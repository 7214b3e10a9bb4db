//! Operator endpoints beside the MCP path: `GET /status` (JSON: each upstream's phase, era,
//! restarts, last failure and list sizes; sessions, listen streams and calls waiting for
//! input), `GET /healthz` (the process serves) and `GET /readyz` (every upstream had its first
//! start attempt). The composition root puts the same Host/Origin check around them as around
//! the MCP endpoint (a refusal here is `forbidden` in plain text).

use crate::catalog::ListKind;
use crate::config::{Isolation, TransportConfig};
use crate::core::hub::Hub;
use crate::upstream::UpstreamSlot;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{header, StatusCode};
use serde_json::json;
use std::sync::Arc;

pub const STATUS_PATH: &str = "/status";
pub const HEALTH_PATH: &str = "/healthz";
pub const READY_PATH: &str = "/readyz";

struct Operator {
    hub: Arc<Hub>,
}

/// The operator routes, leaving out any that the MCP path itself takes.
pub fn router(hub: Arc<Hub>) -> axum::Router {
    let mcp_path = hub.config.gateway.path.clone();
    let state = Arc::new(Operator { hub });
    let mut router = axum::Router::new();
    for (path, route) in [
        (STATUS_PATH, get(status)),
        (HEALTH_PATH, get(health)),
        (READY_PATH, get(ready)),
    ] {
        if path != mcp_path {
            router = router.route(path, route);
        }
    }
    router.with_state(state)
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    (status, [(header::CONTENT_TYPE, "text/plain")], text).into_response()
}

async fn health() -> Response {
    plain(StatusCode::OK, "ok\n")
}

async fn ready(State(op): State<Arc<Operator>>) -> Response {
    match op.hub.started_all() {
        true => plain(StatusCode::OK, "ready\n"),
        false => plain(StatusCode::SERVICE_UNAVAILABLE, "starting\n"),
    }
}

async fn status(State(op): State<Arc<Operator>>) -> Response {
    let body = report(&op.hub).to_string();
    crate::error::json_text(StatusCode::OK, body)
}

/// The status document.
pub fn report(hub: &Hub) -> serde_json::Value {
    let catalog = hub.catalog.snapshot();
    let count = |index: usize, kind: ListKind| {
        (catalog.list(kind).items.iter())
            .filter(|item| item.upstream == index)
            .count()
    };
    let upstreams: Vec<_> = hub
        .upstreams
        .iter()
        .map(|slot| {
            let mut entry = upstream_entry(slot);
            for kind in ListKind::ALL {
                entry[kind.field()] = count(slot.index, kind).into();
            }
            entry
        })
        .collect();
    json!({
        "server": { "name": "mcpmux", "version": env!("CARGO_PKG_VERSION") },
        "uptime_secs": hub.uptime().as_secs(),
        "sessions": hub.sessions.len(),
        "listen_streams": hub.sessions.listeners.len(),
        "calls_waiting_for_input": hub.parked.len(),
        "upstreams": upstreams,
    })
}

fn upstream_entry(slot: &UpstreamSlot) -> serde_json::Value {
    let state = slot.state.report();
    let facts = slot.facts.load_full();
    let transport = match &slot.server.transport {
        TransportConfig::Stdio { .. } => "stdio",
        TransportConfig::Http { .. } => "http",
    };
    let isolation = match slot.server.isolation {
        Isolation::Shared => "shared",
        Isolation::PerSession => "per-session",
    };
    json!({
        "name": slot.server.name,
        "namespace": slot.server.namespace,
        "transport": transport,
        "isolation": isolation,
        "phase": state.phase,
        "for_secs": state.for_secs,
        "restarts": state.restarts,
        "last_error": state.last_error,
        "protocol_version": facts.as_ref().map(|f| f.protocol_version.clone()),
        "era": facts.as_ref().map(|f| if f.is_modern() { "stateless" } else { "session" }),
    })
}
