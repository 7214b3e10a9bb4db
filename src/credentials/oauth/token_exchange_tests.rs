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
    let grant = token_exchange(
        &http_client().expect("client"),
        &endpoint,
        &client(),
        ClientAuth::Basic,
        &request,
    )
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
    let err = token_exchange(
        &http_client().expect("client"),
        &endpoint,
        &client(),
        ClientAuth::Post,
        &request,
    )
    .await
    .expect_err("refused");
    assert_eq!(err.oauth_error(), Some("invalid_target"));
    assert_eq!(
        err.to_string(),
        format!("{endpoint} answered HTTP 400: invalid_target (audience not allowed)")
    );
    assert!(!format!("{err:?}").contains("inbound-token"));
}

#[tokio::test]
async fn an_id_jag_from_an_exchange_is_redeemed_with_the_jwt_bearer_grant() {
    // SEP-990 (the suite's cross-app-access scenario): ID token -> ID-JAG at the IdP, then the
    // ID-JAG as a JWT bearer grant at the MCP server's AS with client_secret_basic.
    let idp = TestAs::start(|_| {
        vec![(
            "POST",
            "/token".into(),
            json(200, j!({"access_token": "the-id-jag", "issued_token_type": ID_JAG_TOKEN_TYPE, "token_type": "N_A"})),
        )]
    })
    .await;
    let auth =
        TestAs::start(|_| vec![("POST", "/token".into(), json(200, j!({"access_token": "mcp-at"})))]).await;
    let request = TokenExchange {
        subject_token: "the-id-token".into(),
        subject_token_type: ID_TOKEN_TYPE.into(),
        requested_token_type: Some(ID_JAG_TOKEN_TYPE.into()),
        audience: Some(auth.base.clone()),
        resource: Some("http://rs.test/mcp".into()),
        scope: None,
    };
    let idp_client = ClientRegistration {
        client_id: "idp-client".into(),
        client_secret: None,
        auth_method: "none".into(),
        issuer: None,
    };
    let jag = token_exchange(
        &http_client().expect("client"),
        &format!("{}/token", idp.base),
        &idp_client,
        ClientAuth::None,
        &request,
    )
    .await
    .expect("exchange");
    assert_eq!(jag.token_type, "N_A");
    let form = idp.only("/token").form();
    assert_eq!(form["subject_token_type"], ID_TOKEN_TYPE);
    assert_eq!(form["requested_token_type"], ID_JAG_TOKEN_TYPE);
    assert_eq!(form["audience"], auth.base);
    assert_eq!(form["client_id"], "idp-client");

    let grant = jwt_bearer(
        &http_client().expect("client"),
        &format!("{}/token", auth.base),
        &client(),
        ClientAuth::Basic,
        &jag.access_token,
        None,
        Some("http://rs.test/mcp"),
    )
    .await
    .expect("jwt bearer");
    assert_eq!(grant.access_token, "mcp-at");
    let seen = auth.only("/token");
    let form = seen.form();
    assert_eq!(form["grant_type"], "urn:ietf:params:oauth:grant-type:jwt-bearer");
    assert_eq!(form["assertion"], "the-id-jag");
    assert_eq!(form["resource"], "http://rs.test/mcp");
    assert!(seen
        .header("authorization")
        .is_some_and(|h| h.starts_with("Basic ")));
}
