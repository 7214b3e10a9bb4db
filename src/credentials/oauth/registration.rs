//! Who mcpmux is at an authorization server: a pre-registered client, else its Client ID
//! Metadata Document URL where the AS supports CIMD, else a client registered dynamically
//! (RFC 7591); and how it authenticates at the token endpoint, as the AS metadata (or the
//! registration's answer) says: `client_secret_basic` preferred when there is a secret, then
//! `client_secret_post`, else `none`.

use super::discovery::Discovery;
use super::error::OAuthError;
use super::wire::{endpoint_name, post_json};
use crate::credentials::grant::ClientRegistration;
use serde_json::{json, Value};

/// How to obtain the client registration.
#[derive(Clone, PartialEq, Eq)]
pub enum Registration {
    /// Configured `client_id` (and secret): used as is.
    PreRegistered {
        client_id: String,
        client_secret: Option<String>,
    },
    /// mcpmux's own metadata: its CIMD URL (an `https` URL with a path, served by the
    /// gateway) where the AS supports CIMD, else these fields in an RFC 7591 registration.
    Metadata {
        cimd_url: Option<String>,
        redirect_uri: String,
        client_name: String,
    },
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Registration::PreRegistered {
                client_id,
                client_secret,
            } => f
                .debug_struct("PreRegistered")
                .field("client_id", client_id)
                .field("client_secret", &client_secret.as_ref().map(|_| "<redacted>"))
                .finish(),
            Registration::Metadata {
                cimd_url,
                redirect_uri,
                client_name,
            } => f
                .debug_struct("Metadata")
                .field("cimd_url", cimd_url)
                .field("redirect_uri", redirect_uri)
                .field("client_name", client_name)
                .finish(),
        }
    }
}

/// The client registration at the authorization server `d` found.
pub async fn register(
    http: &reqwest::Client,
    d: &Discovery,
    how: Registration,
) -> Result<ClientRegistration, OAuthError> {
    let methods = d.as_metadata.token_endpoint_auth_methods_supported.as_deref();
    match how {
        Registration::PreRegistered {
            client_id,
            client_secret,
        } => Ok(ClientRegistration {
            auth_method: auth_method_for(methods, client_secret.is_some()).to_string(),
            client_id,
            client_secret,
            issuer: Some(d.issuer.clone()),
        }),
        Registration::Metadata {
            cimd_url: Some(cimd_url),
            ..
        } if d.as_metadata.client_id_metadata_document_supported && is_cimd_url(&cimd_url) => {
            Ok(ClientRegistration {
                client_id: cimd_url,
                client_secret: None,
                auth_method: "none".to_string(),
                issuer: Some(d.issuer.clone()),
            })
        }
        Registration::Metadata {
            redirect_uri,
            client_name,
            ..
        } => dynamic(http, d, &redirect_uri, &client_name).await,
    }
}

/// The metadata mcpmux registers with (RFC 7591 §2), the same as its CIMD serves.
pub fn client_metadata(client_name: &str, redirect_uri: &str, token_endpoint_auth_method: &str) -> Value {
    json!({
        "client_name": client_name,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": token_endpoint_auth_method,
    })
}

/// mcpmux's Client ID Metadata Document, served at `cimd_url` (which is its `client_id`): a
/// public client (`none`) that asks for refresh tokens (SEP-2207).
pub fn cimd_document(cimd_url: &str, client_name: &str, redirect_uri: &str) -> Value {
    let mut doc = client_metadata(client_name, redirect_uri, "none");
    doc["client_id"] = Value::String(cimd_url.to_string());
    doc
}

/// RFC 7591 dynamic client registration.
async fn dynamic(
    http: &reqwest::Client,
    d: &Discovery,
    redirect_uri: &str,
    client_name: &str,
) -> Result<ClientRegistration, OAuthError> {
    let Some(endpoint) = d.as_metadata.registration_endpoint.as_deref() else {
        return Err(OAuthError::Discovery(format!(
            "the authorization server {} offers no dynamic client registration: configure a client_id",
            endpoint_name(&d.issuer)
        )));
    };
    let methods = d.as_metadata.token_endpoint_auth_methods_supported.as_deref();
    let asked = registration_auth_method(methods);
    let answer = post_json(http, endpoint, &client_metadata(client_name, redirect_uri, asked)).await?;
    let text = |name: &str| answer.get(name).and_then(Value::as_str).map(str::to_string);
    let client_id = text("client_id")
        .filter(|id| !id.is_empty())
        .ok_or_else(|| OAuthError::Malformed {
            endpoint: endpoint_name(endpoint),
            reason: "the registration answer has no client_id".to_string(),
        })?;
    let client_secret = text("client_secret").filter(|s| !s.is_empty());
    let auth_method = match text("token_endpoint_auth_method") {
        Some(method) if is_known_method(&method) && (method == "none" || client_secret.is_some()) => method,
        _ => auth_method_for(methods, client_secret.is_some()).to_string(),
    };
    Ok(ClientRegistration {
        client_id,
        client_secret,
        auth_method,
        issuer: Some(d.issuer.clone()),
    })
}

/// How a client with (or without) a secret authenticates at a token endpoint supporting
/// `methods` (`None`: not stated, RFC 8414's default `client_secret_basic`).
pub fn auth_method_for(methods: Option<&[String]>, has_secret: bool) -> &'static str {
    if !has_secret {
        return "none";
    }
    let Some(methods) = methods else {
        return "client_secret_basic";
    };
    let supports = |m: &str| methods.iter().any(|s| s == m);
    if supports("client_secret_basic") {
        "client_secret_basic"
    } else if supports("client_secret_post") {
        "client_secret_post"
    } else if supports("none") {
        "none"
    } else {
        "client_secret_basic"
    }
}

/// The method to ask for in a registration: a secret-based one the AS supports, else `none`.
fn registration_auth_method(methods: Option<&[String]>) -> &'static str {
    match methods {
        None => "client_secret_basic",
        Some(methods) => {
            let supports = |m: &str| methods.iter().any(|s| s == m);
            if supports("client_secret_basic") {
                "client_secret_basic"
            } else if supports("client_secret_post") {
                "client_secret_post"
            } else {
                "none"
            }
        }
    }
}

fn is_known_method(method: &str) -> bool {
    matches!(method, "client_secret_basic" | "client_secret_post" | "none")
}

/// A CIMD client id is an `https` URL with a path (draft-ietf-oauth-client-id-metadata-document).
fn is_cimd_url(url: &str) -> bool {
    url::Url::parse(url).is_ok_and(|u| u.scheme() == "https" && u.path() != "/" && u.fragment().is_none())
}

#[cfg(test)]
#[path = "registration_tests.rs"]
mod tests;
