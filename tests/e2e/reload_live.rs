//! Settings a reload changes live, end to end on an in-process gateway: a server's
//! `request_timeout_secs` and `max_in_flight` change for the next call without a restart (same
//! process, the long call in flight keeps its timeout), `[auth]` changes for the next request
//! (an added API key gets in at once, a removed one is refused 401 while another principal's
//! session goes on) and is not "needs restart"; what cannot change live is listed by `/status`.
//! Real in-repo test server (stdio).

use crate::support::mcp::RawSession;
use crate::support::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A configuration on an ephemeral loopback port: `gateway` lines, then `rest`.
fn config(gateway: &str, rest: &str) -> mcpmux::Config {
    let text = format!("[gateway]\nlisten = \"127.0.0.1:0\"\n{gateway}\n{rest}");
    mcpmux::Config::from_toml_str(&text, "test.toml", &|_| None)
        .unwrap_or_else(|e| panic!("bad test config: {e}\n{text}"))
}

/// The pid the test server `whoami` reports.
async fn whoami(host: &RawSession, server: &str) -> u64 {
    let text = host.tool_text(&format!("{server}__whoami"), json!({})).await;
    let me: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("whoami: {text}"));
    me["pid"].as_u64().unwrap_or_else(|| panic!("whoami: {text}"))
}

/// Wait until the test server's log shows a `tools/call` of `tool`.
async fn wait_upstream_call(log: &std::path::Path, tool: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !upstream_log(log)
        .iter()
        .any(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)
    {
        assert!(Instant::now() < deadline, "{tool} never reached the upstream");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn error_message(answer: &Value) -> &str {
    answer["error"]["message"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_retunes_timeouts_and_limits_without_restarting_the_server() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("reload-live-tunables");
    let log = dir.join("t.jsonl");
    let server = test_server_toml("t", &[], Some(&log));
    let tuned = |timeout: u64, max: u64| {
        config(
            "",
            &format!("{server}request_timeout_secs = {timeout}\nmax_in_flight = {max}\n"),
        )
    };
    let gateway = mcpmux::start(tuned(60, 4)).await.expect("gateway starts");
    let host = std::sync::Arc::new(RawSession::open(&gateway.url(), json!({})).await);
    let pid = whoami(&host, "t").await;

    // A long call in flight, started under a 60 s timeout.
    let slow = {
        let host = host.clone();
        tokio::spawn(async move {
            host.call(
                "tools/call",
                json!({"name": "t__slow", "arguments": {"ms": 5000}}),
            )
            .await
        })
    };
    wait_upstream_call(&log, "slow").await;

    // A 2 s timeout and one call at a time: the server is retuned, not restarted.
    let done = gateway.reload(tuned(2, 1)).await.expect("reload");

    // The next call reads the new max_in_flight: the long call holds the only place.
    let refused = host
        .call(
            "tools/call",
            json!({"name": "t__echo", "arguments": {"message": "x"}}),
        )
        .await;
    assert!(
        error_message(&refused).contains("max_in_flight"),
        "the extra call is refused as overloaded: {refused}"
    );

    // The call in flight keeps the timeout it started with (5 s > the new 2 s) and completes.
    let slept = slow.await.expect("the slow call");
    assert_eq!(slept["result"]["content"][0]["text"], "slept 5000", "{slept}");

    // The next slow call gets the new 2 s timeout.
    let timed_out = host
        .call(
            "tools/call",
            json!({"name": "t__slow", "arguments": {"ms": 8000}}),
        )
        .await;
    assert!(
        error_message(&timed_out).contains("did not answer within 2 s"),
        "{timed_out}"
    );
    // Same process all along.
    assert_eq!(whoami(&host, "t").await, pid, "the server was not restarted");
    assert_eq!(done.servers.retuned, vec![mcpmux::config::UpstreamId::new("t")]);
    assert!(done.servers.changed.is_empty(), "{done:?}");
    assert!(done.needs_restart.is_empty(), "{done:?}");
    gateway.stop().await;
}

const ALICE: &str = "[[auth.api_keys]]\nname = \"alice\"\nkey = \"alice-key-0123456789\"\n";
const BOB: &str = "[[auth.api_keys]]\nname = \"bob\"\nkey = \"bob-key-0123456789\"\n";

/// A tools/call on `host`'s session: the HTTP status and, on 200, the answer.
async fn echo_status(host: &RawSession) -> u16 {
    let body = json!({"jsonrpc": "2.0", "id": host.next_id(), "method": "tools/call",
        "params": {"name": "t__echo", "arguments": {"message": "hi"}}});
    host.post(body).await.status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_changes_api_keys_for_the_next_request_and_keeps_sessions() {
    let _suite = crate::suite::enter(module_path!());
    let server = test_server_toml("t", &[], None);
    let with_keys = |keys: &[&str]| config("", &format!("[auth]\n{}\n{server}", keys.concat()));
    let gateway = mcpmux::start(with_keys(&[ALICE])).await.expect("gateway starts");
    let url = gateway.url();
    let alice = RawSession::open_as(&url, "alice-key-0123456789").await;
    assert_eq!(
        alice.tool_text("t__echo", json!({"message": "a"})).await,
        "echo: a"
    );
    let before = RawSession::try_open_as(&url, "bob-key-0123456789").await;
    assert!(
        before.as_ref().err().is_some_and(|e| e.contains("401")),
        "bob has no key yet"
    );

    // Bob's key added: he gets in at once; [auth] is not "needs restart".
    let done = gateway.reload(with_keys(&[ALICE, BOB])).await.expect("reload");
    assert!(done.auth_changed, "{done:?}");
    assert!(done.needs_restart.is_empty(), "{done:?}");
    let bob = RawSession::open_as(&url, "bob-key-0123456789").await;
    assert_eq!(bob.tool_text("t__echo", json!({"message": "b"})).await, "echo: b");

    // Alice's key removed: her next request is refused 401; Bob's session goes on.
    gateway.reload(with_keys(&[BOB])).await.expect("reload");
    assert_eq!(echo_status(&alice).await, 401, "a removed key is refused");
    assert_eq!(
        echo_status(&bob).await,
        200,
        "another principal's session goes on"
    );
    assert_eq!(
        bob.tool_text("t__echo", json!({"message": "still"})).await,
        "echo: still"
    );
    let doc = gateway_status(&gateway).await;
    let last = &doc["config"]["last_reload"];
    assert_eq!(last["outcome"], "ok", "{doc}");
    assert!(last.get("needs_restart").is_none(), "{doc}");

    // What cannot change live is listed by /status, and keeps its running value.
    let separated = config("separator = \"_\"\n", &format!("[auth]\n{BOB}\n{server}"));
    let done = gateway.reload(separated).await.expect("reload");
    assert_eq!(done.needs_restart, vec!["gateway.separator"]);
    let doc = gateway_status(&gateway).await;
    assert_eq!(
        doc["config"]["last_reload"]["needs_restart"],
        json!(["gateway.separator"]),
        "{doc}"
    );
    assert_eq!(
        bob.tool_text("t__echo", json!({"message": "same"})).await,
        "echo: same"
    );
    gateway.stop().await;
}

/// An `initialize` from a page at `origin`: the HTTP status.
async fn initialize_from(url: &str, origin: &str) -> u16 {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "page", "version": "0"}}});
    let resp = reqwest::Client::new()
        .post(url)
        .header("accept", crate::support::mcp::ACCEPT_BOTH)
        .header("content-type", "application/json")
        .header("origin", origin)
        .body(init.to_string())
        .send()
        .await
        .expect("POST");
    resp.status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_changes_the_allowed_origins_for_the_next_request() {
    let _suite = crate::suite::enter(module_path!());
    let server = test_server_toml("t", &[], None);
    let page = "http://app.example";
    let gateway = mcpmux::start(config("", &server)).await.expect("gateway starts");
    let url = gateway.url();
    assert_eq!(initialize_from(&url, page).await, 403, "a foreign origin");
    let allowing = config(&format!("allowed_origins = [{page:?}]\n"), &server);
    let done = gateway.reload(allowing).await.expect("reload");
    assert!(done.needs_restart.is_empty(), "{done:?}");
    assert_eq!(initialize_from(&url, page).await, 200, "admitted at once");
    gateway.reload(config("", &server)).await.expect("reload");
    assert_eq!(initialize_from(&url, page).await, 403, "refused again");
    gateway.stop().await;
}

/// The protected resource metadata at `path` below the well-known path: status and `resource`.
async fn metadata(gateway: &mcpmux::Gateway, path: &str) -> (u16, Value) {
    let url = format!(
        "http://{}/.well-known/oauth-protected-resource{path}",
        gateway.local_addr()
    );
    let resp = reqwest::get(url).await.expect("GET metadata");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    let doc: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    (status, doc["resource"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_adding_auth_and_moving_public_url_applies_to_the_next_request() {
    let _suite = crate::suite::enter(module_path!());
    let server = test_server_toml("t", &[], None);
    let gateway = mcpmux::start(config("", &server)).await.expect("gateway starts");
    let url = gateway.url();
    let open = RawSession::open(&url, json!({})).await;
    assert_eq!(metadata(&gateway, "/mcp").await.0, 404, "no [auth], no metadata");

    // [auth] added: the next request needs a key, the metadata is served.
    let public = "public_url = \"https://a.example/mcp\"\n";
    let done = gateway
        .reload(config(public, &format!("[auth]\n{ALICE}\n{server}")))
        .await
        .expect("reload");
    assert!(done.auth_changed && done.needs_restart.is_empty(), "{done:?}");
    assert_eq!(echo_status(&open).await, 401, "an unauthenticated session");
    let refused = RawSession::try_open(&url, json!({}), "2025-11-25").await;
    assert!(refused.err().is_some_and(|e| e.contains("401")));
    assert_eq!(
        metadata(&gateway, "/mcp").await,
        (200, json!("https://a.example/mcp"))
    );
    let alice = RawSession::open_as(&url, "alice-key-0123456789").await;
    assert_eq!(
        alice.tool_text("t__echo", json!({"message": "a"})).await,
        "echo: a"
    );

    // public_url moved behind a proxy prefix: the metadata names it, under both paths.
    let moved = "public_url = \"https://b.example/gw/mcp\"\n";
    let done = gateway
        .reload(config(moved, &format!("[auth]\n{ALICE}\n{server}")))
        .await
        .expect("reload");
    assert!(done.needs_restart.is_empty(), "{done:?}");
    for path in ["/mcp", "/gw/mcp", ""] {
        assert_eq!(
            metadata(&gateway, path).await,
            (200, json!("https://b.example/gw/mcp")),
            "{path}"
        );
    }
    let challenge = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .expect("POST");
    let www = challenge.headers()["www-authenticate"]
        .to_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        www.contains("https://b.example/.well-known/oauth-protected-resource/gw/mcp"),
        "{www}"
    );
    assert_eq!(
        alice.tool_text("t__echo", json!({"message": "b"})).await,
        "echo: b"
    );
    gateway.stop().await;
}
