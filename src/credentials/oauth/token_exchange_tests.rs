use super::*;
use crate::credentials::oauth::http_client;
use crate::credentials::oauth::test_as::{basic_credentials, json, TestAs};
use serde_json::json as j;

fn client() -> ClientRegistration {
    ClientRegistration {
        client_id: "mcpmux".into(),
        client_secret: Some("idp-secret".into()),
        auth_method: "client_secret_basic".into(),
        issuer: None,
    }
}

#[tokio::test]
async fn the_exchange_sends_rfc_8693_fields() {
    let server = TestAs::start(|_| {
        vec![(
            "POST",
            "/token".into(),
            json(
                200,
                j!({"access_token": "exchanged", "issued_token_type": ACCESS_TOKEN_TYPE, "token_type": "Bearer", "expires_in": 300}),
            ),
        )]
    })
    .await;
    let request = TokenExchange {
        audience: Some("https://jira.internal/mcp".into()),
        resource: Some("https://jira.internal/mcp".into()),
        scope: Some("jira:read".into()),
        ..TokenExchange::of_access_token("inbound-token".into())
    };
    let endpoint = format!("{}/token", server.base);
    let grant = token_exchange(&http_client(), &endpoint, &client(), ClientAuth::Basic, &request)
        .await
        .expect("exchange");
    let seen = server.only("/token");
    let form = seen.form();
    assert_eq!(
        form["grant_type"],
        "urn:ietf:params:oauth:grant-type:token-exchange"
    );
    assert_eq!(form["subject_token"], "inbound-token");
    assert_eq!(form["subject_token_type"], ACCESS_TOKEN_TYPE);
    assert_eq!(form["audience"], "https://jira.internal/mcp");
    assert_eq!(form["resource"], "https://jira.internal/mcp");
    assert_eq!(form["scope"], "jira:read");
    assert!(!form.contains_key("requested_token_type"));
    assert_eq!(
        basic_credentials(&seen.header("authorization").expect("Basic")),
        ("mcpmux".to_string(), "idp-secret".to_string())
    );
    assert_eq!(grant.access_token, "exchanged");
    assert_eq!(grant.expires_at, Some(grant.obtained_at + 300));
    assert_eq!(grant.scope.as_deref(), Some("jira:read"));
    assert!(!format!("{request:?}").contains("inbound-token"));
}

#[tokio::test]
async fn a_refused_exchange_names_the_idp_error_and_not_the_subject_token() {
    let server = TestAs::start(|_| {
        vec![(
            "POST",
            "/token".into(),
            json(
                400,
                j!({"error": "invalid_target", "error_description": "audience not allowed"}),
            ),
        )]
    })
    .await;
    let endpoint = format!("{}/token", server.base);
    let request = TokenExchange::of_access_token("inbound-token".into());
    let err = token_exchange(&http_client(), &endpoint, &client(), ClientAuth::Post, &request)
        .await
        .expect_err("refused");
    assert_eq!(err.oauth_error(), Some("invalid_target"));
    assert_eq!(
        err.to_string(),
        format!("{endpoint} answered HTTP 400: invalid_target (audience not allowed)")
    );
    assert!(!format!("{err:?}").contains("inbound-token"));
}
