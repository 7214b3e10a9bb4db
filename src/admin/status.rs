//! Operator endpoints beside the MCP path: `GET /status` (JSON: each upstream's phase, era,
//! restarts, last failure, list sizes and shadowed items; the open sessions, listen streams
//! and calls waiting for input), `GET /healthz` (the process serves) and `GET /readyz` (by
//! `gateway.ready_when`: every upstream ready, any, or every first start attempt made). The
//! composition root puts the same Host/Origin check around them as around the MCP endpoint.

use crate::catalog::ListKind;
use crate::config::{HttpMode, Isolation, ReadyWhen, TransportConfig, UpstreamAuth, UpstreamId};
use crate::core::hub::Hub;
use crate::session::Session;
use crate::shared_store::Health;
use crate::status_doc::{
    ProfileStatus, ServerInfo, SessionStatus, SharedStoreStatus, StatusDocument, UpstreamStatus,
};
use crate::upstream::UpstreamSlot;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{header, StatusCode};
use std::sync::Arc;

pub const STATUS_PATH: &str = "/status";
pub const HEALTH_PATH: &str = "/healthz";
pub const READY_PATH: &str = "/readyz";

struct Operator {
    hub: Arc<Hub>,
}

/// The operator routes, leaving out any that the MCP path itself takes.
pub fn router(hub: Arc<Hub>) -> axum::Router {
    let mcp_path = hub.config().gateway.path.clone();
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

/// 200 or 503 by `gateway.ready_when`; the body says how many upstreams are ready. Once a stop
/// was asked, 503 whatever the upstreams (the body says so), while in-flight calls drain.
async fn ready(State(op): State<Arc<Operator>>) -> Response {
    let hub = &op.hub;
    if hub.not_ready.is_cancelled() {
        let body = format!(
            "not ready: shutting down ({} call(s) in flight)\n",
            hub.calls.len()
        );
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::CONTENT_TYPE, "text/plain")],
            body,
        )
            .into_response();
    }
    let (is_ready, ready, total) = hub.upstreams_ready();
    let rule = match hub.config().gateway.ready_when {
        ReadyWhen::All => "all",
        ReadyWhen::Any => "any",
        ReadyWhen::Attempted => "attempted",
    };
    let (status, verdict) = match is_ready {
        true => (StatusCode::OK, "ready"),
        false => (StatusCode::SERVICE_UNAVAILABLE, "not ready"),
    };
    let body = format!("{verdict}: {ready} of {total} upstream(s) ready (ready_when = \"{rule}\")\n");
    (status, [(header::CONTENT_TYPE, "text/plain")], body).into_response()
}

async fn status(State(op): State<Arc<Operator>>) -> Response {
    match serde_json::to_string(&report(&op.hub)) {
        Ok(body) => crate::error::json_text(StatusCode::OK, body),
        Err(_) => plain(StatusCode::INTERNAL_SERVER_ERROR, "status unavailable\n"),
    }
}

/// The status document.
pub fn report(hub: &Hub) -> StatusDocument {
    let catalog = hub.catalog.snapshot();
    let count = |upstream: &UpstreamId, kind: ListKind| catalog.list(kind).count_of(upstream) as u64;
    let shadowed = |upstream: &UpstreamId| {
        (ListKind::ALL.iter())
            .map(|&kind| catalog.list(kind).shadowed_count_of(upstream) as u64)
            .sum()
    };
    let upstreams = hub
        .upstreams
        .iter()
        .map(|slot| UpstreamStatus {
            tools: count(&slot.id, ListKind::Tools),
            prompts: count(&slot.id, ListKind::Prompts),
            resources: count(&slot.id, ListKind::Resources),
            resource_templates: count(&slot.id, ListKind::Templates),
            shadowed: shadowed(&slot.id),
            ..upstream_entry(&slot)
        })
        .collect();
    let mut sessions = hub.sessions.all();
    sessions.sort_by_key(|s| std::cmp::Reverse(s.age()));
    StatusDocument {
        server: ServerInfo {
            name: "mcpmux".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        uptime_secs: hub.uptime().as_secs(),
        sessions: hub.sessions.len() as u64,
        listen_streams: hub.sessions.listeners.len() as u64,
        calls_waiting_for_input: hub.parked.len() as u64,
        calls_in_flight: hub.calls.len().saturating_sub(hub.relays.len()) as u64,
        relayed_in_flight: hub.relays.len() as u64,
        upstreams,
        disabled: (hub.config().disabled.iter()).map(|s| s.name.clone()).collect(),
        disabled_reasons: (hub.config().disabled.iter())
            .filter_map(|s| Some((s.name.clone(), s.waiting.clone()?)))
            .collect(),
        profiles: profiles(hub, &catalog, &sessions),
        session_list: sessions.iter().map(|s| session_entry(s)).collect(),
        audit: hub.audit.as_ref().map(|audit| audit.status()),
        shared_store: hub.shared_store.as_ref().map(|store| SharedStoreStatus {
            url: store.describe(),
            state: match store.health() {
                Health::Up => "up",
                Health::Down => "down",
                Health::Unknown => "unknown",
            }
            .into(),
        }),
        config: hub.config_status.lock().clone(),
    }
}

/// Each profile's entry: its servers and what it sees of `catalog` now, its open sessions.
fn profiles(hub: &Hub, catalog: &crate::catalog::Catalog, sessions: &[Arc<Session>]) -> Vec<ProfileStatus> {
    let config = hub.config();
    (config.profiles.iter())
        .map(|p| {
            let seen = |kind: ListKind| {
                let items = catalog.list(kind).items.iter();
                items
                    .filter(|i| crate::catalog::profile::admits_item(p, kind, i))
                    .count() as u64
            };
            let servers = (config.servers.iter()).filter(|s| p.has_server(&s.id));
            let named =
                (config.disabled.iter()).filter(|s| p.servers.as_ref().is_some_and(|l| l.contains(&s.id)));
            ProfileStatus {
                name: p.name.clone(),
                path: p.path.clone(),
                servers: (servers.map(|s| s.name.clone()))
                    .chain(named.map(|s| s.name.clone()))
                    .collect(),
                tools: seen(ListKind::Tools),
                prompts: seen(ListKind::Prompts),
                resources: seen(ListKind::Resources),
                resource_templates: seen(ListKind::Templates),
                sessions: (sessions.iter())
                    .filter(|s| s.profile().is_some_and(|n| **n == *p.name))
                    .count() as u64,
                discovery: p.discovery.as_str().to_string(),
            }
        })
        .collect()
}

/// How much of a session id the document shows: a sealed id starts with the key id (about 5
/// characters, the same for every session), so 16 leaves about 64 random bits to tell them apart.
const SESSION_ID_PREFIX_CHARS: usize = 16;

pub(super) fn session_entry(session: &Session) -> SessionStatus {
    SessionStatus {
        id_prefix: session.id.chars().take(SESSION_ID_PREFIX_CHARS).collect(),
        protocol_version: session.protocol_version.clone(),
        client: session.client_label(),
        age_secs: session.age().as_secs(),
        idle_secs: session.idle_for().as_secs(),
        in_flight: session.inflight_count() as u64,
        get_stream: session.has_get_stream(),
        profile: session.profile().map(|p| p.to_string()),
    }
}

/// An upstream's entry, its list sizes left at zero.
fn upstream_entry(slot: &UpstreamSlot) -> UpstreamStatus {
    let state = slot.state.report();
    let facts = slot.facts.load_full();
    let transport = match &slot.server.transport {
        TransportConfig::Stdio { .. } => "stdio",
        TransportConfig::Http {
            mode: HttpMode::LegacySse,
            ..
        } => "sse",
        // Auto mode fell back to legacy HTTP+SSE.
        TransportConfig::Http { .. } if slot.learned.legacy_sse() => "sse",
        TransportConfig::Http { .. } => "http",
    };
    let isolation = match (&slot.personal, slot.server.isolation) {
        (Some(_), _) => "per-principal",
        (None, Isolation::Shared) => "shared",
        (None, Isolation::PerSession) => "per-session",
    };
    UpstreamStatus {
        name: slot.server.name.clone(),
        namespace: slot.server.namespace.clone(),
        transport: transport.into(),
        isolation: isolation.into(),
        phase: state.phase,
        for_secs: state.for_secs,
        restarts: state.restarts,
        last_error: state.last_error,
        protocol_version: facts.as_ref().map(|f| f.protocol_version.clone()),
        era: facts
            .as_ref()
            .map(|f| if f.is_modern() { "stateless" } else { "session" }.into()),
        auth: (slot.server.auth != UpstreamAuth::Headers).then(|| slot.server.auth.mode().to_string()),
        grants: matches!(slot.server.auth, UpstreamAuth::OAuth(_)).then(|| slot.grant_count()),
        connections: slot.personal.as_ref().map(|c| c.handles().len() as u64),
        ..UpstreamStatus::default()
    }
}
