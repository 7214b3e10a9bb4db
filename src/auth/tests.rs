//! Authentication refused by default: each refusal (no credential, unknown key, each bad JWT,
//! a token in the query, missing scopes) and the challenges and metadata that go with them.

use super::challenge::{www_authenticate, Failure};
use super::layer::AuthLayer;
use super::*;
use axum::response::IntoResponse;
use base64::Engine;
use http::{header, Request, StatusCode};
use ring::signature::{Ed25519KeyPair, KeyPair};
use std::time::{SystemTime, UNIX_EPOCH};
use tower::{Layer, ServiceExt};

const KEY: &str = "k-123";

fn config(extra: &str) -> Config {
    let text = format!(
        "[gateway]\npublic_url = \"https://mcp.example.com/mcp\"\n[auth]\nscopes_supported = [\"mcp:tools\", \"offline_access\"]\n{extra}\n\
         [[auth.api_keys]]\nname = \"ci-bot\"\nkey = \"{KEY}\"\ngroups = [\"ci\"]\n"
    );
    Config::from_toml_str(&text, "t.toml", &|_| None).unwrap()
}

/// The status, `WWW-Authenticate` and body of `request` through the layer, and the principal
/// the handler saw (with whether the Authorization header reached it).
async fn through(
    auth: Arc<Authenticator>,
    request: Request<axum::body::Body>,
) -> (StatusCode, String, String, Option<(Principal, bool)>) {
    let seen = Arc::new(parking_lot::Mutex::new(None));
    let record = seen.clone();
    let inner = tower::service_fn(move |req: Request<axum::body::Body>| {
        let record = record.clone();
        async move {
            let principal = req.extensions().get::<Arc<Principal>>().map(|p| (**p).clone());
            *record.lock() = principal.map(|p| (p, req.headers().contains_key(header::AUTHORIZATION)));
            Ok::<_, std::convert::Infallible>(StatusCode::OK.into_response())
        }
    });
    let response = AuthLayer::new(auth).layer(inner).oneshot(request).await.unwrap();
    let status = response.status();
    let challenge = (response.headers().get(header::WWW_AUTHENTICATE))
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
    let principal = seen.lock().clone();
    (
        status,
        challenge,
        String::from_utf8_lossy(&body).into_owned(),
        principal,
    )
}

fn request(authorization: Option<&str>, uri: &str) -> Request<axum::body::Body> {
    let mut builder = Request::builder().method("POST").uri(uri);
    if let Some(value) = authorization {
        builder = builder.header(header::AUTHORIZATION, value);
    }
    builder.body(axum::body::Body::empty()).unwrap()
}

#[tokio::test]
async fn no_credentials_is_401_with_metadata_and_scope_and_no_error() {
    let auth = Authenticator::from_config(&config("")).unwrap();
    for value in [None, Some("Basic dXNlcjpwYXNz")] {
        let (status, challenge, body, seen) = through(auth.clone(), request(value, "/mcp")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(
            challenge,
            "Bearer resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\", scope=\"mcp:tools\""
        );
        assert!(!challenge.contains("error="), "{challenge}");
        assert!(
            body.contains("\"jsonrpc\":\"2.0\"") && body.contains("-32600"),
            "{body}"
        );
        assert!(seen.is_none(), "the handler never runs");
    }
}

#[tokio::test]
async fn an_api_key_is_the_principal_and_its_header_goes_no_further() {
    let auth = Authenticator::from_config(&config("")).unwrap();
    let (status, _, _, seen) = through(auth, request(Some(&format!("Bearer {KEY}")), "/mcp")).await;
    assert_eq!(status, StatusCode::OK);
    let (principal, header_kept) = seen.unwrap();
    assert_eq!(
        (principal.name.as_str(), principal.groups.as_slice()),
        ("ci-bot", &["ci".to_string()][..])
    );
    // No `scopes` and no required ones: the key holds none (not every supported one).
    assert!(principal.issuer.is_none() && principal.scopes.is_empty());
    // An API key is never exchanged or forwarded: the principal does not carry it.
    assert!(principal.token.is_none());
    assert_eq!(principal.grant_principal(), "key:ci-bot");
    assert!(
        !header_kept,
        "the Authorization header is removed before the handler"
    );
}

#[tokio::test]
async fn a_wrong_key_is_401_invalid_token() {
    let auth = Authenticator::from_config(&config("")).unwrap();
    for value in ["Bearer k-124", "Bearer a.b.c", "bearer x"] {
        let (status, challenge, _, seen) = through(auth.clone(), request(Some(value), "/mcp")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{value}");
        assert!(
            challenge.starts_with("Bearer error=\"invalid_token\""),
            "{challenge}"
        );
        assert!(seen.is_none());
    }
}

#[tokio::test]
async fn a_token_in_the_query_or_a_malformed_header_is_400() {
    let auth = Authenticator::from_config(&config("")).unwrap();
    let (status, challenge, _, seen) = through(
        auth.clone(),
        request(
            Some(&format!("Bearer {KEY}")),
            &format!("/mcp?access_token={KEY}"),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        challenge.contains("error=\"invalid_request\"") && !challenge.contains(KEY),
        "{challenge}"
    );
    assert!(seen.is_none());
    let (status, _, _, _) = through(auth.clone(), request(Some("Bearer"), "/mcp")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _, _, _) = through(auth, request(Some("Bearer a b"), "/mcp")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[test]
fn challenges_name_every_needed_scope_once() {
    let url = "https://m/.well-known/oauth-protected-resource/mcp";
    let supported = vec!["a".to_string()];
    assert_eq!(
        www_authenticate(
            url,
            &supported,
            &Failure::InsufficientScope(vec!["a".into(), "b".into()])
        ),
        format!("Bearer error=\"insufficient_scope\", resource_metadata=\"{url}\", scope=\"a b\"")
    );
    let bad = www_authenticate(
        url,
        &supported,
        &Failure::InvalidToken("the \"aud\" is wrong\n".into()),
    );
    assert!(
        bad.starts_with("Bearer error=\"invalid_token\", error_description=\"the ?aud? is wrong?\""),
        "{bad}"
    );
    assert_eq!(
        www_authenticate(url, &[], &Failure::NoCredentials),
        format!("Bearer resource_metadata=\"{url}\"")
    );
}

#[test]
fn step_up_needs_every_scope_of_the_matching_rules() {
    let c = config(
        "issuer = \"https://idp.example\"\nrequired_scopes = [\"mcp:tools\"]\n\
         [[auth.step_up]]\ntools = [\"fs__write_*\"]\nscopes = [\"mcp:write\"]\n",
    );
    let auth = Authenticator::from_config(&c).unwrap();
    let low = Principal {
        name: "alice".into(),
        issuer: Some("https://idp.example".into()),
        client_id: None,
        groups: vec![],
        scopes: vec!["mcp:tools".into()],
        token: None,
        claims: Vec::new(),
    };
    assert_eq!(auth.step_up(&low, "fs__read_file"), None);
    assert_eq!(
        auth.step_up(&low, "fs__write_file"),
        Some(vec!["mcp:tools".to_string(), "mcp:write".to_string()])
    );
    let high = Principal {
        scopes: vec!["mcp:tools".into(), "mcp:write".into()],
        ..low.clone()
    };
    assert_eq!(auth.step_up(&high, "fs__write_file"), None);
    let none = Principal {
        scopes: vec![],
        ..low
    };
    assert_eq!(
        auth.check_required(&none),
        Err(Failure::InsufficientScope(vec!["mcp:tools".into()]))
    );
}

#[test]
fn a_broader_scope_satisfies_step_up_and_required_scopes() {
    let c = config(
        "issuer = \"https://idp.example\"\nrequired_scopes = [\"mcp:tools\"]\n\
         [[auth.step_up]]\ntools = [\"fs__write_*\"]\nscopes = [\"mcp:write:files\"]\n",
    );
    let auth = Authenticator::from_config(&c).unwrap();
    let principal = |scopes: &[&str]| Principal {
        name: "alice".into(),
        issuer: Some("https://idp.example".into()),
        client_id: None,
        groups: vec![],
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
        token: None,
        claims: Vec::new(),
    };
    // `mcp` is above both `mcp:tools` and `mcp:write:files`.
    let broad = principal(&["mcp"]);
    assert_eq!(auth.check_required(&broad), Ok(()));
    assert_eq!(auth.step_up(&broad, "fs__write_file"), None);
    // `mcp:write` covers `mcp:write:files`; `mcp:writer` does not, nor does a narrower scope.
    assert_eq!(
        auth.step_up(&principal(&["mcp:tools", "mcp:write"]), "fs__write_file"),
        None
    );
    for lacking in [
        &["mcp:tools", "mcp:writer"][..],
        &["mcp:tools", "mcp:write:files:big"],
    ] {
        assert_eq!(
            auth.step_up(&principal(lacking), "fs__write_file"),
            Some(vec!["mcp:tools".to_string(), "mcp:write:files".to_string()]),
            "{lacking:?}"
        );
    }
}

#[tokio::test]
async fn scope_implies_expands_what_a_key_and_a_token_hold() {
    let idp = idp().await;
    let (pkcs8, jwk) = key_pair("k1");
    idp.keys.lock().push(jwk);
    let c = config(&format!(
        "issuer = \"{}\"\n[auth.scope_implies]\n\"Mcp.Admin\" = [\"Mcp.Write\"]\n\"Mcp.Write\" = [\"Mcp.Tools\"]\n\
         mcp = [\"files:read\"]\n",
        idp.issuer
    ));
    let auth = Authenticator::from_config(&c).unwrap();
    let claims = |scope: &str| {
        serde_json::json!({ "iss": idp.issuer, "sub": "alice", "aud": "https://mcp.example.com/mcp",
                            "exp": now() + 300, "scope": scope })
    };
    // Transitively: Admin implies Write, which implies Tools.
    let admin = auth
        .verify(&sign(&pkcs8, "k1", &claims("Mcp.Admin")))
        .await
        .unwrap();
    assert_eq!(admin.scopes, ["Mcp.Admin", "Mcp.Tools", "Mcp.Write"]);
    // A scope below a key gets nothing from it; one above it gets what the key implies.
    let narrow = auth
        .verify(&sign(&pkcs8, "k1", &claims("mcp:tools")))
        .await
        .unwrap();
    assert_eq!(narrow.scopes, ["mcp:tools"]);
    let top = auth.verify(&sign(&pkcs8, "k1", &claims("mcp"))).await.unwrap();
    assert_eq!(top.scopes, ["mcp", "files:read"]);
    let tools = auth
        .verify(&sign(&pkcs8, "k1", &claims("Mcp.Tools")))
        .await
        .unwrap();
    assert_eq!(tools.scopes, ["Mcp.Tools"], "implication goes one way only");
}

#[test]
fn owners_never_collide_across_kinds_and_issuers() {
    let key = Principal {
        name: "alice".into(),
        issuer: None,
        client_id: None,
        groups: vec![],
        scopes: vec![],
        token: None,
        claims: Vec::new(),
    };
    let jwt = Principal {
        issuer: Some("api-key".into()),
        ..key.clone()
    };
    let other = Principal {
        issuer: Some("https://other.example".into()),
        ..key.clone()
    };
    assert_ne!(key.owner(), jwt.owner());
    assert_ne!(jwt.owner(), other.owner());
    assert_eq!(jwt.owner(), jwt.clone().owner());
}

#[test]
fn the_metadata_comes_from_public_url_without_offline_access() {
    let c = config("issuer = \"https://idp.example\"\n");
    let auth = Authenticator::from_config(&c).unwrap();
    assert_eq!(
        metadata::metadata_url("https://mcp.example.com/mcp"),
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    );
    assert_eq!(
        metadata::metadata_url("https://mcp.example.com"),
        "https://mcp.example.com/.well-known/oauth-protected-resource"
    );
    assert_eq!(
        metadata::document(&c, &auth),
        serde_json::json!({
            "resource": "https://mcp.example.com/mcp",
            "authorization_servers": ["https://idp.example"],
            "scopes_supported": ["mcp:tools"],
            "bearer_methods_supported": ["header"],
        })
    );
    // API keys only: no authorization server to name, so none is listed (not an empty list).
    let keys_only = config("");
    let auth = Authenticator::from_config(&keys_only).unwrap();
    assert_eq!(
        metadata::document(&keys_only, &auth),
        serde_json::json!({
            "resource": "https://mcp.example.com/mcp",
            "scopes_supported": ["mcp:tools"],
            "bearer_methods_supported": ["header"],
        })
    );
}

// ---- JWT access tokens against a local authorization server ----

struct Idp {
    issuer: String,
    keys: Arc<parking_lot::Mutex<Vec<serde_json::Value>>>,
    fetches: Arc<std::sync::atomic::AtomicUsize>,
}

/// An Ed25519 key pair: its PKCS#8 document and its public JWK.
fn key_pair(kid: &str) -> (Vec<u8>, serde_json::Value) {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new()).unwrap();
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
    let jwk = serde_json::json!({ "kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "use": "sig", "alg": "EdDSA" });
    (pkcs8.as_ref().to_vec(), jwk)
}

/// Serves RFC 8414 metadata and a JWKS on 127.0.0.1.
async fn idp() -> Idp {
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

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

fn sign(pkcs8: &[u8], kid: &str, claims: &serde_json::Value) -> String {
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

async fn verdict(auth: &Authenticator, token: &str) -> Result<Arc<Principal>, Failure> {
    auth.verify(token).await
}

#[tokio::test]
async fn only_a_valid_jwt_passes_the_audience_checks() {
    let idp = idp().await;
    let (pkcs8, jwk) = key_pair("k1");
    idp.keys.lock().push(jwk);
    let auth = jwt_auth(&idp.issuer);
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
    let idp = idp().await;
    let (_, jwk) = key_pair("k1");
    idp.keys.lock().push(jwk);
    let auth = jwt_auth(&idp.issuer);
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
    let idp = idp().await;
    let (pkcs8, jwk) = key_pair("k1");
    idp.keys.lock().push(jwk);
    let auth = jwt_auth(&idp.issuer);
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
