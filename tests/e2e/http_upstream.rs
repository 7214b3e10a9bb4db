//! A Streamable HTTP upstream (server-everything) behind mcpmux: SSE replies with priming
//! events, the session header, and the transparent re-initialize after the upstream forgets us.

use crate::support::mcp::*;
use crate::support::*;
use serde_json::json;

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
