//! `POST /grants/{server}/sign-in` and `GET /grants/{server}/sign-in`: `mcpmux login` asking a
//! running gateway to start signing the local user (or `?principal=P`) in to an `oauth`
//! upstream (the answer is the link to open; the gateway's own callback finishes it), and then
//! whether the grant exists. Allowed where `POST /reload` is (the operator listener, or a
//! loopback listener without `[auth]`), refused (403) anywhere else.

use super::reload::Allowed;
use crate::core::hub::Hub;
use crate::credentials::LOCAL_PRINCIPAL;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::StatusCode;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;

/// The path, with `{server}` for the upstream's name.
pub const SIGN_IN_PATH: &str = "/grants/{server}/sign-in";

pub fn router(hub: Arc<Hub>, allowed: Allowed) -> axum::Router {
    axum::Router::new()
        .route(SIGN_IN_PATH, get(signed_in).post(start))
        .with_state((hub, allowed))
}

fn answer(status: StatusCode, body: serde_json::Value) -> Response {
    (
        status,
        [(http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn refused() -> Response {
    answer(
        StatusCode::FORBIDDEN,
        json!({ "error": "signing in over HTTP is served on gateway.admin_listen, or on a loopback listen without [auth]" }),
    )
}

fn principal(query: &HashMap<String, String>) -> String {
    query
        .get("principal")
        .cloned()
        .unwrap_or_else(|| LOCAL_PRINCIPAL.to_string())
}

async fn start(
    State((hub, allowed)): State<(Arc<Hub>, Allowed)>,
    Path(server): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    if !allowed() {
        return refused();
    }
    let Some(slot) = hub.upstreams.iter().find(|s| s.server.name == server) else {
        return answer(
            StatusCode::NOT_FOUND,
            json!({ "error": format!("no server {server:?} is configured") }),
        );
    };
    match (hub.upstreams.credentials)
        .start_sign_in(&slot.server, &principal(&query), None)
        .await
    {
        Ok(link) => answer(StatusCode::OK, json!({ "url": link.url })),
        Err(e) => answer(StatusCode::BAD_REQUEST, json!({ "error": e.to_string() })),
    }
}

async fn signed_in(
    State((hub, allowed)): State<(Arc<Hub>, Allowed)>,
    Path(server): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    if !allowed() {
        return refused();
    }
    let has = hub
        .upstreams
        .credentials
        .has_grant(&server, &principal(&query))
        .await;
    answer(StatusCode::OK, json!({ "signed_in": has }))
}
