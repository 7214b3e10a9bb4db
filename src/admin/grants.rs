//! `GET /grants` and `DELETE /grants/{server}?principal=P`: the grants in the running gateway's
//! vault, as may be shown (principal, server, scope, expiry, whether refreshable, the grant's
//! id; never a token), and signing a principal out of one upstream. Served where `POST /reload`
//! is (`gateway.admin_listen`, or a loopback `listen` without `[auth]` in force; 403 anywhere
//! else): they name principals and remove what they hold.

use crate::core::hub::Hub;
use crate::credentials::grant::GrantKey;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use http::StatusCode;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Weak};

pub const GRANTS_PATH: &str = "/grants";

pub use crate::credentials::LOCAL_PRINCIPAL;

/// A sign-in started and waiting for its callback, as `GET /grants` lists it (its link is
/// what the person opens; it works once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SigningIn {
    pub principal: String,
    pub server: String,
    pub url: String,
    /// Seconds since it started.
    pub for_secs: u64,
}

/// One grant as `GET /grants` lists it (and `mcpmux grants` prints it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantLine {
    pub principal: String,
    pub server: String,
    pub scope: Option<String>,
    pub expires_at: Option<u64>,
    pub obtained_at: u64,
    pub refreshable: bool,
    pub id: String,
}

impl GrantLine {
    pub fn new(key: GrantKey, summary: crate::credentials::grant::GrantSummary) -> GrantLine {
        GrantLine {
            principal: key.principal,
            server: key.upstream,
            scope: summary.scope,
            expires_at: summary.expires_at,
            obtained_at: summary.obtained_at,
            refreshable: summary.refreshable,
            id: summary.id,
        }
    }
}

/// The sign-ins of `hub` waiting for a person.
pub fn signing_in(hub: &Hub) -> Vec<SigningIn> {
    (hub.upstreams.credentials.waiting_sign_ins().into_iter())
        .map(|w| SigningIn {
            principal: w.key.principal,
            server: w.key.upstream,
            url: w.url,
            for_secs: w.for_secs,
        })
        .collect()
}

type GrantsState = (Weak<Hub>, super::reload::Allowed);

/// The routes (none when the MCP path is `/grants` itself), answering while `allowed` says so.
pub fn router(hub: &Arc<Hub>, allowed: super::reload::Allowed, mcp_path: &str) -> axum::Router {
    if mcp_path == GRANTS_PATH || mcp_path.starts_with("/grants/") {
        return axum::Router::new();
    }
    axum::Router::new()
        .route(GRANTS_PATH, get(list))
        .route("/grants/{server}", delete(remove))
        .with_state((Arc::downgrade(hub), allowed))
}

fn answer(status: StatusCode, body: serde_json::Value) -> Response {
    let json = [(http::header::CONTENT_TYPE, "application/json")];
    (status, json, format!("{body}\n")).into_response()
}

/// The hub's vault, or the answer (status and body) saying why there is none to ask.
fn vault(
    (hub, allowed): &GrantsState,
) -> Result<crate::credentials::vault::Vault, (StatusCode, serde_json::Value)> {
    if !allowed() {
        return Err((
            StatusCode::FORBIDDEN,
            serde_json::json!({
                "error": "/grants is served on gateway.admin_listen (or on a loopback listen without \
                          [auth]); set gateway.admin_listen, or use `mcpmux grants --config FILE`",
            }),
        ));
    }
    let vault = hub.upgrade().and_then(|hub| hub.vault.clone());
    vault.ok_or_else(|| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            serde_json::json!({"error": "this gateway has no vault (it is stopping, or it was started without one)"}),
        )
    })
}

async fn list(State(state): State<GrantsState>) -> Response {
    let vault = match vault(&state) {
        Ok(vault) => vault,
        Err((status, body)) => return answer(status, body),
    };
    match vault.list().await {
        Ok(grants) => {
            let lines: Vec<GrantLine> = grants.into_iter().map(|(k, s)| GrantLine::new(k, s)).collect();
            let waiting = state.0.upgrade().map(|hub| signing_in(&hub)).unwrap_or_default();
            answer(
                StatusCode::OK,
                serde_json::json!({
                    "vault": vault.describe(),
                    "grants": lines,
                    "signing_in": waiting,
                }),
            )
        }
        Err(err) => answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            serde_json::json!({"error": err.to_string()}),
        ),
    }
}

#[derive(Deserialize)]
struct Whose {
    principal: Option<String>,
}

async fn remove(
    State(state): State<GrantsState>,
    Path(server): Path<String>,
    Query(whose): Query<Whose>,
) -> Response {
    let vault = match vault(&state) {
        Ok(vault) => vault,
        Err((status, body)) => return answer(status, body),
    };
    let principal = whose.principal.unwrap_or_else(|| LOCAL_PRINCIPAL.to_string());
    let key = GrantKey::new(principal, server);
    match vault.remove_named(&key.principal, &key.upstream).await {
        Ok(Some(key)) => {
            tracing::info!(principal = %key.principal, server = %key.upstream, "grant removed (logout)");
            answer(StatusCode::OK, serde_json::json!({"removed": true}))
        }
        Ok(None) => answer(
            StatusCode::NOT_FOUND,
            serde_json::json!({"removed": false, "error": no_grant(&key)}),
        ),
        Err(err) => answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            serde_json::json!({"error": err.to_string()}),
        ),
    }
}

/// What `logout` says when there was nothing to remove.
pub fn no_grant(key: &GrantKey) -> String {
    format!(
        "no grant of principal {:?} for server {:?}: nothing to remove (`mcpmux grants` lists what there is)",
        key.principal, key.upstream
    )
}
