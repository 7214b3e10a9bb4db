use super::*;
use crate::credentials::oauth::test_as::{json, TestAs};
use serde_json::json as j;

fn url(text: &str) -> Url {
    Url::parse(text).expect("url")
}

/// The AS metadata the conformance suite's servers serve: endpoints under `prefix`.
fn as_metadata(base: &str, prefix: &str) -> serde_json::Value {
    j!({
        "issuer": format!("{base}{prefix}"),
        "authorization_endpoint": format!("{base}{prefix}/authorize"),
        "token_endpoint": format!("{base}{prefix}/token"),
        "registration_endpoint": format!("{base}{prefix}/register"),
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
    })
}

#[test]
fn prm_candidates_path_based_first_then_root() {
    assert_eq!(
        prm_candidates(&url("http://localhost:3000/mcp")),
        [
            "http://localhost:3000/.well-known/oauth-protected-resource/mcp",
            "http://localhost:3000/.well-known/oauth-protected-resource"
        ]
    );
    assert_eq!(
        prm_candidates(&url("https://rs.example/a/b/?x=1")),
        [
            "https://rs.example/.well-known/oauth-protected-resource/a/b",
            "https://rs.example/.well-known/oauth-protected-resource"
        ]
    );
    assert_eq!(
        prm_candidates(&url("https://rs.example/")),
        ["https://rs.example/.well-known/oauth-protected-resource"]
    );
}

#[test]
fn as_metadata_candidates_in_the_spec_order() {
    assert_eq!(
        as_metadata_candidates(&url("https://as.example")),
        [
            "https://as.example/.well-known/oauth-authorization-server",
            "https://as.example/.well-known/openid-configuration"
        ]
    );
    assert_eq!(
        as_metadata_candidates(&url("https://as.example:8443/tenant1/")),
        [
            "https://as.example:8443/.well-known/oauth-authorization-server/tenant1",
            "https://as.example:8443/.well-known/openid-configuration/tenant1",
            "https://as.example:8443/tenant1/.well-known/openid-configuration"
        ]
    );
}

#[test]
fn canonical_resource_and_resource_matching() {
    assert_eq!(
        canonical_resource(&url("HTTPS://MCP.Example.COM/mcp#x")),
        "https://mcp.example.com/mcp"
    );
    assert_eq!(
        canonical_resource(&url("https://mcp.example.com/")),
        "https://mcp.example.com"
    );
    assert_eq!(
        canonical_resource(&url("https://mcp.example.com:443/mcp/")),
        "https://mcp.example.com/mcp"
    );
    let server = url("http://localhost:3000/mcp");
    assert!(resource_matches(&server, "http://localhost:3000/mcp"));
    assert!(resource_matches(&server, "http://localhost:3000"));
    assert!(resource_matches(&server, "http://localhost:3000/"));
    assert!(!resource_matches(&server, "https://evil.example.com/mcp"));
    assert!(!resource_matches(&server, "http://localhost:3001/mcp"));
    assert!(!resource_matches(&server, "http://localhost:3000/mc"));
    assert!(!resource_matches(&server, "http://localhost:3000/mcp/sub"));
    assert!(!resource_matches(&server, "not a url"));
}

/// An MCP server whose PRM is at `prm_path` naming the AS `issuer`.
/// An authorization server serving its metadata (issuer `base` + `issuer_path`) at `path` only.
async fn authorization_server(path: &'static str, issuer_path: &'static str) -> TestAs {
    TestAs::start(move |base| vec![("GET", path.into(), json(200, as_metadata(base, issuer_path)))]).await
}

async fn resource_server(
    prm_path: &str,
    issuer: String,
    resource: Option<String>,
    scopes: Option<Vec<&str>>,
) -> TestAs {
    let prm_path = prm_path.to_string();
    TestAs::start(move |base| {
        let mut prm = j!({
            "resource": resource.unwrap_or_else(|| format!("{base}/mcp")),
            "authorization_servers": [issuer],
        });
        if let Some(scopes) = scopes {
            prm["scopes_supported"] = j!(scopes);
        }
        vec![("GET", prm_path, json(200, prm))]
    })
    .await
}

#[tokio::test]
async fn the_challenge_names_the_prm_and_the_root_prm_is_never_asked() {
    // metadata-default: PRM path-based and in WWW-Authenticate; AS metadata at the root.
    let auth = authorization_server("/.well-known/oauth-authorization-server", "").await;
    let rs = resource_server(
        "/.well-known/oauth-protected-resource/mcp",
        auth.base.clone(),
        None,
        Some(vec!["a", "b"]),
    )
    .await;
    let challenge = Challenge {
        resource_metadata: Some(format!("{}/.well-known/oauth-protected-resource/mcp", rs.base)),
        ..Challenge::default()
    };
    let d = discover(
        &super::super::http_client().expect("client"),
        &url(&format!("{}/mcp", rs.base)),
        Some(&challenge),
    )
    .await
    .expect("discovery");
    assert_eq!(rs.paths(), ["/.well-known/oauth-protected-resource/mcp"]);
    assert_eq!(auth.paths(), ["/.well-known/oauth-authorization-server"]);
    assert_eq!(d.resource, format!("{}/mcp", rs.base));
    assert_eq!(d.issuer, auth.base);
    assert_eq!(d.as_metadata.token_endpoint, format!("{}/token", auth.base));
    assert_eq!(d.scopes_supported, Some(vec!["a".to_string(), "b".to_string()]));
    assert!(d.prm.is_some());
}

#[tokio::test]
async fn without_a_challenge_the_path_based_prm_then_oidc_discovery() {
    // metadata-var1: PRM path-based, not in WWW-Authenticate; AS at openid-configuration.
    let auth = authorization_server("/.well-known/openid-configuration", "").await;
    let rs = resource_server(
        "/.well-known/oauth-protected-resource/mcp",
        auth.base.clone(),
        None,
        None,
    )
    .await;
    let d = discover(
        &super::super::http_client().expect("client"),
        &url(&format!("{}/mcp", rs.base)),
        None,
    )
    .await
    .expect("discovery");
    assert_eq!(rs.paths(), ["/.well-known/oauth-protected-resource/mcp"]);
    assert_eq!(
        auth.paths(),
        [
            "/.well-known/oauth-authorization-server",
            "/.well-known/openid-configuration"
        ]
    );
    assert_eq!(
        d.as_metadata.authorization_endpoint,
        Some(format!("{}/authorize", auth.base))
    );
}

#[tokio::test]
async fn a_root_prm_and_a_path_issuer_never_probe_the_as_root() {
    // metadata-var2: PRM only at the root (resource = the origin); AS issuer with a path.
    let auth = authorization_server("/.well-known/oauth-authorization-server/tenant1", "/tenant1").await;
    let issuer = format!("{}/tenant1", auth.base);
    let rs = TestAs::start(move |base| {
        vec![(
            "GET",
            "/.well-known/oauth-protected-resource".into(),
            json(200, j!({"resource": base, "authorization_servers": [issuer]})),
        )]
    })
    .await;
    let d = discover(
        &super::super::http_client().expect("client"),
        &url(&format!("{}/mcp", rs.base)),
        None,
    )
    .await
    .expect("discovery");
    assert_eq!(
        rs.paths(),
        [
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource"
        ]
    );
    assert_eq!(auth.paths(), ["/.well-known/oauth-authorization-server/tenant1"]);
    assert_eq!(d.resource, rs.base);
    assert_eq!(
        d.as_metadata.token_endpoint,
        format!("{}/tenant1/token", auth.base)
    );
}

#[tokio::test]
async fn a_custom_prm_location_and_oidc_path_appending() {
    // metadata-var3: PRM at a custom URL given in WWW-Authenticate; AS metadata at
    // /tenant1/.well-known/openid-configuration.
    let auth = authorization_server("/tenant1/.well-known/openid-configuration", "/tenant1").await;
    let rs = resource_server(
        "/custom/metadata/location.json",
        format!("{}/tenant1", auth.base),
        None,
        None,
    )
    .await;
    let challenge = parse_www_authenticate_for(&format!("{}/custom/metadata/location.json", rs.base));
    let d = discover(
        &super::super::http_client().expect("client"),
        &url(&format!("{}/mcp", rs.base)),
        Some(&challenge),
    )
    .await
    .expect("discovery");
    assert_eq!(rs.paths(), ["/custom/metadata/location.json"]);
    assert_eq!(
        auth.paths(),
        [
            "/.well-known/oauth-authorization-server/tenant1",
            "/.well-known/openid-configuration/tenant1",
            "/tenant1/.well-known/openid-configuration"
        ]
    );
    assert_eq!(d.issuer, format!("{}/tenant1", auth.base));
}

fn parse_www_authenticate_for(prm: &str) -> Challenge {
    crate::credentials::oauth::parse_www_authenticate(&format!(r#"Bearer resource_metadata="{prm}""#))
        .expect("challenge")
}

#[tokio::test]
async fn a_2025_03_26_server_with_metadata_at_its_origin() {
    // 2025-03-26-oauth-metadata-backcompat: no PRM; the origin's metadata names an issuer
    // under /oauth, which is taken as is.
    let server = authorization_server("/.well-known/oauth-authorization-server", "/oauth").await;
    let d = discover(
        &super::super::http_client().expect("client"),
        &url(&format!("{}/mcp", server.base)),
        None,
    )
    .await
    .expect("discovery");
    assert_eq!(
        server.paths(),
        [
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-authorization-server"
        ]
    );
    assert!(d.prm.is_none());
    assert_eq!(d.resource, format!("{}/mcp", server.base));
    assert_eq!(
        d.as_metadata.authorization_endpoint,
        Some(format!("{}/oauth/authorize", server.base))
    );
    assert_eq!(
        d.as_metadata.registration_endpoint,
        Some(format!("{}/oauth/register", server.base))
    );
}

#[tokio::test]
async fn a_2025_03_26_server_without_metadata_gets_the_default_endpoints() {
    // 2025-03-26-oauth-endpoint-fallback.
    let server = TestAs::start(|_| vec![]).await;
    let d = discover(
        &super::super::http_client().expect("client"),
        &url(&format!("{}/mcp", server.base)),
        None,
    )
    .await
    .expect("discovery");
    assert_eq!(server.paths().len(), 4, "{:?}", server.paths());
    assert_eq!(d.issuer, server.base);
    assert_eq!(
        d.as_metadata.authorization_endpoint,
        Some(format!("{}/authorize", server.base))
    );
    assert_eq!(d.as_metadata.token_endpoint, format!("{}/token", server.base));
    assert_eq!(
        d.as_metadata.registration_endpoint,
        Some(format!("{}/register", server.base))
    );
}

#[tokio::test]
async fn a_prm_for_another_resource_stops_discovery() {
    // resource-mismatch: nothing is asked of the AS.
    let auth = authorization_server("/.well-known/oauth-authorization-server", "").await;
    let rs = resource_server(
        "/.well-known/oauth-protected-resource/mcp",
        auth.base.clone(),
        Some("https://evil.example.com/mcp".into()),
        None,
    )
    .await;
    let err = discover(
        &super::super::http_client().expect("client"),
        &url(&format!("{}/mcp", rs.base)),
        None,
    )
    .await
    .expect_err("mismatch");
    assert!(matches!(err, OAuthError::ResourceMismatch { .. }), "{err}");
    assert!(err.to_string().contains("https://evil.example.com/mcp"), "{err}");
    assert!(auth.paths().is_empty());
}

#[tokio::test]
async fn metadata_naming_another_issuer_is_refused() {
    let auth = TestAs::start(|_| {
        vec![(
            "GET",
            "/.well-known/oauth-authorization-server".into(),
            json(200, as_metadata("https://other.example", "")),
        )]
    })
    .await;
    let rs = resource_server(
        "/.well-known/oauth-protected-resource/mcp",
        auth.base.clone(),
        None,
        None,
    )
    .await;
    let err = discover(
        &super::super::http_client().expect("client"),
        &url(&format!("{}/mcp", rs.base)),
        None,
    )
    .await
    .expect_err("issuer mismatch");
    assert!(
        err.to_string().contains("names issuer https://other.example"),
        "{err}"
    );
}

#[tokio::test]
async fn a_failing_metadata_endpoint_is_an_error_naming_it() {
    let auth = TestAs::start(|_| {
        vec![(
            "GET",
            "/.well-known/oauth-authorization-server".into(),
            json(503, j!({"error": "temporarily_unavailable"})),
        )]
    })
    .await;
    let rs = resource_server(
        "/.well-known/oauth-protected-resource/mcp",
        auth.base.clone(),
        None,
        None,
    )
    .await;
    let err = discover(
        &super::super::http_client().expect("client"),
        &url(&format!("{}/mcp", rs.base)),
        None,
    )
    .await
    .expect_err("503");
    assert_eq!(
        err.to_string(),
        format!(
            "{}/.well-known/oauth-authorization-server answered HTTP 503: temporarily_unavailable",
            auth.base
        )
    );
}
