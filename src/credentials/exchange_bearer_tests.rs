//! The token-exchange identity against a local token endpoint that records each request:
//! what an exchange sends, the cache (reused, exchanged again once due or refused, never past
//! the inbound token's expiry), refusals (the IdP's, no inbound token, more scope), and one
//! identity per (principal, upstream) through [`crate::credentials::Credentials`].

use super::*;
use crate::config::{Config, Secret};
use crate::credentials::oauth::test_as::{basic_credentials, json, TestAs};
use crate::credentials::Credentials;
use serde_json::json as j;

const INBOUND: &str = "alice-inbound-token";

async fn idp(status: u16, body: serde_json::Value) -> TestAs {
    TestAs::start(|_| vec![("POST", "/token".into(), json(status, body))]).await
}

async fn issuing(expires_in: u64) -> TestAs {
    idp(
        200,
        j!({"access_token": "exchanged-for-jira", "issued_token_type": oauth::token_exchange::ACCESS_TOKEN_TYPE,
            "token_type": "Bearer", "expires_in": expires_in}),
    )
    .await
}

fn config(idp: &TestAs) -> TokenExchange {
    TokenExchange {
        token_endpoint: format!("{}/token", idp.base),
        client_id: "mcpmux".into(),
        client_secret: Some(Secret::new("idp-secret")),
        audience: Some("https://jira.internal/mcp".into()),
        resource: None,
        scopes: vec!["jira:read".into(), "jira:write".into()],
    }
}

fn bearer(idp: &TestAs, inbound: &Arc<InboundTokens>) -> Arc<ExchangeBearer> {
    ExchangeBearer::new(
        GrantKey::new("alice@idp", "jira"),
        config(idp),
        oauth::http_client().expect("client"),
        inbound.clone(),
    )
}

fn exchanges(idp: &TestAs) -> usize {
    idp.paths().iter().filter(|p| *p == "/token").count()
}

fn refused_with(status: u16, stale: &HeaderValue) -> Refusal<'_> {
    Refusal {
        status: Some(status),
        challenge: None,
        stale: Some(stale),
    }
}

#[tokio::test]
async fn an_exchange_sends_the_inbound_token_and_is_reused_until_due() {
    let idp = issuing(300).await;
    let inbound = Arc::new(InboundTokens::default());
    let now = now_unix();
    inbound.note("alice@idp", INBOUND, None, now);
    let jira = bearer(&idp, &inbound);
    assert!(jira.current().is_none() && jira.grant_id().is_none());

    let header = jira.renew_at(Refusal::NONE, now).await.expect("exchanged");
    assert_eq!(header, "Bearer exchanged-for-jira");
    assert!(header.is_sensitive());
    let seen = idp.only("/token");
    let form = seen.form();
    assert_eq!(
        form["grant_type"],
        "urn:ietf:params:oauth:grant-type:token-exchange"
    );
    assert_eq!(form["subject_token"], INBOUND);
    assert_eq!(
        form["subject_token_type"],
        oauth::token_exchange::ACCESS_TOKEN_TYPE
    );
    assert_eq!(form["audience"], "https://jira.internal/mcp");
    assert_eq!(form["scope"], "jira:read jira:write");
    assert!(!form.contains_key("resource"));
    assert_eq!(
        basic_credentials(&seen.header("authorization").expect("Basic")),
        ("mcpmux".to_string(), "idp-secret".to_string())
    );

    // Cached: the next calls and renewals use it without asking the IdP.
    assert_eq!(jira.current(), Some(header.clone()));
    assert_eq!(jira.renew_at(Refusal::NONE, now + 10).await, Ok(header.clone()));
    assert_eq!(exchanges(&idp), 1);
    let id = jira.grant_id().expect("a grant id");
    assert!(!id.contains("exchanged") && !id.contains(INBOUND));

    // Due (a minute before its expiry): exchanged again.
    assert!(jira.renew_at(Refusal::NONE, now + 250).await.is_ok());
    assert_eq!(exchanges(&idp), 2);
    // Refused by the upstream: exchanged again.
    assert!(jira.renew_at(refused_with(401, &header), now + 250).await.is_ok());
    assert_eq!(exchanges(&idp), 3);
}

#[tokio::test]
async fn the_exchanged_token_is_not_used_past_the_inbound_tokens_expiry() {
    let idp = issuing(3600).await;
    let inbound = Arc::new(InboundTokens::default());
    let now = now_unix();
    inbound.note("alice@idp", INBOUND, Some(now + 100), now);
    let jira = bearer(&idp, &inbound);
    jira.renew_at(Refusal::NONE, now).await.expect("exchanged");
    assert!(jira.renew_at(Refusal::NONE, now + 50).await.is_ok());
    assert_eq!(exchanges(&idp), 1);
    // Due by the inbound token's expiry (a fifth of its life before), not the hour it was issued for.
    assert!(jira.renew_at(Refusal::NONE, now + 85).await.is_ok());
    assert_eq!(exchanges(&idp), 2);
    // The inbound token has expired: nothing to exchange, and no fallback.
    let gone = jira.renew_at(Refusal::NONE, now + 100).await.unwrap_err();
    assert!(
        gone.reason.contains("no inbound token to exchange"),
        "{}",
        gone.reason
    );
    assert_eq!(exchanges(&idp), 2);
}

#[tokio::test]
async fn a_refused_exchange_names_the_upstream_the_idp_and_its_error() {
    let idp = idp(
        400,
        j!({"error": "invalid_grant", "error_description": "subject token is not active"}),
    )
    .await;
    let inbound = Arc::new(InboundTokens::default());
    let now = now_unix();
    inbound.note("alice@idp", INBOUND, None, now);
    let jira = bearer(&idp, &inbound);
    let refused = jira.renew_at(Refusal::NONE, now).await.unwrap_err();
    assert_eq!(
        refused,
        SignInNeeded {
            reason: format!(
                "upstream \"jira\": token exchange refused by {}/token: invalid_grant (subject token is not active)",
                idp.base
            ),
            by_person: false,
        }
    );
    assert!(jira.current().is_none(), "no fallback to the inbound token");
    // The same inbound token again (the host retrying): the refusal, without asking again.
    assert_eq!(jira.renew_at(Refusal::NONE, now).await, Err(refused.clone()));
    assert_eq!(exchanges(&idp), 1);
    // A new inbound token is exchanged.
    inbound.note("alice@idp", "alice-inbound-token-2", None, now);
    assert!(jira.renew_at(Refusal::NONE, now).await.is_err());
    assert_eq!(exchanges(&idp), 2);
}

#[tokio::test]
async fn no_inbound_token_or_more_scope_is_refused_without_an_exchange() {
    let idp = issuing(300).await;
    let inbound = Arc::new(InboundTokens::default());
    inbound.note("bob@idp", "bob-inbound-token", None, now_unix());
    let jira = bearer(&idp, &inbound);
    let none = jira.renew_at(Refusal::NONE, now_unix()).await.unwrap_err();
    assert_eq!(
        none.reason,
        "upstream \"jira\": no inbound token to exchange (the host's request carried no bearer \
         token; an API key is never exchanged)"
    );
    assert!(!none.by_person);
    let stale = HeaderValue::from_static("Bearer x");
    let scope = jira
        .renew_at(refused_with(403, &stale), now_unix())
        .await
        .unwrap_err();
    assert!(
        scope.reason.contains("more scope") && !scope.by_person,
        "{}",
        scope.reason
    );
    assert_eq!(exchanges(&idp), 0);
}

fn team_config(idp: &TestAs) -> Config {
    let text = format!(
        "[auth]\n[[auth.api_keys]]\nname = \"k\"\nkey = \"s\"\n\
         [servers.jira]\nurl = \"http://127.0.0.1:9/mcp\"\n\
         auth = {{ mode = \"token_exchange\", token_endpoint = \"{}/token\", client_id = \"mcpmux\", audience = \"jira\" }}\n\
         [servers.legacy]\nurl = \"http://127.0.0.1:9/mcp\"\nauth = {{ mode = \"forward\" }}\n",
        idp.base
    );
    Config::from_toml_str(&text, "t.toml", &|_| None).expect("a valid config")
}

#[tokio::test]
async fn credentials_give_one_exchange_identity_per_principal_and_upstream() {
    let idp = issuing(300).await;
    let config = team_config(&idp);
    let credentials = Credentials::new(&config, None);
    let jira = &config.servers[0];
    credentials.note_inbound("alice@idp", INBOUND, None);
    credentials.note_inbound("bob@idp", "bob-inbound-token", None);

    let alice = credentials.bearer(jira, "alice@idp").expect("a bearer");
    let first = alice.renew(Refusal::NONE).await.expect("exchanged");
    // Another connection of alice's shares the cached token; bob's is his own.
    let again = credentials.bearer(jira, "alice@idp").expect("a bearer");
    assert_eq!(again.current(), Some(first.clone()));
    assert_eq!(again.grant_id(), alice.grant_id());
    let bob = credentials.bearer(jira, "bob@idp").expect("a bearer");
    assert!(bob.current().is_none());
    bob.renew(Refusal::NONE).await.expect("exchanged");
    let subjects: Vec<String> = (idp.seen().iter())
        .map(|s| s.form()["subject_token"].clone())
        .collect();
    assert_eq!(subjects, [INBOUND, "bob-inbound-token"]);
    // A public client (no secret): no Basic header, its id in the form.
    let seen = idp.seen();
    assert!(seen[0].header("authorization").is_none());
    assert_eq!(seen[0].form()["client_id"], "mcpmux");

    // forward: the principal's latest inbound token, no grant id.
    let legacy = credentials
        .bearer(&config.servers[1], "alice@idp")
        .expect("a bearer");
    assert_eq!(
        legacy.current().expect("a header"),
        format!("Bearer {INBOUND}").as_str()
    );
    assert!(legacy.grant_id().is_none());
    assert!(credentials
        .bearer(&config.servers[1], "carol@idp")
        .expect("a bearer")
        .current()
        .is_none());
}
