//! OAuth 2.0 Token Exchange (RFC 8693): a token the host presented (validated by mcpmux's own
//! `[auth]`) traded at an IdP for one meant for the upstream, by `audience` and/or `resource`;
//! and the RFC 7523 §2.1 JWT bearer grant that redeems an exchanged assertion (an ID-JAG of
//! SEP-990's enterprise-managed authorization) at the upstream's own authorization server.

use super::error::OAuthError;
use super::token::{parse_token_response, token_request, ClientAuth};
use crate::credentials::grant::{ClientRegistration, Grant};

/// The RFC 8693 token type of an OAuth access token.
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// The RFC 8693 token type of an OpenID Connect ID token.
pub const ID_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id_token";
/// The token type of an Identity Assertion JWT Authorization Grant (SEP-990).
pub const ID_JAG_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id-jag";

/// What to exchange for what.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenExchange {
    /// The token presented (a secret).
    pub subject_token: String,
    /// Its type; [`ACCESS_TOKEN_TYPE`] for the host's bearer token.
    pub subject_token_type: String,
    /// The type wanted, when not the IdP's default.
    pub requested_token_type: Option<String>,
    pub audience: Option<String>,
    pub resource: Option<String>,
    pub scope: Option<String>,
}

impl TokenExchange {
    /// An exchange of an access token, the usual case.
    pub fn of_access_token(subject_token: String) -> TokenExchange {
        TokenExchange {
            subject_token,
            subject_token_type: ACCESS_TOKEN_TYPE.to_string(),
            requested_token_type: None,
            audience: None,
            resource: None,
            scope: None,
        }
    }
}

impl std::fmt::Debug for TokenExchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenExchange")
            .field("subject_token", &"<redacted>")
            .field("subject_token_type", &self.subject_token_type)
            .field("requested_token_type", &self.requested_token_type)
            .field("audience", &self.audience)
            .field("resource", &self.resource)
            .field("scope", &self.scope)
            .finish()
    }
}

/// Exchange at `token_endpoint` as `client`. The result carries no refresh token use: it is
/// cached until shortly before it expires and exchanged again then.
pub async fn token_exchange(
    http: &reqwest::Client,
    token_endpoint: &str,
    client: &ClientRegistration,
    auth: ClientAuth,
    request: &TokenExchange,
) -> Result<Grant, OAuthError> {
    let mut form = vec![
        (
            "grant_type",
            "urn:ietf:params:oauth:grant-type:token-exchange".to_string(),
        ),
        ("subject_token", request.subject_token.clone()),
        ("subject_token_type", request.subject_token_type.clone()),
    ];
    let optional = [
        ("requested_token_type", &request.requested_token_type),
        ("audience", &request.audience),
        ("resource", &request.resource),
        ("scope", &request.scope),
    ];
    for (name, value) in optional {
        if let Some(value) = value.as_ref().filter(|v| !v.is_empty()) {
            form.push((name, value.clone()));
        }
    }
    let answer = token_request(http, token_endpoint, client, &auth, form).await?;
    let mut grant = parse_token_response(token_endpoint, &answer, super::now_unix())?;
    grant.scope = grant.scope.or_else(|| request.scope.clone());
    grant.resource = request.resource.clone();
    grant.client = Some(client.clone());
    Ok(grant)
}

/// Redeem a JWT `assertion` (RFC 7523 §2.1) at `token_endpoint` as `client`, for `scope` and
/// the RFC 8707 `resource` when given.
pub async fn jwt_bearer(
    http: &reqwest::Client,
    token_endpoint: &str,
    client: &ClientRegistration,
    auth: ClientAuth,
    assertion: &str,
    scope: Option<&str>,
    resource: Option<&str>,
) -> Result<Grant, OAuthError> {
    let form = vec![
        (
            "grant_type",
            "urn:ietf:params:oauth:grant-type:jwt-bearer".to_string(),
        ),
        ("assertion", assertion.to_string()),
    ];
    super::client_credentials::scoped_grant(http, (token_endpoint, client, &auth), form, scope, resource)
        .await
}

#[cfg(test)]
#[path = "token_exchange_tests.rs"]
mod tests;
