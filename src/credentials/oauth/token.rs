//! The token endpoint for the authorization code and refresh grants, how the client
//! authenticates there ([`ClientAuth`]), and the token response read into a [`Grant`].

use super::assertion::client_assertion;
use super::discovery::Discovery;
use super::error::OAuthError;
use super::wire::{endpoint_name, post_form, BasicAuth};
use crate::credentials::grant::{ClientRegistration, Grant};
use serde_json::Value;

/// How the client authenticates at a token endpoint.
#[derive(Clone, PartialEq, Eq)]
pub enum ClientAuth {
    /// `client_secret_basic`: the id and secret in an HTTP Basic header.
    Basic,
    /// `client_secret_post`: the id and secret as form fields.
    Post,
    /// `none`: a public client, only `client_id`.
    None,
    /// `private_key_jwt` (RFC 7523 §2.2): an assertion signed with this key (PEM text: PKCS#8
    /// RSA, EC P-256/P-384 or Ed25519, or PKCS#1 RSA); the algorithm follows the key type.
    PrivateKeyJwt { pem: String, key_id: Option<String> },
}

impl ClientAuth {
    /// The auth a registration names (`private_key_jwt` needs the key: it is not stored).
    pub fn of(client: &ClientRegistration) -> Result<ClientAuth, OAuthError> {
        match client.auth_method.as_str() {
            "client_secret_basic" => Ok(ClientAuth::Basic),
            "client_secret_post" => Ok(ClientAuth::Post),
            "none" => Ok(ClientAuth::None),
            other => Err(OAuthError::Invalid(format!(
                "token endpoint auth method {other:?} needs more than the client registration"
            ))),
        }
    }
}

impl std::fmt::Debug for ClientAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientAuth::Basic => f.write_str("Basic"),
            ClientAuth::Post => f.write_str("Post"),
            ClientAuth::None => f.write_str("None"),
            ClientAuth::PrivateKeyJwt { key_id, .. } => f
                .debug_struct("PrivateKeyJwt")
                .field("key_id", key_id)
                .finish_non_exhaustive(),
        }
    }
}

/// A token request: the grant's fields, then the client's authentication added.
pub(crate) async fn token_request(
    http: &reqwest::Client,
    token_endpoint: &str,
    client: &ClientRegistration,
    auth: &ClientAuth,
    mut form: Vec<(&str, String)>,
) -> Result<Value, OAuthError> {
    let missing_secret = || {
        OAuthError::Invalid(format!(
            "the client {} has no secret for {auth:?} at {}",
            client.client_id,
            endpoint_name(token_endpoint)
        ))
    };
    let mut basic = None;
    match auth {
        ClientAuth::Basic => {
            let secret = client.client_secret.as_deref().ok_or_else(missing_secret)?;
            basic = Some(BasicAuth {
                client_id: &client.client_id,
                client_secret: secret,
            });
        }
        ClientAuth::Post => {
            let secret = client.client_secret.as_deref().ok_or_else(missing_secret)?;
            form.push(("client_id", client.client_id.clone()));
            form.push(("client_secret", secret.to_string()));
        }
        ClientAuth::None => form.push(("client_id", client.client_id.clone())),
        ClientAuth::PrivateKeyJwt { pem, key_id } => {
            // The AS as audience (what the MCP conformance suite checks) and its token
            // endpoint (what RFC 7523 suggests and several IdPs require).
            let mut audience = Vec::new();
            if let Some(issuer) = client.issuer.as_deref() {
                audience.push(issuer.to_string());
            }
            if !audience.iter().any(|a| a == token_endpoint) {
                audience.push(token_endpoint.to_string());
            }
            let jwt = client_assertion(
                pem,
                key_id.as_deref(),
                &client.client_id,
                &audience,
                super::now_unix(),
            )?;
            form.push(("client_id", client.client_id.clone()));
            form.push((
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".to_string(),
            ));
            form.push(("client_assertion", jwt));
        }
    }
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    post_form(http, token_endpoint, &pairs, basic).await
}

/// Redeem an authorization code (with the PKCE verifier and the same `resource`).
/// `requested_scope`: what the authorization asked for, the grant's scope when the AS does
/// not say what it granted (RFC 6749 §5.1).
pub async fn exchange_code(
    http: &reqwest::Client,
    d: &Discovery,
    client: &ClientRegistration,
    code: &str,
    redirect_uri: &str,
    pkce_verifier: &str,
    requested_scope: Option<&str>,
) -> Result<Grant, OAuthError> {
    let endpoint = &d.as_metadata.token_endpoint;
    let form = vec![
        ("grant_type", "authorization_code".to_string()),
        ("code", code.to_string()),
        ("redirect_uri", redirect_uri.to_string()),
        ("code_verifier", pkce_verifier.to_string()),
        ("resource", d.resource.clone()),
    ];
    let answer = token_request(http, endpoint, client, &ClientAuth::of(client)?, form).await?;
    let mut grant = parse_token_response(endpoint, &answer, super::now_unix())?;
    grant.scope = grant.scope.or_else(|| requested_scope.map(str::to_string));
    grant.resource = Some(d.resource.clone());
    grant.client = Some(client.clone());
    Ok(grant)
}

/// Refresh a grant at the endpoint and with the client that obtained it; the old refresh
/// token is kept when the AS returns none, and the old scope when it names none.
pub async fn refresh(http: &reqwest::Client, grant: &Grant) -> Result<Grant, OAuthError> {
    let (Some(endpoint), Some(refresh_token), Some(client)) = (
        grant.token_endpoint.as_deref(),
        grant.refresh_token.as_deref(),
        grant.client.as_ref(),
    ) else {
        return Err(OAuthError::Invalid(
            "the grant cannot be refreshed (no refresh token, endpoint or client)".into(),
        ));
    };
    let mut form = vec![
        ("grant_type", "refresh_token".to_string()),
        ("refresh_token", refresh_token.to_string()),
    ];
    if let Some(resource) = &grant.resource {
        form.push(("resource", resource.clone()));
    }
    let answer = token_request(http, endpoint, client, &ClientAuth::of(client)?, form).await?;
    let mut fresh = parse_token_response(endpoint, &answer, super::now_unix())?;
    fresh.refresh_token = fresh.refresh_token.or_else(|| grant.refresh_token.clone());
    fresh.scope = fresh.scope.or_else(|| grant.scope.clone());
    fresh.resource = grant.resource.clone();
    fresh.client = grant.client.clone();
    Ok(fresh)
}

/// A successful token response (RFC 6749 §5.1) as a grant from `endpoint` obtained at `now`.
pub fn parse_token_response(endpoint: &str, answer: &Value, now: u64) -> Result<Grant, OAuthError> {
    let text = |name: &str| answer.get(name).and_then(Value::as_str).filter(|s| !s.is_empty());
    let access_token = text("access_token").ok_or_else(|| OAuthError::Malformed {
        endpoint: endpoint_name(endpoint),
        reason: "the token response has no access_token".to_string(),
    })?;
    let token_type = match text("token_type") {
        Some(t) if t.eq_ignore_ascii_case("bearer") => "Bearer".to_string(),
        Some(t) => t.to_string(),
        None => "Bearer".to_string(),
    };
    // A number, or (some servers) a numeric string.
    let expires_in = match answer.get("expires_in") {
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)),
        Some(Value::String(s)) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    Ok(Grant {
        access_token: access_token.to_string(),
        token_type,
        refresh_token: text("refresh_token").map(str::to_string),
        expires_at: expires_in.map(|secs| now.saturating_add(secs)),
        scope: text("scope").map(str::to_string),
        obtained_at: now,
        token_endpoint: Some(endpoint.to_string()),
        resource: None,
        client: None,
    })
}

#[cfg(test)]
#[path = "token_tests.rs"]
mod tests;
