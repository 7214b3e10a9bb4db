//! mcpmux as an OAuth 2.1 resource server, against a real authorization server
//! (oauth2-mock-server, pinned, on 127.0.0.1) and the real `mcpmux serve` binary: the six
//! audience checks, key rotation without restart, API keys, session theft, step-up, the
//! protected resource metadata, a real client with a bearer header, and a canary that fails if
//! a token shows up in the gateway's log or at the upstream.

use crate::support::serve::ServeProcess;
use crate::support::{free_port, log_dir, path_str, peers, run_client, scratch_dir, spawn_server};
use crate::support::{test_server_toml, upstream_log, ChildGuard};
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};

const API_KEY: &str = "ci-bot-key-5b0d2c";
const ACCEPT: &str = "application/json, text/event-stream";

/// oauth2-mock-server with the tests' mint and rotate routes; returns it and its issuer URL.
pub(crate) fn start_idp() -> (ChildGuard, String) {
    let p = peers();
    let port = free_port();
    let mut cmd = Command::new(&p.node22);
    cmd.arg(crate::support::repo_root().join("tests/fixtures/oauth_idp.mjs"))
        .arg(&p.oauth_mock_pkg)
        .arg(port.to_string());
    let log = log_dir().join(format!("oauth-idp-{port}.log"));
    let guard = spawn_server(cmd, port, &log, "oauth2-mock-server");
    // The package names its issuer by host name.
    (guard, format!("http://localhost:{port}"))
}

pub(crate) async fn mint(issuer: &str, claims: Value) -> String {
    mint_at(issuer, "mint", claims).await
}

pub(crate) async fn mint_at(issuer: &str, route: &str, claims: Value) -> String {
    let reply = reqwest::Client::new()
        .post(format!("{issuer}/{route}"))
        .header("content-type", "application/json")
        .body(claims.to_string())
        .send()
        .await
        .expect("mint")
        .text()
        .await
        .expect("mint reply");
    let reply: Value = serde_json::from_str(&reply).expect("mint JSON");
    reply["access_token"].as_str().expect("a token").to_string()
}

/// One POST to the MCP endpoint; `None` tokens send no Authorization header.
async fn post(url: &str, token: Option<&str>, session: Option<&str>, body: Value) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("accept", ACCEPT)
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25");
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.body(body.to_string()).send().await.expect("POST")
}

fn initialize() -> Value {
    json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"auth-test","version":"0"}}})
}

fn challenge(response: &reqwest::Response) -> String {
    (response.headers().get("www-authenticate"))
        .map(|v| v.to_str().unwrap_or_default().to_string())
        .unwrap_or_default()
}

/// Opens a session with `token`; returns its id.
async fn open(url: &str, token: &str) -> String {
    let response = post(url, Some(token), None, initialize()).await;
    assert_eq!(response.status(), 200, "initialize: {}", challenge(&response));
    let sid = response.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let initialized = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
    assert_eq!(
        post(url, Some(token), Some(&sid), initialized).await.status(),
        202
    );
    sid
}

/// The JSON-RPC answer of a POST (a JSON body, or the first `data:` event of an SSE reply).
async fn answer(response: reqwest::Response) -> Value {
    let text = response.text().await.expect("body");
    let json = text
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or(text.as_str());
    serde_json::from_str(json).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

async fn call(url: &str, token: &str, sid: &str, tool: &str) -> reqwest::Response {
    let body = json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":tool,"arguments":{"message":"hi"}}});
    post(url, Some(token), Some(sid), body).await
}

/// Wait until the gateway answers an API-key session with `t__echo` listed.
async fn wait_ready(gateway: &mut ServeProcess) {
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        if let Some(status) = gateway.guard.try_wait() {
            panic!("gateway exited ({status}):\n{}", gateway.log());
        }
        let url = gateway.url();
        let listed = reqwest::Client::new()
            .post(&url)
            .header("accept", ACCEPT)
            .bearer_auth(API_KEY)
            .header("content-type", "application/json")
            .body(initialize().to_string())
            .send()
            .await;
        if let Ok(response) = listed {
            if response.status() == 200 {
                let sid = response.headers()["mcp-session-id"].to_str().unwrap().to_string();
                let list = json!({"jsonrpc":"2.0","id":1,"method":"tools/list"});
                let tools = answer(post(&url, Some(API_KEY), Some(&sid), list).await).await;
                if tools.to_string().contains("t__echo") {
                    return;
                }
            }
        }
        assert!(Instant::now() < deadline, "gateway not ready:\n{}", gateway.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_authorization_servers_tokens_are_checked_on_every_face() {
    let _suite = crate::suite::enter(module_path!());
    let (_idp, issuer) = start_idp();
    let dir = scratch_dir("auth");
    let upstream = dir.join("upstream.jsonl");
    let key_digest: String = ring_digest(API_KEY);
    let servers = format!(
        "[auth]\nissuer = \"{issuer}\"\nscopes_supported = [\"mcp:tools\", \"mcp:write\", \"offline_access\"]\n\
         required_scopes = [\"mcp:tools\"]\n\
         introspection = {{ endpoint = \"{issuer}/introspect-opaque\", client_id = \"mcpmux\", client_secret = \"s3cret\" }}\n\
         [[auth.api_keys]]\nname = \"ci-bot\"\nsha256 = \"{key_digest}\"\ngroups = [\"ci\"]\n\
         [[auth.step_up]]\ntools = [\"t__ec*\", \"t__greet\", \"mcpmux://t/test://item/*\"]\nscopes = [\"mcp:write\"]\n\n{}",
        test_server_toml("t", &[], Some(&upstream))
    );
    let mut gateway = ServeProcess::start(&dir, "", &servers, &dir, &[]);
    wait_ready(&mut gateway).await;
    let url = gateway.url();
    let mut used_tokens: Vec<String> = vec![API_KEY.to_string()];

    // No token: 401, resource_metadata and scope, and no error=.
    let response = post(&url, None, None, initialize()).await;
    assert_eq!(response.status(), 401);
    let metadata_url = format!(
        "http://127.0.0.1:{}/.well-known/oauth-protected-resource/mcp",
        gateway.port
    );
    assert_eq!(
        challenge(&response),
        format!("Bearer resource_metadata=\"{metadata_url}\", scope=\"mcp:tools\"")
    );
    let body = answer(response).await;
    assert_eq!(body["jsonrpc"], "2.0", "{body}");

    // The protected resource metadata, at the path and at the root.
    for at in [
        metadata_url.clone(),
        format!(
            "http://127.0.0.1:{}/.well-known/oauth-protected-resource",
            gateway.port
        ),
    ] {
        let doc: Value =
            serde_json::from_str(&reqwest::get(&at).await.unwrap().text().await.unwrap()).unwrap();
        assert_eq!(
            doc,
            json!({"resource": url, "authorization_servers": [issuer], "scopes_supported": ["mcp:tools", "mcp:write"],
                   "bearer_methods_supported": ["header"]}),
            "{at}"
        );
    }

    // The six audience checks: only the valid token passes.
    let valid = mint(&issuer, json!({"aud": url, "scope": "mcp:tools"})).await;
    let first_fetch = Instant::now();
    let alice = open(&url, &valid).await;
    used_tokens.push(valid.clone());
    for (what, claims) in [
        (
            "wrong aud",
            json!({"aud": "http://elsewhere.example/mcp", "scope": "mcp:tools"}),
        ),
        ("missing aud", json!({"aud": "-", "scope": "mcp:tools"})),
        (
            "expired",
            json!({"aud": url, "scope": "mcp:tools", "expires_in": -300}),
        ),
        (
            "untrusted key",
            json!({"aud": url, "scope": "mcp:tools", "untrusted": true}),
        ),
    ] {
        let token = mint(&issuer, claims).await;
        let response = post(&url, Some(&token), None, initialize()).await;
        assert_eq!(response.status(), 401, "{what}");
        assert!(
            challenge(&response).starts_with("Bearer error=\"invalid_token\""),
            "{what}: {}",
            challenge(&response)
        );
        used_tokens.push(token);
    }

    // Required scopes: a token without them is 403 insufficient_scope.
    let scopeless = mint(&issuer, json!({"aud": url, "scope": "other"})).await;
    let response = post(&url, Some(&scopeless), None, initialize()).await;
    assert_eq!(response.status(), 403);
    assert!(
        challenge(&response).contains("error=\"insufficient_scope\"")
            && challenge(&response).contains("scope=\"mcp:tools\"")
    );
    used_tokens.push(scopeless);

    // A token in the query string is refused.
    let response = reqwest::Client::new()
        .post(format!("{url}?access_token={valid}"))
        .header("accept", ACCEPT)
        .header("content-type", "application/json")
        .body(initialize().to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);

    // API keys: the right one opens a session, a wrong one is invalid_token.
    let bot = open(&url, API_KEY).await;
    let response = post(&url, Some("not-the-key"), None, initialize()).await;
    assert_eq!(response.status(), 401);
    assert!(challenge(&response).contains("invalid_token"));

    // Opaque tokens through introspection (RFC 7662): an active one passes, an unknown one is invalid.
    let opaque = mint_at(
        &issuer,
        "mint-opaque",
        json!({"aud": url, "scope": "mcp:tools", "sub": "carol"}),
    )
    .await;
    used_tokens.push(opaque.clone());
    let carol = open(&url, &opaque).await;
    let response = post(&url, Some("opaque-revoked"), None, initialize()).await;
    assert_eq!(response.status(), 401);
    assert!(challenge(&response).contains("invalid_token"));
    let foreign = mint_at(
        &issuer,
        "mint-opaque",
        json!({"aud": "http://elsewhere/mcp", "scope": "mcp:tools"}),
    )
    .await;
    assert_eq!(post(&url, Some(&foreign), None, initialize()).await.status(), 401);
    used_tokens.push(foreign);

    // Session theft: another principal's session is unknown (404), on POST, GET and DELETE.
    let bob = mint(&issuer, json!({"aud": url, "scope": "mcp:tools", "sub": "bob"})).await;
    used_tokens.push(bob.clone());
    let list = json!({"jsonrpc":"2.0","id":3,"method":"tools/list"});
    assert_eq!(
        post(&url, Some(&bob), Some(&alice), list.clone()).await.status(),
        404
    );
    assert_eq!(
        post(&url, Some(API_KEY), Some(&alice), list.clone())
            .await
            .status(),
        404
    );
    assert_eq!(
        post(&url, Some(&valid), Some(&bot), list.clone()).await.status(),
        404
    );
    assert_eq!(
        post(&url, Some(&valid), Some(&carol), list.clone())
            .await
            .status(),
        404
    );
    assert_eq!(
        post(&url, Some(&opaque), Some(&carol), list.clone())
            .await
            .status(),
        200
    );
    let stolen_get = reqwest::Client::new()
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &alice)
        .bearer_auth(&bob)
        .send()
        .await
        .unwrap();
    assert_eq!(stolen_get.status(), 404);
    let stolen_delete = reqwest::Client::new()
        .delete(&url)
        .header("mcp-session-id", &alice)
        .bearer_auth(&bob)
        .send()
        .await
        .unwrap();
    assert_eq!(stolen_delete.status(), 404);
    // The owner still has it: a fresh token of the same principal continues the session.
    let alice_again = mint(&issuer, json!({"aud": url, "scope": "mcp:tools"})).await;
    used_tokens.push(alice_again.clone());
    assert_eq!(
        post(&url, Some(&alice_again), Some(&alice), list).await.status(),
        200
    );

    // Step-up: t__echo needs mcp:write; the challenge names every scope the call needs.
    let response = call(&url, &valid, &alice, "t__echo").await;
    assert_eq!(response.status(), 403);
    let step = challenge(&response);
    assert!(
        step.contains("error=\"insufficient_scope\"") && step.contains("scope=\"mcp:tools mcp:write\""),
        "{step}"
    );
    let full = mint(&issuer, json!({"aud": url, "scope": "mcp:tools mcp:write"})).await;
    used_tokens.push(full.clone());
    let response = call(&url, &full, &alice, "t__echo").await;
    assert_eq!(response.status(), 200);
    let reply = answer(response).await;
    assert!(reply.to_string().contains("echo: hi"), "{reply}");
    // Scope hierarchies: `mcp` is above both `mcp:tools` and `mcp:write`.
    let broad = mint(&issuer, json!({"aud": url, "scope": "mcp"})).await;
    used_tokens.push(broad.clone());
    let response = call(&url, &broad, &alice, "t__echo").await;
    assert_eq!(response.status(), 200, "a broader scope covers the narrower ones");
    // The same for a prompt and a resource the rule names: 403 with the low token, then 200.
    for (method, params) in [
        (
            "prompts/get",
            json!({"name": "t__greet", "arguments": {"name": "ada"}}),
        ),
        ("resources/read", json!({"uri": "mcpmux://t/test://item/5"})),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 8, "method": method, "params": params});
        let low = post(&url, Some(&valid), Some(&alice), body.clone()).await;
        assert_eq!(low.status(), 403, "{method}");
        assert!(
            challenge(&low).contains("scope=\"mcp:tools mcp:write\""),
            "{method}"
        );
        let high = post(&url, Some(&full), Some(&alice), body).await;
        assert_eq!(high.status(), 200, "{method}");
        let reply = answer(high).await;
        assert!(reply.get("result").is_some(), "{method}: {reply}");
    }

    // The same in the 2026-07-28 era (no session): 403 with the challenge, then 200.
    let modern_call = |token: String| {
        let url = url.clone();
        async move {
            let body = json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{
                "name":"t__echo","arguments":{"message":"modern"},
                "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
                         "io.modelcontextprotocol/clientCapabilities":{},
                         "io.modelcontextprotocol/clientInfo":{"name":"auth-test","version":"0"}}}});
            reqwest::Client::new()
                .post(&url)
                .header("accept", ACCEPT)
                .header("content-type", "application/json")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", "t__echo")
                .bearer_auth(token)
                .body(body.to_string())
                .send()
                .await
                .unwrap()
        }
    };
    let response = modern_call(valid.clone()).await;
    assert_eq!(response.status(), 403);
    assert!(challenge(&response).contains("scope=\"mcp:tools mcp:write\""));
    let response = modern_call(full.clone()).await;
    assert_eq!(response.status(), 200);
    assert!(answer(response).await.to_string().contains("echo: modern"));

    // A real client (Python SDK mcp 2.3.0) with a bearer header.
    let mut python = Command::new(&peers().python);
    python
        .arg(crate::support::repo_root().join("tests/clients/py_client.py"))
        .args([url.as_str(), "call", "t__echo", "{\"message\": \"from-python\"}"])
        .env("MCPMUX_TEST_BEARER", &full);
    let run = tokio::task::spawn_blocking(move || run_client(python, Duration::from_secs(60)))
        .await
        .unwrap();
    run.assert_ok();
    assert!(run.stdout.contains("echo: from-python"), "{run}");
    // Without the header the same client is refused.
    let mut bare = Command::new(&peers().python);
    bare.arg(crate::support::repo_root().join("tests/clients/py_client.py"))
        .args([url.as_str(), "call", "t__echo", "{}"]);
    let run = tokio::task::spawn_blocking(move || run_client(bare, Duration::from_secs(60)))
        .await
        .unwrap();
    assert!(!run.success(), "{run}");

    // The legacy faces are behind the same check.
    let legacy = reqwest::get(format!("http://127.0.0.1:{}/sse", gateway.port))
        .await
        .unwrap();
    assert_eq!(legacy.status(), 401);
    assert!(!challenge(&legacy).contains("error="));
    // A legacy stream belongs to its opener: another principal's POSTs to it are 404.
    let mut stream = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{}/sse", gateway.port))
        .header("accept", "text/event-stream")
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let mut events = String::new();
    while !events.contains("\n\n") {
        let chunk = stream.chunk().await.unwrap().expect("the endpoint event");
        events.push_str(&String::from_utf8_lossy(&chunk));
    }
    let endpoint = (events.lines().find_map(|l| l.strip_prefix("data: ")))
        .expect("endpoint")
        .trim()
        .to_string();
    let message_url = format!("http://127.0.0.1:{}{endpoint}", gateway.port);
    let to_legacy = |token: String| {
        let message_url = message_url.clone();
        async move {
            reqwest::Client::new()
                .post(&message_url)
                .header("content-type", "application/json")
                .bearer_auth(token)
                .body(initialize().to_string())
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(to_legacy(bob.clone()).await, 404);
    assert_eq!(to_legacy(API_KEY.to_string()).await, 202);
    drop(stream);

    // Key rotation at the IdP, no restart: the new kid is fetched (after the refetch interval).
    let rotated = reqwest::Client::new()
        .post(format!("{issuer}/rotate"))
        .send()
        .await
        .unwrap();
    assert!(rotated.status().is_success());
    let new_key = mint(&issuer, json!({"aud": url, "scope": "mcp:tools"})).await;
    used_tokens.push(new_key.clone());
    let wait = Duration::from_millis(10_500).saturating_sub(first_fetch.elapsed());
    tokio::time::sleep(wait).await;
    let response = post(&url, Some(&new_key), None, initialize()).await;
    assert_eq!(response.status(), 200, "rotated key: {}", challenge(&response));

    // The canary: no token anywhere the gateway writes, nor at the upstream.
    let log = gateway.log();
    let seen_upstream = upstream_log(&upstream);
    assert!(!seen_upstream.is_empty(), "the upstream log is written");
    let upstream_text: String = seen_upstream.iter().map(Value::to_string).collect();
    for token in &used_tokens {
        let signature = token.rsplit('.').next().unwrap_or(token);
        assert!(!log.contains(signature), "a token is in the gateway log:\n{log}");
        assert!(!upstream_text.contains(signature), "a token reached the upstream");
    }
    assert!(
        log.contains("t__echo") || log.contains("session opened"),
        "the log is the gateway's: {log}"
    );
    let _ = path_str(&dir);
}

/// The hex SHA-256 of `key` (what `[[auth.api_keys]] sha256` holds).
fn ring_digest(key: &str) -> String {
    use std::fmt::Write;
    let digest = ring::digest::digest(&ring::digest::SHA256, key.as_bytes());
    digest.as_ref().iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// Revocation at the authorization server takes effect on the next request, not at token
/// expiry, when introspection answers are not cached (`cache_secs = 0`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_opaque_token_is_refused_on_its_next_request() {
    let _suite = crate::suite::enter(module_path!());
    let (_idp, issuer) = start_idp();
    let dir = scratch_dir("auth-revoke");
    let key_digest = ring_digest(API_KEY);
    let servers = format!(
        "[auth]\nscopes_supported = [\"mcp:tools\"]\n\
         introspection = {{ endpoint = \"{issuer}/introspect-opaque\", client_id = \"mcpmux\", client_secret = \"s3cret\", cache_secs = 0 }}\n\
         [[auth.api_keys]]\nname = \"ci-bot\"\nsha256 = \"{key_digest}\"\n\n{}",
        test_server_toml("t", &[], None)
    );
    let mut gateway = ServeProcess::start(&dir, "", &servers, &dir, &[]);
    wait_ready(&mut gateway).await;
    let url = gateway.url();
    let token = mint_at(
        &issuer,
        "mint-opaque",
        json!({"aud": url, "sub": "dana", "scope": "mcp:tools"}),
    )
    .await;
    let session = open(&url, &token).await;
    assert_eq!(call(&url, &token, &session, "t__echo").await.status(), 200);

    let revoked = reqwest::Client::new()
        .post(format!("{issuer}/revoke-opaque"))
        .header("content-type", "application/json")
        .body(json!({"token": token}).to_string())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let revoked: Value = serde_json::from_str(&revoked).unwrap();
    assert_eq!(revoked["revoked"], true);
    let response = call(&url, &token, &session, "t__echo").await;
    assert_eq!(response.status(), 401);
    assert!(
        challenge(&response).contains("error=\"invalid_token\""),
        "{}",
        challenge(&response)
    );
}
