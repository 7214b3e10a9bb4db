//! Introspection against a local RFC 7662 endpoint: the client credentials sent, each refusal
//! (inactive, expired, foreign audience or issuer), the cache, and an endpoint that is down.

use super::*;
use crate::config::Secret;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// An endpoint answering per token; counts the questions; refuses wrong client credentials.
async fn endpoint() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/introspect", listener.local_addr().unwrap());
    let asked = Arc::new(AtomicUsize::new(0));
    let counted = asked.clone();
    let app = axum::Router::new().route(
        "/introspect",
        axum::routing::post(move |headers: http::HeaderMap, body: String| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move {
                // "gw:pw" in Basic.
                let authorized = headers.get("authorization").and_then(|v| v.to_str().ok()) == Some("Basic Z3c6cHc=");
                if !authorized {
                    return (http::StatusCode::UNAUTHORIZED, String::new());
                }
                let token: String = url::form_urlencoded::parse(body.as_bytes())
                    .find(|(k, _)| k == "token")
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default();
                let answer = match token.as_str() {
                    "good" => serde_json::json!({"active": true, "sub": "alice", "scope": "mcp:tools", "aud": "https://mcp/mcp",
                                                  "exp": now() + 300, "client_id": "c", "groups": ["eng"]}),
                    "expired" => serde_json::json!({"active": true, "sub": "alice", "exp": now() - 300}),
                    "foreign" => serde_json::json!({"active": true, "sub": "alice", "aud": ["https://other/mcp"]}),
                    "other-iss" => serde_json::json!({"active": true, "sub": "alice", "iss": "https://evil"}),
                    "nobody" => serde_json::json!({"active": true}),
                    _ => serde_json::json!({"active": false}),
                };
                (http::StatusCode::OK, answer.to_string())
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, asked)
}

fn introspector(url: &str, secret: &str) -> Introspector {
    cached_for(url, secret, 60)
}

fn cached_for(url: &str, secret: &str, secs: u64) -> Introspector {
    let config = Introspection {
        endpoint: url.to_string(),
        client_id: "gw".into(),
        client_secret: Secret::new(secret),
        cache_for: std::time::Duration::from_secs(secs),
    };
    Introspector::new(
        config,
        Some("https://idp".into()),
        vec!["https://mcp/mcp".into()],
        "groups".into(),
    )
}

#[tokio::test]
async fn an_active_token_is_its_subject_and_is_cached() {
    let (url, asked) = endpoint().await;
    let check = introspector(&url, "pw");
    let principal = check.verify("good").await.unwrap();
    assert_eq!(principal.name, "alice");
    assert_eq!(principal.scopes, ["mcp:tools"]);
    assert_eq!(principal.groups, ["eng"]);
    assert_eq!(principal.issuer.as_deref(), Some("https://idp"));
    assert_eq!(principal.client_id.as_deref(), Some("c"));
    // The validated opaque token rides along (for token_exchange), with its `exp`.
    let inbound = principal.token.as_ref().expect("the inbound token");
    assert_eq!(inbound.expose(), "good");
    assert!(inbound.expires_at().is_some_and(|exp| exp > now() + 200));
    assert!(check.verify("good").await.is_ok());
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "the second check comes from the cache"
    );
}

#[tokio::test]
async fn with_cache_secs_zero_every_request_is_asked() {
    let (url, asked) = endpoint().await;
    let check = cached_for(&url, "pw", 0);
    for _ in 0..3 {
        assert!(check.verify("good").await.is_ok());
    }
    assert_eq!(
        asked.load(Ordering::SeqCst),
        3,
        "a revocation is seen on the next request"
    );
}

#[tokio::test]
async fn each_bad_answer_is_invalid_token() {
    let (url, asked) = endpoint().await;
    let check = introspector(&url, "pw");
    for token in ["revoked", "expired", "foreign", "other-iss", "nobody"] {
        match check.verify(token).await {
            Err(Failure::InvalidToken(_)) => {}
            other => panic!("{token}: {other:?}"),
        }
    }
    // Refusals are not cached: a token that becomes active is seen as such.
    assert!(check.verify("revoked").await.is_err());
    assert_eq!(asked.load(Ordering::SeqCst), 6);
}

#[tokio::test]
async fn an_endpoint_that_refuses_the_gateway_or_is_down_is_unavailable() {
    let (url, _) = endpoint().await;
    match introspector(&url, "wrong").verify("good").await {
        Err(Failure::Unavailable(why)) => assert!(why.contains("401") && !why.contains("good"), "{why}"),
        other => panic!("{other:?}"),
    }
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down = format!("http://{}/introspect", closed.local_addr().unwrap());
    drop(closed);
    assert!(matches!(
        introspector(&down, "pw").verify("good").await,
        Err(Failure::Unavailable(_))
    ));
}
