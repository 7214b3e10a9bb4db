use super::*;
use crate::credentials::oauth::assertion::tests::verified_claims;
use crate::credentials::oauth::http_client;
use crate::credentials::oauth::test_as::{basic_credentials, json, TestAs};
use serde_json::json as j;

fn server_answer() -> serde_json::Value {
    j!({"access_token": "cc-token-1", "token_type": "Bearer", "expires_in": 3600})
}

#[tokio::test]
async fn client_secret_basic_as_the_conformance_suite_checks_it() {
    let server = TestAs::start(|_| vec![("POST", "/token".into(), json(200, server_answer()))]).await;
    let client = ClientRegistration {
        client_id: "conformance-test-client".into(),
        client_secret: Some("conformance-test-secret".into()),
        auth_method: "client_secret_basic".into(),
        issuer: Some(server.base.clone()),
    };
    let endpoint = format!("{}/token", server.base);
    let grant = client_credentials(
        &http_client().expect("client"),
        &endpoint,
        &client,
        ClientAuth::Basic,
        Some("mcp:read"),
        Some("http://rs.test/mcp"),
    )
    .await
    .expect("grant");
    let seen = server.only("/token");
    let form = seen.form();
    assert_eq!(form["grant_type"], "client_credentials");
    assert_eq!(form["scope"], "mcp:read");
    assert_eq!(form["resource"], "http://rs.test/mcp");
    assert_eq!(
        basic_credentials(&seen.header("authorization").expect("Basic")),
        (
            "conformance-test-client".to_string(),
            "conformance-test-secret".to_string()
        )
    );
    assert_eq!(grant.access_token, "cc-token-1");
    assert_eq!(grant.scope.as_deref(), Some("mcp:read"));
    assert_eq!(grant.client.as_ref(), Some(&client));
}

#[tokio::test]
async fn private_key_jwt_sends_an_assertion_the_as_verifies() {
    let server = TestAs::start(|_| vec![("POST", "/token".into(), json(200, server_answer()))]).await;
    let pem = include_str!("testdata/ec8.pem");
    let client = ClientRegistration {
        client_id: "conformance-test-client".into(),
        client_secret: None,
        auth_method: "private_key_jwt".into(),
        issuer: Some(server.base.clone()),
    };
    let endpoint = format!("{}/token", server.base);
    let auth = ClientAuth::PrivateKeyJwt {
        pem: pem.to_string(),
        key_id: None,
    };
    client_credentials(
        &http_client().expect("client"),
        &endpoint,
        &client,
        auth,
        None,
        None,
    )
    .await
    .expect("grant");
    let seen = server.only("/token");
    let form = seen.form();
    assert_eq!(form["grant_type"], "client_credentials");
    assert_eq!(
        form["client_assertion_type"],
        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    );
    assert!(!form.contains_key("scope") && !form.contains_key("resource"));
    assert_eq!(seen.header("authorization"), None);
    // The suite accepts the AS's base URL as audience; RFC 7523 suggests the token endpoint.
    let claims = verified_claims(
        &form["client_assertion"],
        pem,
        jsonwebtoken::Algorithm::ES256,
        "conformance-test-client",
        &server.base,
    );
    assert_eq!(claims["sub"], "conformance-test-client");
    assert_eq!(claims["aud"], j!([server.base, endpoint]));
}

#[tokio::test]
async fn without_a_known_issuer_the_token_endpoint_is_the_audience() {
    let server = TestAs::start(|_| vec![("POST", "/token".into(), json(200, server_answer()))]).await;
    let pem = include_str!("testdata/ed.pem");
    let client = ClientRegistration {
        client_id: "svc".into(),
        client_secret: None,
        auth_method: "private_key_jwt".into(),
        issuer: None,
    };
    let endpoint = format!("{}/token", server.base);
    let auth = ClientAuth::PrivateKeyJwt {
        pem: pem.to_string(),
        key_id: Some("k".into()),
    };
    client_credentials(
        &http_client().expect("client"),
        &endpoint,
        &client,
        auth,
        None,
        None,
    )
    .await
    .expect("grant");
    let form = server.only("/token").form();
    let claims = verified_claims(
        &form["client_assertion"],
        pem,
        jsonwebtoken::Algorithm::EdDSA,
        "svc",
        &endpoint,
    );
    assert_eq!(claims["aud"], endpoint);
}

#[tokio::test]
async fn a_refused_client_is_named_with_the_as_error() {
    let server = TestAs::start(|_| {
        vec![(
            "POST",
            "/token".into(),
            json(
                401,
                j!({"error": "invalid_client", "error_description": "Invalid client credentials"}),
            ),
        )]
    })
    .await;
    let client = ClientRegistration {
        client_id: "c".into(),
        client_secret: Some("wrong-secret".into()),
        auth_method: "client_secret_basic".into(),
        issuer: None,
    };
    let endpoint = format!("{}/token", server.base);
    let err = client_credentials(
        &http_client().expect("client"),
        &endpoint,
        &client,
        ClientAuth::Basic,
        None,
        None,
    )
    .await
    .expect_err("refused");
    assert_eq!(
        err.to_string(),
        format!("{endpoint} answered HTTP 401: invalid_client (Invalid client credentials)")
    );
    assert!(!format!("{err:?}").contains("wrong-secret"));
}
