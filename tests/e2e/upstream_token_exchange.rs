//! mcpmux's RFC 8693 token exchange (`credentials::oauth::token_exchange`, the protocol of
//! `auth = { mode = "token_exchange" }`) against a real authorization server: oidc-provider
//! with a `registerGrantType` handler for the token-exchange grant (`tests/fixtures/upstream_idp.mjs`),
//! whose exchanged token the fixture's resource server accepts only with `aud` = the resource.
//! The gateway mode's identity (`Credentials::bearer`) is tested here too; the whole path
//! (host → gateway → per-principal upstream connection) needs the per-principal connections.

use crate::support::upstream_idp::{UpstreamIdp, CC_CLIENT_ID, CC_CLIENT_SECRET};
use mcpmux::credentials::bearer::Refusal;
use mcpmux::credentials::grant::ClientRegistration;
use mcpmux::credentials::oauth::{self, ClientAuth, TokenExchange};
use mcpmux::credentials::Credentials;
use std::time::Duration;

/// The RFC 8693 grant type (as the IdP's log names it).
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";

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

/// A token the fixture's AS issued for its resource server (client credentials, `mcp:tools`):
/// what a host presents, and the subject of an exchange.
async fn host_token(idp: &UpstreamIdp, http: &reqwest::Client) -> mcpmux::credentials::grant::Grant {
    let token_endpoint = format!("{}/token", idp.issuer);
    let scope = Some("mcp:tools");
    oauth::client_credentials(
        http,
        &token_endpoint,
        &client(),
        ClientAuth::Basic,
        scope,
        Some(&idp.resource),
    )
    .await
    .unwrap_or_else(|e| panic!("client credentials: {e}\n{}", idp.log()))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_exchanged_at_oidc_provider_is_for_the_resource_and_a_bad_subject_is_refused() {
    let _suite = crate::suite::enter(module_path!());
    let idp = UpstreamIdp::start(Duration::from_secs(600));
    let http = oauth::http_client().expect("the OAuth client");
    let token_endpoint = format!("{}/token", idp.issuer);

    // A subject token this AS issued (client credentials), then exchanged for the resource.
    let subject = host_token(&idp, &http).await;
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

/// The token-exchange identity mcpmux gives a principal (`Credentials::bearer` of a
/// `token_exchange` upstream behind `[auth]`), against oidc-provider: the principal's latest
/// inbound token (`Credentials::note_inbound`) is exchanged once for a token the resource server
/// accepts, the result is shared by the principal's connections, and a subject token the IdP
/// refuses comes back as the refusal naming the upstream, the IdP and its `error`.
#[tokio::test(flavor = "multi_thread")]
async fn credentials_exchange_a_principals_inbound_token_once_and_name_the_idps_refusal() {
    let _suite = crate::suite::enter(module_path!());
    let idp = UpstreamIdp::start(Duration::from_secs(600));
    let http = oauth::http_client().expect("the OAuth client");
    let token_endpoint = format!("{}/token", idp.issuer);
    // The host's inbound token: one this IdP issued (as [auth] would have validated it).
    let inbound = oauth::client_credentials(
        &http,
        &token_endpoint,
        &client(),
        ClientAuth::Basic,
        Some("mcp:tools"),
        Some(&idp.resource),
    )
    .await
    .unwrap_or_else(|e| panic!("client credentials: {e}\n{}", idp.log()));
    let text = format!(
        "[auth]\n[[auth.api_keys]]\nname = \"ops\"\nkey = \"ops-key-0123456789\"\n\
         [servers.jira]\nurl = \"{resource}\"\n\
         auth = {{ mode = \"token_exchange\", token_endpoint = \"{token_endpoint}\", client_id = \"{CC_CLIENT_ID}\", \
         client_secret = \"{CC_CLIENT_SECRET}\", resource = \"{resource}\" }}\n",
        resource = idp.resource
    );
    let config = mcpmux::Config::from_toml_str(&text, "team.toml", &|_| None).expect("a valid config");
    let jira = (config.servers.iter()).find(|s| s.name == "jira").expect("jira");
    let credentials = Credentials::new(&config, None);
    let alice = format!("{CC_CLIENT_ID}@{}", idp.issuer);
    credentials.note_inbound(&alice, &inbound.access_token, inbound.expires_at);

    let bearer = credentials.bearer(jira, &alice).expect("a token_exchange bearer");
    let header =
        (bearer.renew(Refusal::NONE).await).unwrap_or_else(|e| panic!("the exchange: {e}\n{}", idp.log()));
    let exchanged = header
        .to_str()
        .expect("text")
        .strip_prefix("Bearer ")
        .expect("a Bearer header");
    assert_ne!(exchanged, inbound.access_token, "the inbound token itself");
    assert_eq!(
        whoami(&idp.resource, exchanged).await,
        Ok(format!("sub={CC_CLIENT_ID}"))
    );
    // Another connection of the same principal: the cached token, no second exchange.
    let again = credentials.bearer(jira, &alice).expect("a bearer");
    assert_eq!(again.current(), Some(header.clone()));
    assert_eq!(again.renew(Refusal::NONE).await, Ok(header.clone()));
    assert!(again.grant_id().is_some_and(|id| !exchanged.contains(&id)));
    assert_eq!(idp.issued_with(TOKEN_EXCHANGE), 1, "{}", idp.log());

    // A principal whose inbound token the IdP never issued: refused, naming the IdP's error.
    credentials.note_inbound("mallory@elsewhere", "not.a-token.at-all", None);
    let mallory = credentials.bearer(jira, "mallory@elsewhere").expect("a bearer");
    let refused = mallory.renew(Refusal::NONE).await.expect_err("refused");
    assert!(
        refused.reason.starts_with(&format!(
            "upstream \"jira\": token exchange refused by {token_endpoint}: invalid_grant"
        )),
        "{}",
        refused.reason
    );
    assert!(!refused.by_person);
    assert!(mallory.current().is_none(), "no fallback to the inbound token");
    assert!(
        !refused.reason.contains("not.a-token.at-all"),
        "{}",
        refused.reason
    );
    assert_eq!(idp.issued_with(TOKEN_EXCHANGE), 1);
}

/// The whole path of `mode = "token_exchange"`: a host presents a token the gateway's `[auth]`
/// validates; the gateway exchanges it at the IdP for the upstream (whose `whoami` then names
/// the host's subject); an exchange the IdP refuses (`invalid_target`: a resource it issues no
/// token for) reaches the host as -32000 naming the IdP's error; an API key has no token to
/// exchange. The policy applies first: an upstream the host may use nothing of gets no exchange.
#[tokio::test(flavor = "multi_thread")]
async fn a_hosts_token_is_exchanged_for_the_upstream_and_a_refused_exchange_is_a_32000() {
    use crate::support::mcp::RawSession;
    use crate::support::serve::ServeProcess;
    use crate::support::{path_str, scratch_dir};
    use serde_json::json;

    let _suite = crate::suite::enter(module_path!());
    let idp = UpstreamIdp::start(Duration::from_secs(600));
    let http = oauth::http_client().expect("the OAuth client");
    let token_endpoint = format!("{}/token", idp.issuer);
    // The host's own token, from the IdP the gateway's [auth] trusts.
    let host = host_token(&idp, &http).await;
    let dir = scratch_dir("token-exchange-gateway");
    let exchange = |resource: &str| {
        format!(
            "{{ mode = \"token_exchange\", token_endpoint = {token_endpoint:?}, client_id = {CC_CLIENT_ID:?}, \
             client_secret = {CC_CLIENT_SECRET:?}, resource = {resource:?} }}"
        )
    };
    let text = format!(
        "[auth]\nissuer = {issuer:?}\naudience = [{resource:?}]\n\
         [[auth.api_keys]]\nname = \"ci-bot\"\nkey = \"ci-bot-key-0123456789\"\n\n\
         [servers.up]\nurl = {resource:?}\nauth = {up}\n\n\
         [servers.elsewhere]\nurl = {resource:?}\nauth = {elsewhere}\n\n\
         [servers.hidden]\nurl = {resource:?}\nauth = {up}\n\n\
         [servers.fwd]\nurl = {resource:?}\nauth = {{ mode = \"forward\" }}\n\n\
         [[policy]]\nprincipals = [{CC_CLIENT_ID:?}, \"ci-bot\"]\nallow = [\"up__*\", \"elsewhere__*\", \"fwd__*\"]\n\n\
         [vault]\npath = {vault:?}\n",
        issuer = idp.issuer,
        resource = idp.resource,
        up = exchange(&idp.resource),
        elsewhere = exchange("http://127.0.0.1:9/not-served"),
        vault = path_str(&dir.join("vault")),
    );
    let mut gw = ServeProcess::start(&dir, "", &text, &dir, &[]);
    let mut opened = None;
    for _ in 0..90 {
        if let Some(status) = gw.guard.try_wait() {
            panic!("the gateway exited ({status}):\n{}", gw.log());
        }
        if let Ok(session) = RawSession::try_open_as(&gw.url(), &host.access_token).await {
            opened = Some(session);
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let session = opened.unwrap_or_else(|| panic!("the gateway never answered:\n{}", gw.log()));
    let whoami = session.tool_text("up__whoami", json!({})).await;
    assert_eq!(whoami, format!("sub={CC_CLIENT_ID}"), "{}", gw.log());
    assert_eq!(idp.issued_with(TOKEN_EXCHANGE), 1, "{}", idp.log());
    // The next call reuses the exchanged token.
    session.tool_text("up__whoami", json!({})).await;
    assert_eq!(idp.issued_with(TOKEN_EXCHANGE), 1, "{}", idp.log());

    let refused = (session
        .call(
            "tools/call",
            json!({"name": "elsewhere__whoami", "arguments": {}}),
        )
        .await)
        .to_string();
    assert!(
        refused.contains("-32000")
            && refused.contains("token exchange refused by")
            && refused.contains("invalid_target"),
        "{refused}"
    );
    assert!(!refused.contains(&host.access_token), "{refused}");

    // `forward` sends the host's own token (the resource server accepts it: it was issued for
    // it), warned about at start; no exchange for it.
    let forwarded = session.tool_text("fwd__whoami", json!({})).await;
    assert_eq!(forwarded, format!("sub={CC_CLIENT_ID}"), "{}", gw.log());
    assert_eq!(idp.issued_with(TOKEN_EXCHANGE), 1, "{}", idp.log());
    assert!(
        gw.log().contains("token passthrough"),
        "no warning for forward:\n{}",
        gw.log()
    );

    let key = RawSession::open_as(&gw.url(), "ci-bot-key-0123456789").await;
    let none = (key
        .call("tools/call", json!({"name": "up__whoami", "arguments": {}}))
        .await)
        .to_string();
    assert!(none.contains("no inbound token to exchange"), "{none}");
    assert!(
        !gw.log().contains(&host.access_token),
        "the host's token is in the log"
    );
}
