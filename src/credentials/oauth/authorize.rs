//! The authorization request (OAuth 2.1 §4.1.1): the URL the user's browser opens, with PKCE
//! S256, the caller's opaque `state`, the scope when there is one, and the RFC 8707 `resource`.
//! An authorization server whose metadata does not list S256 in
//! `code_challenge_methods_supported` is refused, as the MCP spec requires (not for a
//! 2025-03-26 server, whose era did not ask servers to say so).

use super::discovery::Discovery;
use super::error::OAuthError;
use super::pkce::Pkce;
use crate::credentials::grant::ClientRegistration;
use url::Url;

/// The URL to send the user to.
pub fn authorization_url(
    d: &Discovery,
    client: &ClientRegistration,
    redirect_uri: &str,
    scope: Option<&str>,
    state: &str,
    pkce: &Pkce,
) -> Result<Url, OAuthError> {
    let endpoint = d.as_metadata.authorization_endpoint.as_deref().ok_or_else(|| {
        OAuthError::Discovery(format!(
            "the authorization server {} has no authorization_endpoint",
            super::wire::endpoint_name(&d.issuer)
        ))
    })?;
    let lists_s256 = d
        .as_metadata
        .code_challenge_methods_supported
        .as_ref()
        .is_some_and(|methods| methods.iter().any(|m| m == "S256"));
    if d.prm.is_some() && !lists_s256 {
        return Err(OAuthError::Discovery(format!(
            "the authorization server {} does not list PKCE S256 in code_challenge_methods_supported; not signing in",
            super::wire::endpoint_name(&d.issuer)
        )));
    }
    let mut url =
        Url::parse(endpoint).map_err(|e| OAuthError::Invalid(format!("authorization_endpoint: {e}")))?;
    // A person opens it (and the admin page links it): an http(s) page, nothing else.
    if !matches!(url.scheme(), "https" | "http") {
        return Err(OAuthError::Invalid(format!(
            "authorization_endpoint has the scheme {:?}; only an https (or http) page is opened",
            url.scheme()
        )));
    }
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", &client.client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("state", state)
            .append_pair("code_challenge", &pkce.challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("resource", &d.resource);
        if let Some(scope) = scope.filter(|s| !s.trim().is_empty()) {
            query.append_pair("scope", scope);
        }
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::oauth::discovery::AsMetadata;
    use std::collections::HashMap;

    fn discovery(endpoint: &str) -> Discovery {
        Discovery {
            resource: "https://mcp.example.com/mcp".into(),
            prm: None,
            issuer: "https://as.example.com".into(),
            as_metadata: AsMetadata {
                issuer: "https://as.example.com".into(),
                authorization_endpoint: Some(endpoint.into()),
                token_endpoint: "https://as.example.com/token".into(),
                registration_endpoint: None,
                scopes_supported: None,
                token_endpoint_auth_methods_supported: None,
                code_challenge_methods_supported: None,
                grant_types_supported: None,
                client_id_metadata_document_supported: false,
                raw: None,
            },
            scopes_supported: None,
        }
    }

    fn client() -> ClientRegistration {
        ClientRegistration {
            client_id: "https://gw.example.com/oauth/client.json".into(),
            client_secret: None,
            auth_method: "none".into(),
            issuer: None,
        }
    }

    #[test]
    fn every_parameter_is_there_and_the_endpoint_query_kept() {
        let pkce = Pkce::from_verifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk".into());
        let url = authorization_url(
            &discovery("https://as.example.com/authorize?tenant=a"),
            &client(),
            "http://127.0.0.1:8080/oauth/callback",
            Some("mcp:read mcp:write"),
            "opaque-state",
            &pkce,
        )
        .expect("url");
        let q: HashMap<String, String> = url.query_pairs().into_owned().collect();
        assert_eq!(q["tenant"], "a");
        assert_eq!(q["response_type"], "code");
        assert_eq!(q["client_id"], "https://gw.example.com/oauth/client.json");
        assert_eq!(q["redirect_uri"], "http://127.0.0.1:8080/oauth/callback");
        assert_eq!(q["state"], "opaque-state");
        assert_eq!(q["code_challenge"], "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
        assert_eq!(q["code_challenge_method"], "S256");
        assert_eq!(q["resource"], "https://mcp.example.com/mcp");
        assert_eq!(q["scope"], "mcp:read mcp:write");
        assert!(!url.as_str().contains(&pkce.verifier));
    }

    #[test]
    fn an_as_without_s256_is_refused_unless_the_server_is_of_2025_03_26() {
        let mut d = discovery("https://as.example.com/authorize");
        d.prm = Some(serde_json::json!({"resource": "https://mcp.example.com/mcp"}));
        let url =
            |d: &Discovery| authorization_url(d, &client(), "http://127.0.0.1/cb", None, "s", &Pkce::new());
        assert!(url(&d).is_err_and(|e| e.to_string().contains("PKCE S256")));
        d.as_metadata.code_challenge_methods_supported = Some(vec!["plain".into()]);
        assert!(url(&d).is_err());
        d.as_metadata.code_challenge_methods_supported = Some(vec!["plain".into(), "S256".into()]);
        assert!(url(&d).is_ok());
        let mut legacy = discovery("https://as.example.com/authorize");
        legacy.as_metadata.code_challenge_methods_supported = None;
        assert!(url(&legacy).is_ok());
    }

    #[test]
    fn an_authorization_endpoint_that_is_no_web_page_is_refused() {
        for endpoint in ["javascript:alert(1)", "file:///etc/passwd", "data:text/html,x"] {
            let refused = authorization_url(
                &discovery(endpoint),
                &client(),
                "http://127.0.0.1/cb",
                None,
                "s",
                &Pkce::new(),
            );
            assert!(
                refused.is_err_and(|e| e.to_string().contains("scheme")),
                "{endpoint}"
            );
        }
    }

    #[test]
    fn no_scope_means_no_scope_parameter() {
        let url = authorization_url(
            &discovery("https://as.example.com/authorize"),
            &client(),
            "http://127.0.0.1/cb",
            None,
            "s",
            &Pkce::new(),
        )
        .expect("url");
        assert!(!url.query_pairs().any(|(k, _)| k == "scope"));
    }
}
