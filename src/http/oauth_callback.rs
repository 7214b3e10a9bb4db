//! The OAuth face of mcpmux as a client of upstream authorization servers: `GET /oauth/callback`
//! (the redirect URI: the browser comes back here with the authorization code, and the sign-in
//! `state` names which one it finishes) and `GET /oauth/client.json` (mcpmux's Client ID
//! Metadata Document). Neither is behind `[auth]`: a browser carries no bearer token, and the
//! `state` (random, single use, short-lived, bound to the principal) is what admits a callback.

use crate::credentials::{Credentials, CALLBACK_PATH, CLIENT_METADATA_PATH};
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{header, StatusCode};
use std::collections::HashMap;
use std::sync::Arc;

/// The two routes, on the gateway's public origin (or `mcpmux login`'s own listener).
pub fn router(credentials: Arc<Credentials>) -> axum::Router {
    axum::Router::new()
        .route(CALLBACK_PATH, get(callback))
        .route(CLIENT_METADATA_PATH, get(client_metadata))
        .with_state(credentials)
}

async fn client_metadata(State(credentials): State<Arc<Credentials>>) -> Response {
    let body = credentials.client_metadata().to_string();
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}

async fn callback(
    State(credentials): State<Arc<Credentials>>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let Some(state) = query.get("state") else {
        return page(
            StatusCode::BAD_REQUEST,
            "Sign-in failed",
            "The link has no state: start the sign-in again.",
        );
    };
    let outcome = match (query.get("code"), query.get("error")) {
        (_, Some(error)) => {
            let description = query
                .get("error_description")
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            Err(format!("{error}{description}"))
        }
        (Some(code), None) => Ok(code.as_str()),
        (None, None) => Err("the authorization server sent no code".to_string()),
    };
    match credentials.finish_sign_in(state, outcome).await {
        Ok(finished) => page(
            StatusCode::OK,
            "Signed in",
            &format!(
                "mcpmux is signed in to {} now. You can close this window and go back to your MCP host.",
                finished.key.upstream
            ),
        ),
        Err(e) => {
            tracing::warn!("sign-in callback: {e}");
            page(StatusCode::BAD_REQUEST, "Sign-in failed", &e.to_string())
        }
    }
}

/// A small HTML page for the person in the browser (text escaped).
fn page(status: StatusCode, title: &str, text: &str) -> Response {
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>mcpmux: {title}</title></head>\
         <body style=\"font-family:sans-serif;max-width:40em;margin:4em auto\"><h1>{title}</h1><p>{}</p></body></html>\n",
        escape(text),
        title = escape(title)
    );
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response()
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
