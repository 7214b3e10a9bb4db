//! JWT access tokens against a local authorization server (RFC 8414 metadata and a JWKS served
//! here): the audience checks, an unreachable server, refused algorithms, key rotation, and a
//! token bound to one profile's resource.

use super::challenge::Failure;
use super::tests::{config, request, through};
use super::*;
use base64::Engine;
use http::{header, StatusCode};
use ring::signature::{Ed25519KeyPair, KeyPair};
use std::time::{SystemTime, UNIX_EPOCH};

pub(super) struct Idp {
    pub(super) issuer: String,
    pub(super) keys: Arc<parking_lot::Mutex<Vec<serde_json::Value>>>,
    pub(super) fetches: Arc<std::sync::atomic::AtomicUsize>,
}

/// An Ed25519 key pair: its PKCS#8 document and its public JWK.
pub(super) fn key_pair(kid: &str) -> (Vec<u8>, serde_json::Value) {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new()).unwrap();
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
    let jwk = serde_json::json!({ "kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "use": "sig", "alg": "EdDSA" });
    (pkcs8.as_ref().to_vec(), jwk)
}

/// Serves RFC 8414 metadata and a JWKS on 127.0.0.1.
pub(super) async fn idp() -> Idp {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let keys = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let fetches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (meta_issuer, served, counted) = (issuer.clone(), keys.clone(), fetches.clone());
    let app = axum::Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            axum::routing::get(move || {
                let doc =
                    serde_json::json!({ "issuer": meta_issuer, "jwks_uri": format!("{meta_issuer}/jwks") });
                async move { ([(header::CONTENT_TYPE, "application/json")], doc.to_string()) }
            }),
        )
        .route(
            "/jwks",
            axum::routing::get(move || {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let doc = serde_json::json!({ "keys": served.lock().clone() });
                async move { ([(header::CONTENT_TYPE, "application/json")], doc.to_string()) }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    Idp {
        issuer,
        keys,
        fetches,
    }
}

pub(super) fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

pub(super) fn sign(pkcs8: &[u8], kid: &str, claims: &serde_json::Value) -> String {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, claims, &jsonwebtoken::EncodingKey::from_ed_der(pkcs8)).unwrap()
}

fn jwt_auth(issuer: &str) -> Arc<Authenticator> {
    let c = config(&format!(
        "issuer = \"{issuer}\"\naudience = [\"https://mcp.example.com/mcp\", \"other\"]\n"
    ));
    Authenticator::from_config(&c).unwrap()
}

/// A local authorization server publishing key `k1`, that key's private half, and an
/// authenticator trusting the server.
async fn signing_idp() -> (Idp, Vec<u8>, Arc<Authenticator>) {
    let idp = idp().await;
    let (pkcs8, jwk) = key_pair("k1");
    idp.keys.lock().push(jwk);
    let auth = jwt_auth(&idp.issuer);
    (idp, pkcs8, auth)
}

async fn verdict(auth: &Authenticator, token: &str) -> Result<Arc<Principal>, Failure> {
    auth.verify(token).await
}

#[tokio::test]
async fn only_a_valid_jwt_passes_the_audience_checks() {
    let (idp, pkcs8, auth) = signing_idp().await;
    let base = |aud: serde_json::Value, exp: u64| {
        serde_json::json!({ "iss": idp.issuer, "sub": "alice", "aud": aud, "exp": exp, "scope": "mcp:tools mcp:write",
                            "groups": ["eng"], "client_id": "cli" })
    };
    let valid = sign(
        &pkcs8,
        "k1",
        &base("https://mcp.example.com/mcp".into(), now() + 300),
    );
    let principal = verdict(&auth, &valid).await.unwrap();
    assert_eq!(principal.name, "alice");
    assert_eq!(principal.issuer.as_deref(), Some(idp.issuer.as_str()));
    assert_eq!(principal.client_id.as_deref(), Some("cli"));
    assert_eq!(principal.groups, ["eng"]);
    assert_eq!(principal.scopes, ["mcp:tools", "mcp:write"]);
    // The validated token rides along (for token_exchange), with its expiry.
    let inbound = principal.token.as_ref().expect("the inbound token");
    assert_eq!(inbound.expose(), valid);
    assert!(inbound.expires_at().is_some_and(|exp| exp > now() + 200));
    assert_eq!(principal.grant_principal(), format!("alice@{}", idp.issuer));
    // Any one of the accepted audiences, also in a list.
    let listed = sign(
        &pkcs8,
        "k1",
        &base(serde_json::json!(["x", "other"]), now() + 300),
    );
    assert!(verdict(&auth, &listed).await.is_ok());

    let wrong_aud = sign(
        &pkcs8,
        "k1",
        &base("https://elsewhere.example/mcp".into(), now() + 300),
    );
    let mut no_aud = base("x".into(), now() + 300);
    no_aud.as_object_mut().unwrap().remove("aud");
    let no_aud = sign(&pkcs8, "k1", &no_aud);
    let expired = sign(
        &pkcs8,
        "k1",
        &base("https://mcp.example.com/mcp".into(), now() - 120),
    );
    let (other_key, _) = key_pair("k1");
    let untrusted = sign(
        &other_key,
        "k1",
        &base("https://mcp.example.com/mcp".into(), now() + 300),
    );
    let mut wrong_iss = base("https://mcp.example.com/mcp".into(), now() + 300);
    wrong_iss["iss"] = "https://evil.example".into();
    let wrong_iss = sign(&pkcs8, "k1", &wrong_iss);
    let mut future = base("https://mcp.example.com/mcp".into(), now() + 300);
    future["nbf"] = (now() + 600).into();
    let future = sign(&pkcs8, "k1", &future);
    for (what, token) in [
        ("wrong aud", wrong_aud),
        ("missing aud", no_aud),
        ("expired", expired),
        ("untrusted key", untrusted),
        ("wrong iss", wrong_iss),
        ("nbf in the future", future),
    ] {
        match verdict(&auth, &token).await {
            Err(Failure::InvalidToken(why)) => assert!(!why.is_empty(), "{what}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    // Within the 60 s skew an expired token still passes.
    let just = sign(
        &pkcs8,
        "k1",
        &base("https://mcp.example.com/mcp".into(), now() - 20),
    );
    assert!(verdict(&auth, &just).await.is_ok());
}

#[tokio::test]
async fn an_unreachable_authorization_server_is_503_not_invalid_token() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let issuer = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let auth = jwt_auth(&issuer);
    let (pkcs8, _) = key_pair("k1");
    let claims = serde_json::json!({ "iss": issuer, "sub": "alice", "aud": "other", "exp": now() + 300 });
    let token = sign(&pkcs8, "k1", &claims);
    for _ in 0..2 {
        // The second try falls in the refetch interval and is refused the same way.
        match verdict(&auth, &token).await {
            Err(Failure::Unavailable(why)) => assert!(why.contains("discover"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
    let (status, challenge, _, _) = through(auth, request(Some(&format!("Bearer {token}")), "/mcp")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(challenge.is_empty(), "{challenge}");
}

#[tokio::test]
async fn none_and_symmetric_algorithms_are_refused() {
    let (idp, _, auth) = signing_idp().await;
    let b64 = |v: serde_json::Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let claims = serde_json::json!({ "iss": idp.issuer, "sub": "eve", "aud": "other", "exp": now() + 300 });
    let none = format!(
        "{}.{}.",
        b64(serde_json::json!({ "alg": "none", "kid": "k1" })),
        b64(claims.clone())
    );
    assert!(matches!(
        verdict(&auth, &none).await,
        Err(Failure::InvalidToken(_))
    ));
    let hs = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(b"k1"),
    )
    .unwrap();
    match verdict(&auth, &hs).await {
        Err(Failure::InvalidToken(why)) => assert!(why.contains("HS256"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_rotated_key_is_fetched_once_per_interval() {
    let idp = idp().await;
    let (old, jwk) = key_pair("old");
    idp.keys.lock().push(jwk);
    let auth = jwt_auth(&idp.issuer);
    let claims = serde_json::json!({ "iss": idp.issuer, "sub": "alice", "aud": "other", "exp": now() + 300 });
    assert!(verdict(&auth, &sign(&old, "old", &claims)).await.is_ok());
    assert!(verdict(&auth, &sign(&old, "old", &claims)).await.is_ok());
    assert_eq!(
        idp.fetches.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the key set is cached"
    );
    // A token with an unknown kid within the interval does not make the gateway fetch again.
    let (new, jwk) = key_pair("new");
    let rotated = sign(&new, "new", &claims);
    assert!(verdict(&auth, &rotated).await.is_err());
    assert!(verdict(&auth, &rotated).await.is_err());
    assert_eq!(idp.fetches.load(std::sync::atomic::Ordering::SeqCst), 1);
    idp.keys.lock().push(jwk);
    // Past the interval the unknown kid fetches the set again, and the new key is there.
    let set =
        jwks::Jwks::new(idp.issuer.clone(), None).refetching_every(std::time::Duration::from_millis(50));
    assert!(set
        .keys_for(Some("new"), jsonwebtoken::Algorithm::EdDSA)
        .await
        .is_ok());
    idp.keys.lock().clear();
    let (_, newest) = key_pair("newest");
    assert!(set
        .keys_for(Some("newest"), jsonwebtoken::Algorithm::EdDSA)
        .await
        .is_err());
    idp.keys.lock().push(newest);
    assert!(
        set.keys_for(Some("newest"), jsonwebtoken::Algorithm::EdDSA)
            .await
            .is_err(),
        "within the interval"
    );
    tokio::time::sleep(std::time::Duration::from_millis(80)).await;
    assert!(set
        .keys_for(Some("newest"), jsonwebtoken::Algorithm::EdDSA)
        .await
        .is_ok());
    // The cached key of an earlier fetch is still known without a fetch.
    let before = idp.fetches.load(std::sync::atomic::Ordering::SeqCst);
    assert!(set
        .keys_for(Some("newest"), jsonwebtoken::Algorithm::EdDSA)
        .await
        .is_ok());
    assert_eq!(idp.fetches.load(std::sync::atomic::Ordering::SeqCst), before);
    let _ = rotated;
}

#[tokio::test]
async fn a_token_for_a_profiles_resource_passes_on_that_profile_only() {
    let (idp, pkcs8, auth) = signing_idp().await;
    let review = "https://mcp.example.com/mcp/review";
    let claims = serde_json::json!({ "iss": idp.issuer, "sub": "alice", "aud": review, "exp": now() + 300 });
    let token = sign(&pkcs8, "k1", &claims);
    assert!(matches!(
        verdict(&auth, &token).await,
        Err(Failure::InvalidToken(_))
    ));
    assert!(auth.verify_for(&token, Some(review)).await.is_ok());
    let elsewhere = auth
        .verify_for(&token, Some("https://mcp.example.com/mcp/other"))
        .await;
    assert!(matches!(elsewhere, Err(Failure::InvalidToken(_))));
    // The gateway's own audience still passes on a profile.
    let main = serde_json::json!({ "iss": idp.issuer, "sub": "alice", "aud": "other", "exp": now() + 300 });
    assert!(auth
        .verify_for(&sign(&pkcs8, "k1", &main), Some(review))
        .await
        .is_ok());
}
