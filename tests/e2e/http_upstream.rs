//! A Streamable HTTP upstream (server-everything) behind mcpmux: SSE replies with priming
//! events, the session header, and the transparent re-initialize after the upstream forgets us.

use crate::support::mcp::*;
use crate::support::*;
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_upstream_restart_is_survived_by_a_transparent_reinitialize() {
    let _suite = crate::suite::enter(module_path!());
    let port = free_port();
    let server = tokio::task::spawn_blocking(move || start_everything_http(port))
        .await
        .unwrap();
    let servers = format!("[servers.web]\nurl = \"http://127.0.0.1:{port}/mcp\"\n");
    let gw = boot_gateway(&servers, "").await;
    let s = RawSession::open(&gw.url(), json!({"sampling":{}})).await;
    assert_eq!(
        s.tool_text("web__echo", json!({"message":"before"})).await,
        "Echo: before"
    );
    let sum = s.tool_text("web__get-sum", json!({"a": 2, "b": 40})).await;
    assert!(sum.contains("42"), "{sum}");

    // The upstream restarts and no longer knows mcpmux's session: a new one is opened, either
    // transparently (the restart was quick) or by the supervisor (mcpmux saw the server gone:
    // a refused connection takes the upstream down until it is back).
    drop(server);
    let _server = tokio::task::spawn_blocking(move || start_everything_http(port))
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(40);
    loop {
        let reply = s
            .call(
                "tools/call",
                json!({"name": "web__echo", "arguments": {"message": "after"}}),
            )
            .await;
        if reply["result"]["content"][0]["text"] == "Echo: after" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never back: {reply}");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_http_upstream_is_named_and_others_keep_working() {
    let _suite = crate::suite::enter(module_path!());
    let dead = free_port();
    let servers = format!(
        "[servers.gone]\nurl = \"http://127.0.0.1:{dead}/mcp\"\n\n{}",
        test_server_toml("ok", &["--tools", "0"], None)
    );
    let gw = boot_gateway(&servers, "").await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    assert_eq!(
        s.tool_text("ok__echo", json!({"message":"fine"})).await,
        "echo: fine"
    );
    let (tools, _) = s.list_all("tools/list", "tools").await;
    assert!(tools
        .iter()
        .all(|t| !t["name"].as_str().unwrap().starts_with("gone__")));
    gw.stop().await;
}

/// A server configured at a URL that redirects within its origin (the Python SDK serves `/mcp`
/// and answers `/mcp/` with 307) is opened, listed and called at the URL that answered, in both
/// eras; a redirect to another origin is not followed (the configured headers would go along)
/// and the upstream's `last_error` says where it leads and what to set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_followed_within_the_origin_only() {
    let _suite = crate::suite::enter(module_path!());
    let port = free_port();
    let mut cmd = std::process::Command::new(&peers().python);
    cmd.arg(repo_root().join("tests/fixtures/py_modern_server.py"))
        .arg(port.to_string());
    let log = log_dir().join(format!("py-redirected-{port}.log"));
    let _server = tokio::task::spawn_blocking(move || spawn_server(cmd, port, &log, "py_modern_server.py"))
        .await
        .expect("start the Python server");
    // A redirect to the server from another origin (another port).
    let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let elsewhere_port = elsewhere.local_addr().expect("addr").port();
    let target = format!("http://127.0.0.1:{port}/mcp");
    let redirect = axum::Router::new().fallback(move || {
        let target = target.clone();
        async move {
            (
                axum::http::StatusCode::TEMPORARY_REDIRECT,
                [(axum::http::header::LOCATION, target)],
            )
        }
    });
    tokio::spawn(async move { axum::serve(elsewhere, redirect).await });

    let servers = format!(
        "[servers.modern]\nurl = \"http://127.0.0.1:{port}/mcp/\"\nheaders = {{ X-Api-Key = \"k\" }}\n\n\
         [servers.session]\nurl = \"http://127.0.0.1:{port}/mcp/\"\nera = \"session\"\n\n\
         [servers.moved]\nurl = \"http://127.0.0.1:{elsewhere_port}/mcp\"\nheaders = {{ X-Api-Key = \"k\" }}\n"
    );
    let gw = boot_gateway(&servers, "").await;
    let status_url = format!("http://{}/status", gw.local_addr());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let doc = loop {
        let text = reqwest::get(&status_url)
            .await
            .expect("GET /status")
            .text()
            .await
            .expect("a status document");
        let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let phase = |i: usize| doc["upstreams"][i]["phase"].as_str().unwrap_or("").to_string();
        if phase(0) == "ready" && phase(1) == "ready" && doc["upstreams"][2]["last_error"].is_string() {
            break doc;
        }
        assert!(std::time::Instant::now() < deadline, "did not settle: {doc}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(doc["upstreams"][0]["era"], "stateless", "{doc}");
    assert_eq!(doc["upstreams"][1]["era"], "session", "{doc}");
    for i in [0, 1] {
        assert!(
            doc["upstreams"][i]["tools"].as_u64() > Some(0),
            "tools listed: {doc}"
        );
    }
    let moved = &doc["upstreams"][2];
    assert_ne!(moved["phase"], "ready", "{doc}");
    let why = moved["last_error"].as_str().unwrap_or_default();
    assert!(
        why.contains("another origin") && why.contains(&format!("127.0.0.1:{port}/mcp")),
        "{why}"
    );
    let s = RawSession::open(&gw.url(), json!({})).await;
    for name in ["modern__regional", "session__regional"] {
        let text = s.tool_text(name, json!({"region": "eu", "text": "hi"})).await;
        assert_eq!(text, "eu: hi", "{name}");
    }
    gw.stop().await;
}
