//! Tests of a server's `auth = { mode = ... }`: each mode's keys, and each refusal.

use super::tests::{err, parse};
use super::*;

const AUTH: &str = "[auth]\napi_keys = [{ name = \"k\", key = \"0123456789abcdef0123\" }]\n";

fn auth_of(server_table: &str, extra: &str) -> UpstreamAuth {
    let text = format!("{extra}[servers.x]\nurl = \"https://mcp.example.com/mcp\"\n{server_table}\n");
    match parse(&text) {
        Ok(config) => config.servers[0].auth.clone(),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn no_auth_table_means_only_the_configured_headers() {
    assert_eq!(auth_of("", ""), UpstreamAuth::Headers);
}

#[test]
fn each_mode_reads_its_own_keys() {
    assert_eq!(
        auth_of("auth = { mode = \"oauth\" }", ""),
        UpstreamAuth::OAuth(OAuthClient::default())
    );
    let pre = auth_of(
        "auth = { mode = \"oauth\", client_id = \"c\", client_secret = \"${DOCS_TOKEN}\", scopes = [\"read\"] }",
        "",
    );
    assert_eq!(
        pre,
        UpstreamAuth::OAuth(OAuthClient {
            client_id: Some("c".into()),
            client_secret: Some(Secret::new("abc")),
            scopes: vec!["read".into()],
            resource: None,
            client_metadata_url: None,
        })
    );
    let exchange = "auth = { mode = \"token_exchange\", token_endpoint = \"https://idp/token\", client_id = \"mcpmux\", \
         client_secret = \"s\", audience = \"https://jira.internal/mcp\", scopes = [\"jira:read\"] }";
    assert_eq!(
        auth_of(exchange, AUTH),
        UpstreamAuth::TokenExchange(TokenExchange {
            token_endpoint: "https://idp/token".into(),
            client_id: "mcpmux".into(),
            client_secret: Some(Secret::new("s")),
            audience: Some("https://jira.internal/mcp".into()),
            resource: None,
            scopes: vec!["jira:read".into()],
        })
    );
    assert_eq!(
        auth_of("auth = { mode = \"forward\" }", AUTH),
        UpstreamAuth::Forward
    );
    let credentials = auth_of(
        "auth = { mode = \"client_credentials\", client_id = \"c\", client_secret = \"s\" }",
        "",
    );
    assert!(matches!(credentials, UpstreamAuth::ClientCredentials(ref c)
        if c.token_endpoint.is_none() && c.proof == ClientProof::Secret(Secret::new("s"))));
    let jwt = auth_of(
        "auth = { mode = \"client_credentials\", client_id = \"c\", private_key_jwt = \"key.pem\" }",
        "",
    );
    assert!(matches!(jwt, UpstreamAuth::ClientCredentials(ref c)
        if matches!(c.proof, ClientProof::PrivateKeyJwt(ref p) if p.ends_with("key.pem"))));
}

#[test]
fn each_refusal_names_the_key_and_why() {
    let server = |table: &str| format!("[servers.x]\nurl = \"https://mcp.example.com/mcp\"\n{table}\n");
    let cases: &[(&str, &str)] = &[
        ("auth = { mode = \"magic\" }", "unknown auth.mode \"magic\""),
        ("auth = { mode = \"oauth\", audience = \"a\" }", "auth.audience does not apply to auth.mode = \"oauth\""),
        ("auth = { mode = \"oauth\", client_secret = \"s\" }", "auth.client_secret needs auth.client_id"),
        ("auth = { mode = \"forward\", client_id = \"c\" }", "auth.client_id does not apply"),
        ("auth = { mode = \"client_credentials\", client_secret = \"s\" }", "needs auth.client_id"),
        ("auth = { mode = \"client_credentials\", client_id = \"c\" }", "needs auth.client_secret or auth.private_key_jwt"),
        (
            "auth = { mode = \"client_credentials\", client_id = \"c\", client_secret = \"s\", private_key_jwt = \"k.pem\" }",
            "not both",
        ),
        (
            "auth = { mode = \"client_credentials\", client_id = \"c\", client_secret = \"s\", token_endpoint = \"idp/token\" }",
            "auth.token_endpoint \"idp/token\" must be an http:// or https:// URL",
        ),
        ("auth = { mode = \"oauth\", scopes = [\"a b\"] }", "single non-empty scope names"),
        (
            "auth = { mode = \"oauth\", client_metadata_url = \"http://x.example/c.json\" }",
            "must be an https:// URL",
        ),
        (
            "auth = { mode = \"client_credentials\", client_id = \"c\", client_secret = \"s\", client_metadata_url = \"https://x/c\" }",
            "auth.client_metadata_url does not apply",
        ),
        ("auth = { mode = \"oauth\", client_id = \"\" }", "auth.client_id must not be empty"),
        ("auth = { mode = \"oauth\", client_id = \"${NOPE}\" }", "NOPE"),
        (
            "auth = { mode = \"token_exchange\", client_id = \"c\", audience = \"a\" }",
            "needs auth.token_endpoint",
        ),
        (
            "auth = { mode = \"oauth\" }\nheaders = { Authorization = \"Bearer x\" }",
            "either an Authorization header in `headers` or `auth`",
        ),
    ];
    for (table, expected) in cases {
        let message = err(&format!("{AUTH}{}", server(table)));
        assert!(message.contains(expected), "{table}: {message}");
        assert!(
            message.contains("config.toml:"),
            "{table}: no location in {message}"
        );
    }
    let exchange =
        "auth = { mode = \"token_exchange\", token_endpoint = \"https://idp/t\", client_id = \"c\" }";
    assert!(err(&format!("{AUTH}{}", server(exchange))).contains("needs auth.audience or auth.resource"));
}

#[test]
fn a_stdio_server_has_no_auth() {
    let message = err("[servers.x]\ncommand = \"srv\"\nauth = { mode = \"oauth\" }\n");
    assert!(message.contains("`auth` is only valid for `url`"), "{message}");
}

#[test]
fn modes_that_use_the_hosts_token_need_auth() {
    for mode in ["forward", "token_exchange"] {
        let extra = match mode {
            "forward" => "",
            _ => ", token_endpoint = \"https://idp/t\", client_id = \"c\", audience = \"a\"",
        };
        let text = format!(
            "[servers.x]\nurl = \"https://mcp.example.com/mcp\"\nauth = {{ mode = \"{mode}\"{extra} }}\n"
        );
        let message = err(&text);
        assert!(
            message.contains(&format!("auth.mode = \"{mode}\" needs [auth]")),
            "{message}"
        );
    }
}

#[test]
fn every_mode_is_accepted_behind_auth_each_principal_with_its_own_identity() {
    for table in [
        "auth = { mode = \"oauth\" }",
        "auth = { mode = \"forward\" }",
        "auth = { mode = \"token_exchange\", token_endpoint = \"https://idp/t\", client_id = \"c\", audience = \"a\" }",
    ] {
        let auth = auth_of(table, AUTH);
        assert!(auth.per_principal(), "{table}: {auth:?}");
    }
    let shared = "auth = { mode = \"client_credentials\", client_id = \"c\", client_secret = \"s\" }";
    assert!(matches!(
        auth_of(shared, AUTH),
        UpstreamAuth::ClientCredentials(_)
    ));
}
