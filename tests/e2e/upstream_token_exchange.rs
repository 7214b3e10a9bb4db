//! mcpmux's RFC 8693 token exchange (`credentials::oauth::token_exchange`, the protocol of
//! `auth = { mode = "token_exchange" }`) against a real authorization server: oidc-provider
//! with a `registerGrantType` handler for the token-exchange grant (`tests/fixtures/upstream_idp.mjs`),
//! whose exchanged token the fixture's resource server accepts only with `aud` = the resource.
//! The gateway mode itself needs `[auth]` with per-principal upstream connections, a later slice.

use crate::support::upstream_idp::{UpstreamIdp, CC_CLIENT_ID, CC_CLIENT_SECRET};
use mcpmux::credentials::grant::ClientRegistration;
use mcpmux::credentials::oauth::{self, ClientAuth, TokenExchange};
use std::time::Duration;

fn client() -> ClientRegistration {
    ClientRegistration {
        client_id: CC_CLIENT_ID.into(),
        client_secret: Some(CC_CLIENT_SECRET.into()),
        auth_method: "client_secret_basic".into(),
        issuer: None,
    }
}

/// `whoami` at the resource server with `token`: its text, or the HTTP status and body.
async fn whoami(resource: &str, token: &str) -> Result<String, String> {
    let call = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "whoami", "arguments": {} }
    });
    let response = reqwest::Client::new()
        .post(resource)
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .body(call.to_string())
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response.text().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("HTTP {status}: {body}"));
    }
    let doc: serde_json::Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
    doc["result"]["content"][0]["text"]
        .as_str()
        .map(str::to_string)
        .ok_or(body)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_exchanged_at_oidc_provider_is_for_the_resource_and_a_bad_subject_is_refused() {
    let _suite = crate::suite::enter(module_path!());
    let idp = UpstreamIdp::start(Duration::from_secs(600));
    let http = oauth::http_client().expect("the OAuth client");
    let token_endpoint = format!("{}/token", idp.issuer);

    // A subject token this AS issued (client credentials), then exchanged for the resource.
    let subject = oauth::client_credentials(
        &http,
        &token_endpoint,
        &client(),
        ClientAuth::Basic,
        Some("mcp:tools"),
        Some(&idp.resource),
    )
    .await
    .unwrap_or_else(|e| panic!("client credentials: {e}\n{}", idp.log()));
    let mut request = TokenExchange::of_access_token(subject.access_token.clone());
    request.resource = Some(idp.resource.clone());
    let exchanged = oauth::token_exchange(&http, &token_endpoint, &client(), ClientAuth::Basic, &request)
        .await
        .unwrap_or_else(|e| panic!("token exchange: {e}\n{}", idp.log()));
    assert_ne!(exchanged.access_token, subject.access_token);
    assert_eq!(exchanged.resource.as_deref(), Some(idp.resource.as_str()));
    assert!(exchanged.expires_at.is_some(), "no expiry");
    assert_eq!(
        whoami(&idp.resource, &exchanged.access_token).await,
        Ok(format!("sub={CC_CLIENT_ID}"))
    );

    // A subject token the AS never issued: refused, the error naming the AS's `error`.
    let mut forged = TokenExchange::of_access_token("not.a-token.at-all".into());
    forged.resource = Some(idp.resource.clone());
    let refused = oauth::token_exchange(&http, &token_endpoint, &client(), ClientAuth::Basic, &forged).await;
    let error = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        error.contains("invalid_grant"),
        "not refused as invalid_grant: {error:?}"
    );
    assert!(
        !error.contains(&subject.access_token),
        "the error shows a token: {error}"
    );
}
