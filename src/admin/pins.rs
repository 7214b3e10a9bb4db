//! `GET /pins` and `POST /pins/approve`: the tools whose definition drifted from its pin
//! (`[pinning]`), each with what changed and a readable diff, and accepting the new definition
//! of a server's drifted tools (or of one): the lock is written, the tools are listed again and
//! hosts are told (`notifications/tools/list_changed`). Served beside `/metrics` and the admin
//! page, behind the same operator rule (`admin::access`: on `admin_listen` or without `[auth]`,
//! else a principal `[[policy]]` allows `mcpmux:admin`). With several replicas, approve on one
//! and `mcpmux reload` the others (each reads the lock again on reload).

use crate::catalog::ListKind;
use crate::core::hub::Hub;
use crate::pinning::{Drift, Mode};
use crate::upstream::host::{HostEvent, HostEvents};
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::StatusCode;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Weak};

pub const PINS_PATH: &str = "/pins";
pub const APPROVE_PATH: &str = "/pins/approve";

/// One drift as `GET /pins` lists it (and `mcpmux pins` prints it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriftLine {
    pub server: String,
    pub tool: String,
    /// The members that changed (`description`, `inputSchema`, ...).
    pub changed: Vec<String>,
    /// Readable: per changed member, `-` pinned and `+` current lines.
    pub diff: String,
    pub pinned_sha256: String,
    pub current_sha256: String,
    pub pinned: serde_json::Map<String, serde_json::Value>,
    pub current: serde_json::Map<String, serde_json::Value>,
}

impl DriftLine {
    pub fn new(drift: &Drift) -> DriftLine {
        DriftLine {
            server: drift.server.clone(),
            tool: drift.tool.clone(),
            changed: drift.changed.iter().map(|m| m.to_string()).collect(),
            diff: drift.diff(),
            pinned_sha256: drift.pinned.sha256.clone(),
            current_sha256: drift.current.sha256.clone(),
            pinned: drift.pinned.definition.clone(),
            current: drift.current.definition.clone(),
        }
    }
}

/// What `GET /pins` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinsReport {
    /// `off`, `warn` or `block`.
    pub mode: String,
    pub lock: String,
    pub drifts: Vec<DriftLine>,
}

/// The pins report of `hub`.
pub fn report(hub: &Hub) -> PinsReport {
    let (mode, lock) = hub.catalog.pinning();
    PinsReport {
        mode: match mode {
            Mode::Off => "off",
            Mode::Warn => "warn",
            Mode::Block => "block",
        }
        .to_string(),
        lock: lock.display().to_string(),
        drifts: hub.catalog.drifts().iter().map(DriftLine::new).collect(),
    }
}

/// What `POST /pins/approve` takes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Approval {
    pub server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

/// The routes (none when the MCP path is `/pins` itself or under it).
pub fn router(hub: &Arc<Hub>, mcp_path: &str) -> axum::Router {
    if mcp_path == PINS_PATH || mcp_path.starts_with("/pins/") {
        return axum::Router::new();
    }
    axum::Router::new()
        .route(PINS_PATH, get(list))
        .route(APPROVE_PATH, post(approve))
        .with_state(Arc::downgrade(hub))
}

fn answer(status: StatusCode, body: serde_json::Value) -> Response {
    let json = [(http::header::CONTENT_TYPE, "application/json")];
    (status, json, format!("{body}\n")).into_response()
}

fn stopping() -> Response {
    answer(
        StatusCode::SERVICE_UNAVAILABLE,
        serde_json::json!({"error": "the gateway is stopping"}),
    )
}

async fn list(State(hub): State<Weak<Hub>>) -> Response {
    let Some(hub) = hub.upgrade() else {
        return stopping();
    };
    answer(StatusCode::OK, serde_json::json!(report(&hub)))
}

async fn approve(State(hub): State<Weak<Hub>>, body: Bytes) -> Response {
    let Some(hub) = hub.upgrade() else {
        return stopping();
    };
    let asked: Approval = match serde_json::from_slice(&body) {
        Ok(asked) => asked,
        Err(err) => {
            return answer(
                StatusCode::BAD_REQUEST,
                serde_json::json!({"error": format!("the body must be {{\"server\": \"S\", \"tool\": \"T\"}} (tool optional): {err}")}),
            )
        }
    };
    approve_on(&hub, &asked)
}

/// Approve on `hub` and answer what was approved; hosts hear of the tools listed again.
pub fn approve_on(hub: &Hub, asked: &Approval) -> Response {
    match hub.catalog.approve_pins(&asked.server, asked.tool.as_deref()) {
        Ok((approved, _)) if approved.is_empty() => {
            let what = match &asked.tool {
                Some(tool) => format!("{}/{tool}", asked.server),
                None => asked.server.clone(),
            };
            answer(
                StatusCode::NOT_FOUND,
                serde_json::json!({
                    "approved": approved,
                    "error": format!("no drifted tool of {what}: nothing to approve (`mcpmux pins` lists the drifts)"),
                }),
            )
        }
        Ok((approved, changed)) => {
            if changed {
                hub.sessions.emit(HostEvent::ListsChanged(&[ListKind::Tools]));
            }
            let (_, lock) = hub.catalog.pinning();
            answer(
                StatusCode::OK,
                serde_json::json!({
                    "approved": approved,
                    "server": asked.server,
                    "lock": lock.display().to_string(),
                }),
            )
        }
        Err(err) => answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            serde_json::json!({"error": err.to_string()}),
        ),
    }
}
