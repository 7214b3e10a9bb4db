//! `POST /reload`: re-read the configuration the gateway was started with, as SIGHUP does, and
//! answer what changed or why the new configuration was refused. The composition root hands the
//! request to whoever reloads (`mcpmux serve`). It is served on `gateway.admin_listen`, or, when
//! there is none, on the main listener only when that is open to local processes anyway (a
//! loopback `listen` without `[auth]` in force when the request comes); anywhere else it is
//! refused (403), never left open on a public face.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use http::StatusCode;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

pub const RELOAD_PATH: &str = "/reload";

/// How long a reload may take before the answer is "still reloading".
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

/// A reload asked over HTTP; `answer` gets what it did (`Ok`) or why nothing changed (`Err`).
pub struct ReloadRequest {
    pub answer: oneshot::Sender<Result<String, String>>,
}

/// Whether reloading over HTTP is allowed now (asked per request: a reload may add `[auth]`).
pub type Allowed = std::sync::Arc<dyn Fn() -> bool + Send + Sync>;

/// The route (none when the MCP path is `/reload` itself): its requests go to `requests` while
/// `allowed` says so.
pub fn router((requests, allowed): (mpsc::Sender<ReloadRequest>, Allowed), mcp_path: &str) -> axum::Router {
    if mcp_path == RELOAD_PATH {
        return axum::Router::new();
    }
    axum::Router::new()
        .route(RELOAD_PATH, post(reload))
        .with_state((requests, allowed))
}

fn answer(status: StatusCode, body: serde_json::Value) -> Response {
    let json = [(http::header::CONTENT_TYPE, "application/json")];
    (status, json, format!("{body}\n")).into_response()
}

async fn reload(State((requests, allowed)): State<(mpsc::Sender<ReloadRequest>, Allowed)>) -> Response {
    if !allowed() {
        return answer(
            StatusCode::FORBIDDEN,
            serde_json::json!({
                "reloaded": false,
                "error": "POST /reload is served on gateway.admin_listen (or on a loopback listen \
                          without [auth]); set gateway.admin_listen, or send the process SIGHUP",
            }),
        );
    }
    let unavailable = || {
        answer(
            StatusCode::SERVICE_UNAVAILABLE,
            serde_json::json!({"reloaded": false, "error": "this gateway does not reload (it is stopping, or it was not started by `mcpmux serve`)"}),
        )
    };
    let (tx, rx) = oneshot::channel();
    if requests.send(ReloadRequest { answer: tx }).await.is_err() {
        return unavailable();
    }
    match tokio::time::timeout(ANSWER_TIMEOUT, rx).await {
        Ok(Ok(Ok(done))) => answer(
            StatusCode::OK,
            serde_json::json!({"reloaded": true, "message": done}),
        ),
        Ok(Ok(Err(why))) => answer(
            StatusCode::UNPROCESSABLE_ENTITY,
            serde_json::json!({"reloaded": false, "error": why}),
        ),
        Ok(Err(_)) => unavailable(),
        Err(_) => answer(
            StatusCode::GATEWAY_TIMEOUT,
            serde_json::json!({"reloaded": false, "error": "the reload did not finish in time; see the gateway's log"}),
        ),
    }
}
