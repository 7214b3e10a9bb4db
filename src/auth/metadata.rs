//! The protected resource metadata (RFC 9728) at `/.well-known/oauth-protected-resource{path}`
//! and at the root, built from `gateway.public_url` (never from the request's Host header); a
//! profile's at `/.well-known/oauth-protected-resource{profile path}`, naming its own resource.

use super::{AuthInForce, Authenticator};
use crate::config::Config;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::header;
use std::sync::Arc;

const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The metadata URL of the resource at `public_url`: the well-known path inserted between its
/// origin and its path.
pub fn metadata_url(public_url: &str) -> String {
    match url::Url::parse(public_url) {
        Ok(url) => {
            let path = url.path().trim_end_matches('/');
            format!("{}{WELL_KNOWN}{path}", url.origin().ascii_serialization())
        }
        Err(_) => format!("{}{WELL_KNOWN}", public_url.trim_end_matches('/')),
    }
}

/// The resource URL of the profile a request path names (its endpoint or legacy SSE paths),
/// from the configuration in force; `None` for any other path.
pub type ProfileResources = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The metadata document.
pub fn document(config: &Config, auth: &Authenticator) -> serde_json::Value {
    document_for(&config.gateway.public_url, auth)
}

/// The metadata document of the resource at `resource` (the gateway's, or a profile's).
pub fn document_for(resource: &str, auth: &Authenticator) -> serde_json::Value {
    let auth_config = auth.config();
    let scopes: Vec<&String> = (auth_config.scopes_supported.iter())
        .filter(|s| *s != "offline_access")
        .collect();
    let mut doc = serde_json::json!({
        "resource": resource,
        "bearer_methods_supported": ["header"],
    });
    // With API keys only there is no authorization server to name: the field (optional in
    // RFC 9728) is left out rather than sent empty, so a client learns at once that no OAuth
    // flow leads to a token here (the key goes in the host's headers).
    if let Some(issuer) = &auth_config.issuer {
        doc["authorization_servers"] = serde_json::json!([issuer]);
    }
    if !scopes.is_empty() {
        doc["scopes_supported"] = serde_json::json!(scopes);
    }
    doc
}

fn json(body: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        body,
    )
        .into_response()
}

/// The routes serving the document: under the gateway's path, under `public_url`'s path (when
/// a proxy serves it under another one), and at the root; below the well-known path, a
/// profile's document for each profile path `profiles` knows (looked up per request, so a
/// reload's profiles are served), also under `public_url`'s prefix. Each is made from the
/// authenticator in force when it is asked for (a reload's `[auth]` and `public_url`); without
/// one, 404.
pub fn router(config: &Config, auth: &Arc<AuthInForce>, profiles: ProfileResources) -> axum::Router {
    let main = {
        let auth = auth.clone();
        move || {
            let current = auth.current();
            async move {
                match current {
                    Some(auth) => json(document_for(auth.public_url(), &auth).to_string()),
                    None => http::StatusCode::NOT_FOUND.into_response(),
                }
            }
        }
    };
    let gateway_path = config.gateway.path.trim_end_matches('/').to_string();
    let auth = auth.clone();
    let below = move |uri: http::Uri| {
        let (auth, profiles, gateway_path) = (auth.current(), profiles.clone(), gateway_path.clone());
        async move {
            let Some(auth) = auth else {
                return http::StatusCode::NOT_FOUND.into_response();
            };
            let path = uri.path().strip_prefix(WELL_KNOWN).unwrap_or_default();
            let own = url::Url::parse(auth.public_url())
                .map(|url| url.path().trim_end_matches('/').to_string())
                .unwrap_or_default();
            if path == gateway_path || (!own.is_empty() && path == own) {
                return json(document_for(auth.public_url(), &auth).to_string());
            }
            // `public_url`'s prefix (a proxy serving the gateway under another path).
            let prefix = own.strip_suffix(gateway_path.as_str()).unwrap_or(&own);
            let bare = path.strip_prefix(prefix).filter(|_| !prefix.is_empty());
            let resource = profiles(path).or_else(|| bare.and_then(|p| profiles(p)));
            match resource {
                Some(resource) => json(document_for(&resource, &auth).to_string()),
                None => http::StatusCode::NOT_FOUND.into_response(),
            }
        }
    };
    axum::Router::new()
        .route(WELL_KNOWN, get(main))
        .route(&format!("{WELL_KNOWN}/{{*path}}"), get(below))
}
