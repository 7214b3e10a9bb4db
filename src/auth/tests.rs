//! Authentication refused by default: each refusal (no credential, unknown key, each bad JWT,
//! a token in the query, missing scopes) and the challenges and metadata that go with them.

use super::challenge::{www_authenticate, Failure};
use super::jwt_tests::{idp, key_pair, now, sign};
use super::layer::AuthLayer;
use super::*;
use axum::response::IntoResponse;
use http::{header, Request, StatusCode};
use tower::{Layer, ServiceExt};

const KEY: &str = "k-123";

pub(super) fn config(extra: &str) -> Config {
    let text = format!(
        "[gateway]\npublic_url = \"https://mcp.example.com/mcp\"\n[auth]\nscopes_supported = [\"mcp:tools\", \"offline_access\"]\n{extra}\n\
         [[auth.api_keys]]\nname = \"ci-bot\"\nkey = \"{KEY}\"\ngroups = [\"ci\"]\n"
    );
    Config::from_toml_str(&text, "t.toml", &|_| None).unwrap()
}

/// The status, `WWW-Authenticate` and body of `request` through the layer, and the principal
/// the handler saw (with whether the Authorization header reached it).
pub(super) async fn through(
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

pub(super) fn request(authorization: Option<&str>, uri: &str) -> Request<axum::body::Body> {
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
        credential: super::Credential::Token,
        certificate: None,
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
        credential: super::Credential::Token,
        certificate: None,
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
        credential: super::Credential::ApiKey,
        certificate: None,
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
