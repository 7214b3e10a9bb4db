//! The client credentials grant (OAuth 2.1 §4.2, MCP SEP-1046): a token for mcpmux itself,
//! authenticated with its secret (Basic or form) or an RFC 7523 `private_key_jwt` assertion.

use super::error::OAuthError;
use super::token::{parse_token_response, token_request, ClientAuth};
use crate::credentials::grant::{ClientRegistration, Grant};

/// A token for the client itself from `token_endpoint`, asking for `scope` and the RFC 8707
/// `resource` when given. For `private_key_jwt` the assertion's audience is the client's
/// `issuer` (when known) and the token endpoint.
pub async fn client_credentials(
    http: &reqwest::Client,
    token_endpoint: &str,
    client: &ClientRegistration,
    auth: ClientAuth,
    scope: Option<&str>,
    resource: Option<&str>,
) -> Result<Grant, OAuthError> {
    let form = vec![("grant_type", "client_credentials".to_string())];
    scoped_grant(http, (token_endpoint, client, &auth), form, scope, resource).await
}

/// A grant from the token endpoint for `form` plus the `scope` and `resource` asked for (kept
/// on the grant when the answer names none), obtained by `client`.
pub(super) async fn scoped_grant(
    http: &reqwest::Client,
    (token_endpoint, client, auth): (&str, &ClientRegistration, &ClientAuth),
    mut form: Vec<(&str, String)>,
    scope: Option<&str>,
    resource: Option<&str>,
) -> Result<Grant, OAuthError> {
    if let Some(scope) = scope.filter(|s| !s.trim().is_empty()) {
        form.push(("scope", scope.to_string()));
    }
    if let Some(resource) = resource {
        form.push(("resource", resource.to_string()));
    }
    let answer = token_request(http, token_endpoint, client, auth, form).await?;
    let mut grant = parse_token_response(token_endpoint, &answer, super::now_unix())?;
    grant.scope = grant.scope.or_else(|| scope.map(str::to_string));
    grant.resource = resource.map(str::to_string);
    grant.client = Some(client.clone());
    Ok(grant)
}

#[cfg(test)]
#[path = "client_credentials_tests.rs"]
mod tests;
