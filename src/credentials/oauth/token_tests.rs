use super::*;
use crate::credentials::oauth::pkce::{s256, Pkce};
use crate::credentials::oauth::test_as::{basic_credentials, discovery_at, json, Answer, TestAs};
use crate::credentials::oauth::{authorization_url, http_client};
use serde_json::json as j;

fn client(secret: Option<&str>, method: &str) -> ClientRegistration {
    ClientRegistration {
        client_id: "test client:1".into(),
        client_secret: secret.map(str::to_string),
        auth_method: method.into(),
        issuer: None,
    }
}

async fn token_server(answer: Answer) -> TestAs {
    TestAs::start(move |_| vec![("POST", "/token".into(), answer)]).await
}

#[tokio::test]
async fn the_code_is_redeemed_with_the_verifier_of_the_challenge_and_basic_auth() {
    let server = token_server(json(
        200,
        j!({"access_token": "at-1", "token_type": "bearer", "expires_in": 3600, "refresh_token": "rt-1", "scope": "mcp:basic"}),
    ))
    .await;
    let d = discovery_at(&server.base, Some(&["client_secret_basic"]));
    let c = client(Some("p@ss:word"), "client_secret_basic");
    let pkce = Pkce::new();
    let url =
        authorization_url(&d, &c, "http://127.0.0.1:9/cb", Some("mcp:basic"), "st", &pkce).expect("url");
    let challenge: String = url
        .query_pairs()
        .find(|(k, _)| k == "code_challenge")
        .map(|(_, v)| v.into_owned())
        .expect("challenge");
    let grant = exchange_code(
        &http_client().expect("client"),
        &d,
        &c,
        "the-code",
        "http://127.0.0.1:9/cb",
        &pkce.verifier,
        Some("mcp:basic"),
    )
    .await
    .expect("grant");
    let seen = server.only("/token");
    let form = seen.form();
    assert_eq!(form["grant_type"], "authorization_code");
    assert_eq!(form["code"], "the-code");
    assert_eq!(form["redirect_uri"], "http://127.0.0.1:9/cb");
    assert_eq!(s256(&form["code_verifier"]), challenge);
    assert_eq!(form["resource"], "http://rs.test/mcp");
    assert!(!form.contains_key("client_secret"));
    let (id, secret) = basic_credentials(&seen.header("authorization").expect("Basic"));
    assert_eq!((id.as_str(), secret.as_str()), ("test client:1", "p@ss:word"));
    assert_eq!(
        seen.header("content-type").as_deref(),
        Some("application/x-www-form-urlencoded")
    );

    assert_eq!(grant.access_token, "at-1");
    assert_eq!(grant.token_type, "Bearer");
    assert_eq!(grant.refresh_token.as_deref(), Some("rt-1"));
    assert_eq!(grant.expires_at, Some(grant.obtained_at + 3600));
    assert_eq!(grant.scope.as_deref(), Some("mcp:basic"));
    assert_eq!(grant.token_endpoint, Some(format!("{}/token", server.base)));
    assert_eq!(grant.resource.as_deref(), Some("http://rs.test/mcp"));
    assert_eq!(grant.client.as_ref(), Some(&c));
    let debug = format!("{grant:?}");
    assert!(
        !debug.contains("at-1") && !debug.contains("rt-1") && !debug.contains("p@ss"),
        "{debug}"
    );
}

#[tokio::test]
async fn post_and_none_put_the_client_in_the_form() {
    let server = token_server(json(200, j!({"access_token": "at"}))).await;
    let d = discovery_at(&server.base, None);
    let post = client(Some("sec"), "client_secret_post");
    let grant = exchange_code(
        &http_client().expect("client"),
        &d,
        &post,
        "c",
        "http://x/cb",
        "v",
        None,
    )
    .await
    .expect("post");
    assert_eq!(grant.scope, None);
    assert_eq!(grant.expires_at, None);
    let public = client(None, "none");
    exchange_code(
        &http_client().expect("client"),
        &d,
        &public,
        "c",
        "http://x/cb",
        "v",
        Some("a b"),
    )
    .await
    .expect("none");
    let seen = server.seen();
    let (first, second) = (seen[0].form(), seen[1].form());
    assert_eq!(
        (first["client_id"].as_str(), first["client_secret"].as_str()),
        ("test client:1", "sec")
    );
    assert_eq!(seen[0].header("authorization"), None);
    assert_eq!(second["client_id"], "test client:1");
    assert!(!second.contains_key("client_secret"));
    assert_eq!(seen[1].header("authorization"), None);
}

fn grant_at(endpoint: String, c: ClientRegistration) -> Grant {
    Grant {
        access_token: "old-at".into(),
        token_type: "Bearer".into(),
        refresh_token: Some("old-rt".into()),
        expires_at: Some(1),
        scope: Some("mcp:basic".into()),
        obtained_at: 0,
        token_endpoint: Some(endpoint),
        resource: Some("http://rs.test/mcp".into()),
        client: Some(c),
    }
}

#[tokio::test]
async fn refresh_keeps_the_refresh_token_the_as_did_not_replace() {
    let server = token_server(json(200, j!({"access_token": "new-at", "expires_in": "60"}))).await;
    let old = grant_at(
        format!("{}/token", server.base),
        client(Some("sec"), "client_secret_basic"),
    );
    let fresh = refresh(&http_client().expect("client"), &old)
        .await
        .expect("refresh");
    let seen = server.only("/token");
    let form = seen.form();
    assert_eq!(form["grant_type"], "refresh_token");
    assert_eq!(form["refresh_token"], "old-rt");
    assert_eq!(form["resource"], "http://rs.test/mcp");
    assert!(seen
        .header("authorization")
        .is_some_and(|h| h.starts_with("Basic ")));
    assert_eq!(fresh.access_token, "new-at");
    assert_eq!(fresh.refresh_token.as_deref(), Some("old-rt"));
    assert_eq!(fresh.scope.as_deref(), Some("mcp:basic"));
    assert_eq!(fresh.expires_at, Some(fresh.obtained_at + 60));
    assert_eq!(fresh.client, old.client);
}

#[tokio::test]
async fn refresh_takes_a_rotated_refresh_token() {
    let server = token_server(json(
        200,
        j!({"access_token": "new-at", "refresh_token": "new-rt"}),
    ))
    .await;
    let old = grant_at(format!("{}/token", server.base), client(None, "none"));
    let fresh = refresh(&http_client().expect("client"), &old)
        .await
        .expect("refresh");
    assert_eq!(fresh.refresh_token.as_deref(), Some("new-rt"));
}

#[tokio::test]
async fn a_refused_refresh_says_invalid_grant_and_never_the_token() {
    let server = token_server(json(
        400,
        j!({"error": "invalid_grant", "error_description": "refresh token revoked"}),
    ))
    .await;
    let old = grant_at(
        format!("{}/token", server.base),
        client(Some("the-secret"), "client_secret_post"),
    );
    let err = refresh(&http_client().expect("client"), &old)
        .await
        .expect_err("refused");
    assert_eq!(err.oauth_error(), Some("invalid_grant"));
    let text = format!("{err} {err:?}");
    assert!(text.contains(&format!("{}/token", server.base)), "{text}");
    assert!(!text.contains("old-rt") && !text.contains("the-secret"), "{text}");
}

#[tokio::test]
async fn a_grant_without_refresh_token_cannot_be_refreshed() {
    let mut old = grant_at("http://127.0.0.1:9/token".into(), client(None, "none"));
    old.refresh_token = None;
    assert!(matches!(
        refresh(&http_client().expect("client"), &old).await,
        Err(OAuthError::Invalid(_))
    ));
}

#[tokio::test]
async fn an_oversized_token_response_is_cut_off() {
    let huge = format!(
        r#"{{"access_token":"{}"}}"#,
        "x".repeat(crate::credentials::oauth::wire::BODY_LIMIT)
    );
    let server = TestAs::start(move |_| {
        vec![(
            "POST",
            "/token".into(),
            Answer {
                status: 200,
                body: huge,
            },
        )]
    })
    .await;
    let d = discovery_at(&server.base, None);
    let err = exchange_code(
        &http_client().expect("client"),
        &d,
        &client(None, "none"),
        "c",
        "http://x/cb",
        "v",
        None,
    )
    .await
    .expect_err("too large");
    assert!(err.to_string().contains("larger than"), "{err}");
}

#[test]
fn token_responses_are_read_leniently_but_need_an_access_token() {
    let g = parse_token_response(
        "http://as/token",
        &j!({"access_token": "a", "token_type": "DPoP", "expires_in": 10.0}),
        100,
    )
    .expect("grant");
    assert_eq!((g.token_type.as_str(), g.expires_at), ("DPoP", Some(110)));
    let err =
        parse_token_response("http://as/token", &j!({"token_type": "Bearer"}), 0).expect_err("no token");
    assert_eq!(
        err.to_string(),
        "http://as/token: the token response has no access_token"
    );
}

#[test]
fn client_auth_of_a_registration() {
    assert_eq!(
        ClientAuth::of(&client(Some("s"), "client_secret_basic")).ok(),
        Some(ClientAuth::Basic)
    );
    assert_eq!(ClientAuth::of(&client(None, "none")).ok(), Some(ClientAuth::None));
    assert!(ClientAuth::of(&client(None, "private_key_jwt")).is_err());
    let jwt = ClientAuth::PrivateKeyJwt {
        pem: "-----BEGIN PRIVATE KEY-----secret".into(),
        key_id: Some("k1".into()),
    };
    assert!(!format!("{jwt:?}").contains("secret"));
}
