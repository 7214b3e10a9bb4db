//! Discovery as the MCP authorization spec's client does it: the protected resource metadata
//! (RFC 9728) from the challenge's `resource_metadata`, else the path-based well-known URL,
//! else the root one; then the authorization server's metadata (RFC 8414 and OpenID Connect
//! discovery, with the path-insertion variants in the spec's order). A server with no
//! protected resource metadata is a 2025-03-26 server: its origin is the authorization server,
//! its metadata at the origin's well-known URLs, else `/authorize`, `/token` and `/register`
//! there.

use super::challenge::Challenge;
use super::error::OAuthError;
use super::wire::{endpoint_name, get_json, Fetched};
use serde_json::Value;
use url::Url;

/// What the authorization server says of itself (the fields a client acts on).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AsMetadata {
    pub issuer: String,
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: String,
    pub registration_endpoint: Option<String>,
    pub scopes_supported: Option<Vec<String>>,
    /// `None`: not stated (RFC 8414's default is `client_secret_basic`).
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    pub code_challenge_methods_supported: Option<Vec<String>>,
    pub grant_types_supported: Option<Vec<String>>,
    pub client_id_metadata_document_supported: bool,
    /// The document as served; `None` for the 2025-03-26 default endpoints.
    pub raw: Option<Value>,
}

/// Everything discovery learnt about one MCP server's authorization.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Discovery {
    /// The RFC 8707 resource indicator to send: the PRM's `resource`, else the server's
    /// canonical URI.
    pub resource: String,
    /// The protected resource metadata; `None` for a 2025-03-26 server.
    pub prm: Option<Value>,
    /// The authorization server's issuer identifier.
    pub issuer: String,
    pub as_metadata: AsMetadata,
    /// The PRM's `scopes_supported`.
    pub scopes_supported: Option<Vec<String>>,
}

/// The canonical URI of an MCP server (RFC 8707, the MCP spec): scheme and host lower case,
/// no fragment, no trailing slash.
pub fn canonical_resource(server_url: &Url) -> String {
    let mut url = server_url.clone();
    url.set_fragment(None);
    let mut text = url.to_string();
    if url.query().is_none() && text.ends_with('/') {
        text.pop();
    }
    text
}

/// Where the protected resource metadata may be, in the order to try (RFC 9728 §3.1, the MCP
/// spec): the path-based URL first, then the root one.
pub fn prm_candidates(server_url: &Url) -> Vec<String> {
    let origin = origin_of(server_url);
    let path = server_url.path().trim_end_matches('/');
    let mut out = Vec::new();
    if !path.is_empty() {
        out.push(format!("{origin}/.well-known/oauth-protected-resource{path}"));
    }
    out.push(format!("{origin}/.well-known/oauth-protected-resource"));
    out
}

/// Where an issuer's metadata may be, in the MCP spec's order: with a path, RFC 8414 path
/// insertion, OpenID Connect path insertion, OpenID Connect path appending; without one, RFC
/// 8414 then OpenID Connect. A path-bearing issuer is never looked up at the root.
pub fn as_metadata_candidates(issuer: &Url) -> Vec<String> {
    let origin = origin_of(issuer);
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    }
}

/// Whether a PRM's `resource` names the server at `server_url`: the same origin, and the
/// server's path is the resource's path or below it.
pub fn resource_matches(server_url: &Url, resource: &str) -> bool {
    let Ok(resource) = Url::parse(resource) else {
        return false;
    };
    if resource.fragment().is_some() || origin_of(&resource) != origin_of(server_url) {
        return false;
    }
    let base = resource.path().trim_end_matches('/');
    let path = server_url.path();
    match path.strip_prefix(base) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

/// Discover how to get a token for the MCP server at `server_url`, given the challenge of its
/// 401 when there was one.
pub async fn discover(
    http: &reqwest::Client,
    server_url: &Url,
    challenge: Option<&Challenge>,
) -> Result<Discovery, OAuthError> {
    if !matches!(server_url.scheme(), "http" | "https") || server_url.host().is_none() {
        return Err(OAuthError::Invalid(format!(
            "{} is not an http(s) URL",
            endpoint_name(server_url.as_str())
        )));
    }
    let Some(prm) = protected_resource_metadata(http, server_url, challenge).await? else {
        return legacy(http, server_url).await;
    };
    let resource = match prm.get("resource").and_then(Value::as_str) {
        Some(resource) if resource_matches(server_url, resource) => resource.to_string(),
        Some(resource) => {
            return Err(OAuthError::ResourceMismatch {
                server: endpoint_name(server_url.as_str()),
                resource: super::error::clean(resource),
            })
        }
        None => canonical_resource(server_url),
    };
    let issuer = prm
        .get("authorization_servers")
        .and_then(Value::as_array)
        .and_then(|servers| servers.iter().find_map(Value::as_str))
        .ok_or_else(|| {
            OAuthError::Discovery("the protected resource metadata names no authorization server".into())
        })?;
    let issuer_url = Url::parse(issuer)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .ok_or_else(|| {
            OAuthError::Discovery(format!(
                "authorization server {:?} is not an http(s) URL",
                super::error::clean(issuer)
            ))
        })?;
    let Some((url, raw)) = first_found(http, &as_metadata_candidates(&issuer_url)).await? else {
        return Err(OAuthError::Discovery(format!(
            "no authorization server metadata for {} at any well-known URL",
            endpoint_name(issuer)
        )));
    };
    let as_metadata = parse_as_metadata(&url, raw, issuer)?;
    if trim_slash(&as_metadata.issuer) != trim_slash(issuer) {
        return Err(OAuthError::Discovery(format!(
            "the metadata at {url} names issuer {}, not {}",
            super::error::clean(&as_metadata.issuer),
            endpoint_name(issuer)
        )));
    }
    Ok(Discovery {
        resource,
        scopes_supported: string_list(prm.get("scopes_supported")),
        prm: Some(prm),
        issuer: as_metadata.issuer.clone(),
        as_metadata,
    })
}

/// The PRM from the challenge's URL, else from the well-known candidates; `None` when no
/// candidate has one.
async fn protected_resource_metadata(
    http: &reqwest::Client,
    server_url: &Url,
    challenge: Option<&Challenge>,
) -> Result<Option<Value>, OAuthError> {
    let mut candidates = Vec::new();
    if let Some(url) = challenge.and_then(|c| c.resource_metadata.as_deref()) {
        if Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https")) {
            candidates.push(url.to_string());
        }
    }
    candidates.extend(prm_candidates(server_url));
    Ok(first_found(http, &candidates).await?.map(|(_, prm)| prm))
}

/// A 2025-03-26 server: the origin is the authorization server.
async fn legacy(http: &reqwest::Client, server_url: &Url) -> Result<Discovery, OAuthError> {
    let origin = origin_of(server_url);
    let base = Url::parse(&origin).map_err(|e| OAuthError::Invalid(e.to_string()))?;
    let as_metadata = match first_found(http, &as_metadata_candidates(&base)).await? {
        // The 2025-03-26 servers' metadata need not name the origin as issuer: not checked.
        Some((url, raw)) => parse_as_metadata(&url, raw, &origin)?,
        None => AsMetadata {
            issuer: origin.clone(),
            authorization_endpoint: Some(format!("{origin}/authorize")),
            token_endpoint: format!("{origin}/token"),
            registration_endpoint: Some(format!("{origin}/register")),
            scopes_supported: None,
            token_endpoint_auth_methods_supported: None,
            code_challenge_methods_supported: None,
            grant_types_supported: None,
            client_id_metadata_document_supported: false,
            raw: None,
        },
    };
    Ok(Discovery {
        resource: canonical_resource(server_url),
        prm: None,
        issuer: as_metadata.issuer.clone(),
        as_metadata,
        scopes_supported: None,
    })
}

/// The first candidate that serves a JSON object, with its URL.
async fn first_found(
    http: &reqwest::Client,
    candidates: &[String],
) -> Result<Option<(String, Value)>, OAuthError> {
    for url in candidates {
        match get_json(http, url).await? {
            Fetched::Found(value) => return Ok(Some((url.clone(), value))),
            Fetched::Absent(status) => tracing::debug!(url = %endpoint_name(url), status, "no metadata here"),
        }
    }
    Ok(None)
}

fn parse_as_metadata(url: &str, raw: Value, default_issuer: &str) -> Result<AsMetadata, OAuthError> {
    let text = |name: &str| raw.get(name).and_then(Value::as_str).map(str::to_string);
    let malformed = |reason: String| OAuthError::Malformed {
        endpoint: endpoint_name(url),
        reason,
    };
    let token_endpoint = text("token_endpoint").ok_or_else(|| malformed("no token_endpoint".into()))?;
    for endpoint in [
        Some(&token_endpoint),
        text("authorization_endpoint").as_ref(),
        text("registration_endpoint").as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        if !Url::parse(endpoint).is_ok_and(|u| matches!(u.scheme(), "http" | "https")) {
            return Err(malformed(format!(
                "endpoint {:?} is not an http(s) URL",
                super::error::clean(endpoint)
            )));
        }
    }
    Ok(AsMetadata {
        issuer: text("issuer").unwrap_or_else(|| default_issuer.to_string()),
        authorization_endpoint: text("authorization_endpoint"),
        token_endpoint,
        registration_endpoint: text("registration_endpoint"),
        scopes_supported: string_list(raw.get("scopes_supported")),
        token_endpoint_auth_methods_supported: string_list(raw.get("token_endpoint_auth_methods_supported")),
        code_challenge_methods_supported: string_list(raw.get("code_challenge_methods_supported")),
        grant_types_supported: string_list(raw.get("grant_types_supported")),
        client_id_metadata_document_supported: raw
            .get("client_id_metadata_document_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        raw: Some(raw),
    })
}

fn string_list(value: Option<&Value>) -> Option<Vec<String>> {
    value.and_then(Value::as_array).map(|items| {
        items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    })
}

/// `scheme://host[:port]` of a URL.
fn origin_of(url: &Url) -> String {
    url.origin().ascii_serialization()
}

fn trim_slash(text: &str) -> &str {
    text.trim_end_matches('/')
}

#[cfg(test)]
#[path = "discovery_tests.rs"]
mod tests;
