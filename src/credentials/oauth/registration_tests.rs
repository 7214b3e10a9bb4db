use super::*;
use crate::credentials::oauth::test_as::{discovery_at, json, TestAs};
use serde_json::json as j;

fn metadata_registration(cimd: Option<&str>) -> Registration {
    Registration::Metadata {
        cimd_url: cimd.map(str::to_string),
        redirect_uri: "http://127.0.0.1:8080/oauth/callback".into(),
        client_name: "mcpmux".into(),
    }
}

#[test]
fn the_auth_method_follows_the_as_metadata() {
    let list = |m: &[&str]| m.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(auth_method_for(None, true), "client_secret_basic");
    assert_eq!(
        auth_method_for(Some(&list(&["client_secret_post", "client_secret_basic"])), true),
        "client_secret_basic"
    );
    assert_eq!(
        auth_method_for(Some(&list(&["client_secret_post"])), true),
        "client_secret_post"
    );
    assert_eq!(auth_method_for(Some(&list(&["none"])), true), "none");
    assert_eq!(
        auth_method_for(Some(&list(&["client_secret_basic"])), false),
        "none"
    );
}

#[tokio::test]
async fn a_pre_registered_client_is_used_as_is() {
    let d = discovery_at("http://as.test", Some(&["client_secret_basic"]));
    let client = register(
        &crate::credentials::oauth::http_client().expect("client"),
        &d,
        Registration::PreRegistered {
            client_id: "pre-registered-client".into(),
            client_secret: Some("pre-registered-secret".into()),
        },
    )
    .await
    .expect("registration");
    assert_eq!(client.client_id, "pre-registered-client");
    assert_eq!(client.client_secret.as_deref(), Some("pre-registered-secret"));
    assert_eq!(client.auth_method, "client_secret_basic");
    assert_eq!(client.issuer.as_deref(), Some("http://as.test"));
    assert!(!format!("{client:?}").contains("pre-registered-secret"));
}

#[tokio::test]
async fn cimd_where_the_as_supports_it_and_the_url_is_https() {
    let server = TestAs::start(|_| vec![]).await;
    let mut d = discovery_at(&server.base, None);
    d.as_metadata.client_id_metadata_document_supported = true;
    let cimd = "https://conformance-test.local/client-metadata.json";
    let http = crate::credentials::oauth::http_client().expect("client");
    let client = register(&http, &d, metadata_registration(Some(cimd)))
        .await
        .expect("cimd");
    assert_eq!(client.client_id, cimd);
    assert_eq!(client.auth_method, "none");
    assert_eq!(client.client_secret, None);
    assert!(server.paths().is_empty(), "no DCR: {:?}", server.paths());
    // A plain-http CIMD URL is no CIMD client id: DCR instead (which this server refuses).
    let err = register(
        &http,
        &d,
        metadata_registration(Some("http://127.0.0.1/oauth/client.json")),
    )
    .await
    .expect_err("no register route");
    assert!(err.to_string().contains("/register answered HTTP 404"), "{err}");
}

#[tokio::test]
async fn dynamic_registration_sends_the_client_metadata_and_honours_the_answer() {
    let server = TestAs::start(|_| {
        vec![(
            "POST",
            "/register".into(),
            json(
                201,
                j!({"client_id": "test-client-1", "client_secret": "s3cr3t", "token_endpoint_auth_method": "client_secret_post"}),
            ),
        )]
    })
    .await;
    // CIMD offered by mcpmux but not supported by this AS: DCR.
    let d = discovery_at(&server.base, Some(&["client_secret_post", "none"]));
    let client = register(
        &crate::credentials::oauth::http_client().expect("client"),
        &d,
        metadata_registration(Some("https://gw.example/oauth/client.json")),
    )
    .await
    .expect("dcr");
    assert_eq!(client.client_id, "test-client-1");
    assert_eq!(client.client_secret.as_deref(), Some("s3cr3t"));
    assert_eq!(client.auth_method, "client_secret_post");
    let sent: serde_json::Value = serde_json::from_str(&server.only("/register").body).expect("json body");
    assert_eq!(
        sent["redirect_uris"],
        j!(["http://127.0.0.1:8080/oauth/callback"])
    );
    assert_eq!(sent["grant_types"], j!(["authorization_code", "refresh_token"]));
    assert_eq!(sent["response_types"], j!(["code"]));
    assert_eq!(sent["client_name"], "mcpmux");
    assert_eq!(sent["token_endpoint_auth_method"], "client_secret_post");
}

#[tokio::test]
async fn a_registration_without_method_or_secret_is_a_public_client() {
    let server =
        TestAs::start(|_| vec![("POST", "/register".into(), json(201, j!({"client_id": "pub"})))]).await;
    let d = discovery_at(&server.base, Some(&["none"]));
    let client = register(
        &crate::credentials::oauth::http_client().expect("client"),
        &d,
        metadata_registration(None),
    )
    .await
    .expect("dcr");
    assert_eq!(
        (client.client_id.as_str(), client.auth_method.as_str()),
        ("pub", "none")
    );
    let sent: serde_json::Value = serde_json::from_str(&server.only("/register").body).expect("json body");
    assert_eq!(sent["token_endpoint_auth_method"], "none");
}

#[tokio::test]
async fn a_refused_registration_names_the_as_error() {
    let server = TestAs::start(|_| {
        vec![(
            "POST",
            "/register".into(),
            json(
                400,
                j!({"error": "invalid_redirect_uri", "error_description": "loopback not allowed"}),
            ),
        )]
    })
    .await;
    let d = discovery_at(&server.base, None);
    let err = register(
        &crate::credentials::oauth::http_client().expect("client"),
        &d,
        metadata_registration(None),
    )
    .await
    .expect_err("refused");
    assert_eq!(
        err.to_string(),
        format!(
            "{}/register answered HTTP 400: invalid_redirect_uri (loopback not allowed)",
            server.base
        )
    );
    let mut no_dcr = discovery_at(&server.base, None);
    no_dcr.as_metadata.registration_endpoint = None;
    let err = register(
        &crate::credentials::oauth::http_client().expect("client"),
        &no_dcr,
        metadata_registration(None),
    )
    .await
    .expect_err("no DCR");
    assert!(err.to_string().contains("configure a client_id"), "{err}");
}

#[test]
fn the_cimd_document_names_itself_and_asks_for_refresh_tokens() {
    let doc = cimd_document(
        "https://gw.example/oauth/client.json",
        "mcpmux",
        "https://gw.example/oauth/callback",
    );
    assert_eq!(doc["client_id"], "https://gw.example/oauth/client.json");
    assert_eq!(doc["redirect_uris"], j!(["https://gw.example/oauth/callback"]));
    assert_eq!(doc["grant_types"], j!(["authorization_code", "refresh_token"]));
    assert_eq!(doc["token_endpoint_auth_method"], "none");
}
