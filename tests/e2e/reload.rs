//! Reload by diff end to end (`mcpmux serve`, SIGHUP): a server added starts, one removed stops
//! (its call in flight ends with an error naming the removal, its child is reaped), one changed
//! restarts, one only reshaped and the untouched one keep their process and their calls in flight, under load from
//! a session-era host and a 2026-07-28 host that keep working without re-initializing and are
//! each told once that the tools changed; a broken edit leaves everything serving and `/status`
//! shows it. Real server-everything (stdio, pinned) and the in-repo test server.

use crate::support::mcp::{messages, RawSession, ACCEPT_BOTH};
use crate::support::serve::ServeProcess;
use crate::support::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

const MODERN: &str = "2026-07-28";
/// How long after a reload the hosts' streams are watched for more `list_changed` than one.
const QUIET: Duration = Duration::from_secs(2);

fn everything_toml() -> String {
    let (cmd, args) = peers().everything_stdio_cmd();
    format!(
        "[servers.everything]\ncommand = {cmd:?}\nargs = {}\n",
        toml_list(&args)
    )
}

/// The config file's text: the listener, then `servers`.
fn config_text(port: u16, servers: &[String]) -> String {
    format!(
        "[gateway]\nlisten = \"127.0.0.1:{port}\"\n\n{}",
        servers.join("\n")
    )
}

fn envelope() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-modern", "version": "1"}
    })
}

/// A 2026-07-28 request (no session) to `url`.
fn modern(http: &reqwest::Client, url: &str, method: &str, params: Value) -> reqwest::RequestBuilder {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    http.post(url)
        .header("accept", ACCEPT_BOTH)
        .header("content-type", "application/json")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", method)
        .body(body.to_string())
}

/// The response (the message with an id) among a request's messages.
async fn answer(mut rx: mpsc::Receiver<Value>) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(msg)) if msg.get("result").is_some() || msg.get("error").is_some() => return msg,
            Ok(Some(_)) => {}
            Ok(None) => panic!("the response ended without an answer"),
            Err(_) => panic!("no answer within 60 s"),
        }
    }
}

/// A 2026-07-28 tool call's answer.
async fn modern_call(http: &reqwest::Client, url: &str, name: &str, args: Value) -> Value {
    let params = json!({"name": name, "arguments": args, "_meta": envelope()});
    let resp = (modern(http, url, "tools/call", params)
        .header("mcp-name", name)
        .send()
        .await)
        .expect("POST");
    answer(messages(resp)).await
}

/// The pid the test server `whoami` reports.
async fn whoami(host: &RawSession, server: &str) -> u64 {
    let text = host.tool_text(&format!("{server}__whoami"), json!({})).await;
    let me: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("whoami: {text}"));
    me["pid"].as_u64().unwrap_or_else(|| panic!("whoami: {text}"))
}

/// The gateway's child processes whose command line contains `needle`.
fn children_running(gateway_pid: u32, needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    let tasks = std::fs::read_dir(format!("/proc/{gateway_pid}/task")).expect("the gateway's threads");
    for task in tasks.flatten() {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for pid in children.split_whitespace().filter_map(|p| p.parse::<u32>().ok()) {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(needle) {
                found.push(pid);
            }
        }
    }
    found
}

/// Whether `pid` names a process at all (a zombie, not yet reaped, still does).
fn exists(pid: u64) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Every message that arrived on `rx` within `window`.
async fn drain_for(rx: &mut mpsc::Receiver<Value>, window: Duration) -> Vec<Value> {
    let until = tokio::time::Instant::now() + window;
    let mut got = Vec::new();
    while let Ok(Some(msg)) = tokio::time::timeout_at(until, rx.recv()).await {
        got.push(msg);
    }
    got
}

fn count(messages: &[Value], method: &str) -> usize {
    messages.iter().filter(|m| m["method"] == method).count()
}

async fn status(port: u16) -> Value {
    let text = reqwest::get(format!("http://127.0.0.1:{port}/status"))
        .await
        .expect("GET /status")
        .text()
        .await
        .unwrap_or_default();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("/status is not JSON ({e}): {text}"))
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_adds_removes_and_restarts_only_what_changed_and_tells_hosts_once() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("reload-diff");
    let (keep_log, gone_log) = (dir.join("keep.jsonl"), dir.join("gone.jsonl"));
    let keep = test_server_toml("keep", &[], Some(&keep_log));
    let gone = test_server_toml("gone", &[], Some(&gone_log));
    // Per session: the host's own connection to it must restart too.
    let per_session = "isolation = \"per-session\"\n";
    let edit_before = test_server_toml("edit", &[], None) + per_session;
    let edit_after = test_server_toml("edit", &["--tools", "2"], None) + per_session;
    let fresh = test_server_toml("fresh", &[], None);
    let before = [everything_toml(), keep.clone(), gone, edit_before].join("\n");
    let mut gateway = ServeProcess::start(&dir, "", &before, &dir, &[]);
    let url = gateway.url();
    gateway
        .wait_tools(&["everything__echo", "keep__echo", "gone__slow", "edit__echo"])
        .await;

    // A session-era host with its GET stream, a 2026-07-28 host listening, and load on `keep`.
    let host = Arc::new(RawSession::open(&url, json!({})).await);
    let mut session_stream = host.get_stream().await;
    let http = reqwest::Client::new();
    let listen = json!({"notifications": {"toolsListChanged": true}, "_meta": envelope()});
    let resp = (modern(&http, &url, "subscriptions/listen", listen).send().await).expect("listen");
    assert_eq!(resp.status().as_u16(), 200);
    let mut listen_stream = messages(resp);
    let ack = drain_for(&mut listen_stream, Duration::from_secs(5)).await;
    assert_eq!(
        count(&ack, "notifications/subscriptions/acknowledged"),
        1,
        "{ack:?}"
    );

    let everything_js = path_str(&peers().everything_js);
    let everything_pids = children_running(gateway.guard.pid(), &everything_js);
    assert_eq!(everything_pids.len(), 1, "one server-everything child");
    let (keep_pid, edit_pid, gone_pid) = (
        whoami(&host, "keep").await,
        whoami(&host, "edit").await,
        whoami(&host, "gone").await,
    );

    let stop_load = Arc::new(AtomicBool::new(false));
    let (load_ok, load_failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let load = {
        let (stop, ok, failed) = (stop_load.clone(), load_ok.clone(), load_failed.clone());
        let load_host = RawSession::open(&url, json!({})).await;
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let resp = load_host
                    .call(
                        "tools/call",
                        json!({"name": "keep__echo", "arguments": {"message": "x"}}),
                    )
                    .await;
                let counter = if resp["result"]["content"][0]["text"].is_string() {
                    &ok
                } else {
                    &failed
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }
        })
    };

    // Calls in flight: long ones on the untouched servers, one on the server about to go.
    let call = |name: &'static str, args: Value| {
        let host = host.clone();
        tokio::spawn(async move {
            host.call("tools/call", json!({"name": name, "arguments": args}))
                .await
        })
    };
    let keep_slow = call("keep__slow", json!({"ms": 8000}));
    let everything_long = call(
        "everything__trigger-long-running-operation",
        json!({"duration": 6, "steps": 3}),
    );
    let gone_slow = call("gone__slow", json!({"ms": 30000}));
    wait_upstream_call(&keep_log, "slow").await;
    wait_upstream_call(&gone_log, "slow").await;

    // One edit: `fresh` added, `gone` removed, `edit` changed, `everything` and `keep` untouched.
    // `keep` is only reshaped: its generated tools go, the server runs on.
    let keep_shaped = format!("{keep}tools = {{ exclude = [\"gen_*\"] }}\n");
    let after = [everything_toml(), keep_shaped, edit_after, fresh];
    std::fs::write(&gateway.config, config_text(gateway.port, &after)).unwrap();
    gateway.signal(libc::SIGHUP);
    gateway.wait_reload("configuration reloaded").await;

    let gone_answer = gone_slow.await.unwrap();
    let message = gone_answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("removed from the configuration"),
        "the removed server's call ends with an error naming the removal: {gone_answer}"
    );
    let session_seen = drain_for(&mut session_stream, QUIET).await;
    let listen_seen = drain_for(&mut listen_stream, Duration::from_millis(100)).await;
    assert_eq!(
        count(&session_seen, "notifications/tools/list_changed"),
        1,
        "the session-era host is told once: {session_seen:?}"
    );
    assert_eq!(
        count(&listen_seen, "notifications/tools/list_changed"),
        1,
        "the listening host is told once: {listen_seen:?}"
    );

    // The untouched servers: the same processes, and their long calls completed.
    let slept = keep_slow.await.unwrap();
    assert_eq!(slept["result"]["content"][0]["text"], "slept 8000", "{slept}");
    let long = everything_long.await.unwrap();
    let long_text = long["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(long_text.contains("Long running operation completed"), "{long}");
    assert_eq!(whoami(&host, "keep").await, keep_pid, "keep was not restarted");
    assert_eq!(
        children_running(gateway.guard.pid(), &everything_js),
        everything_pids,
        "server-everything was not restarted"
    );
    // The changed one restarted; the removed one's child is gone (reaped, not a zombie).
    assert_ne!(whoami(&host, "edit").await, edit_pid, "edit restarted");
    let deadline = Instant::now() + Duration::from_secs(15);
    while exists(gone_pid) {
        assert!(
            Instant::now() < deadline,
            "the removed server's child {gone_pid} is still there"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Both hosts keep working without re-initializing, and see the new catalog.
    let (tools, _) = host.list_all("tools/list", "tools").await;
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(
        names.contains(&"fresh__echo") && names.contains(&"edit__gen_001"),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.starts_with("gone__")), "{names:?}");
    assert!(
        names.contains(&"keep__echo") && !names.contains(&"keep__gen_000"),
        "{names:?}"
    );
    assert_eq!(
        host.tool_text("fresh__echo", json!({"message": "hi"})).await,
        "echo: hi"
    );
    let modern_echo = modern_call(&http, &url, "fresh__echo", json!({"message": "modern"})).await;
    assert_eq!(
        modern_echo["result"]["content"][0]["text"], "echo: modern",
        "{modern_echo}"
    );
    let unknown = host
        .call(
            "tools/call",
            json!({"name": "gone__echo", "arguments": {"message": "x"}}),
        )
        .await;
    assert!(unknown.get("error").is_some(), "{unknown}");

    stop_load.store(true, Ordering::Relaxed);
    load.await.unwrap();
    assert_eq!(
        load_failed.load(Ordering::Relaxed),
        0,
        "calls on keep during the reload failed"
    );
    assert!(load_ok.load(Ordering::Relaxed) > 0);

    let doc = status(gateway.port).await;
    let digest = mcpmux::reload::file_digest(&gateway.config).unwrap();
    assert_eq!(doc["config"]["last_reload"]["outcome"], "ok", "{doc}");
    assert_eq!(doc["config"]["digest"], digest.as_str(), "{doc}");
    let loaded_at = doc["config"]["loaded_at_unix"].clone();
    let upstreams: Vec<&str> = (doc["upstreams"].as_array().unwrap().iter())
        .filter_map(|u| u["name"].as_str())
        .collect();
    assert_eq!(upstreams, vec!["everything", "keep", "edit", "fresh"]);

    // A broken edit: refused, logged, shown by /status; everything serves on, nobody is told.
    std::fs::write(
        &gateway.config,
        format!(
            "{}\n[servers.broken]\ncommand = 7\n",
            config_text(gateway.port, &after)
        ),
    )
    .unwrap();
    gateway.signal(libc::SIGHUP);
    gateway.wait_reload("reload refused, nothing changed").await;
    let doc = status(gateway.port).await;
    let last = &doc["config"]["last_reload"];
    assert_eq!(last["outcome"], "error", "{doc}");
    assert!(
        last["error"]
            .as_str()
            .is_some_and(|e| e.contains("[servers.broken]")),
        "the error says what is wrong: {doc}"
    );
    assert_eq!(
        doc["config"]["digest"],
        digest.as_str(),
        "the last good load stays"
    );
    assert_eq!(doc["config"]["loaded_at_unix"], loaded_at);
    assert_eq!(
        host.tool_text("keep__echo", json!({"message": "still"})).await,
        "echo: still"
    );
    assert_eq!(whoami(&host, "keep").await, keep_pid);
    let quiet = drain_for(&mut session_stream, Duration::from_millis(500)).await;
    assert_eq!(count(&quiet, "notifications/tools/list_changed"), 0, "{quiet:?}");

    gateway.signal(libc::SIGTERM);
    assert!(gateway.wait_exit(Duration::from_secs(30)).await.success());
}

/// The Python SDK in both eras, connected while a reload adds a server: each is told once, then
/// lists and calls the new server's tool on the same connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_clients_of_both_eras_are_told_once_and_use_an_added_server() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("reload-sdk");
    let first = test_server_toml("first", &[], None);
    let mut gateway = ServeProcess::start(&dir, "", &first, &dir, &[]);
    let url = gateway.url();
    gateway.wait_tools(&["first__echo"]).await;
    let markers = [dir.join("legacy.ready"), dir.join("modern.ready")];
    let run = |mode: &'static str, marker: &std::path::Path| {
        let (url, marker) = (url.clone(), path_str(marker));
        tokio::spawn(async move {
            let args = [marker.as_str(), "added__echo", "--mode", mode];
            run_py_client_async(&url, "reload", &args).await
        })
    };
    let legacy = run("legacy", &markers[0]);
    let modern = run(MODERN, &markers[1]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !markers.iter().all(|m| m.exists()) {
        assert!(Instant::now() < deadline, "the SDK clients did not connect");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let added = test_server_toml("added", &[], None);
    std::fs::write(&gateway.config, config_text(gateway.port, &[first, added])).unwrap();
    gateway.signal(libc::SIGHUP);
    gateway.wait_reload("configuration reloaded").await;
    for (run, mode) in [(legacy.await.unwrap(), "legacy"), (modern.await.unwrap(), MODERN)] {
        run.assert_ok();
        assert_eq!(run.json["list_changed"], 1, "{mode}: {run}");
        if mode == MODERN {
            assert_eq!(run.json["events"], json!(["ToolsListChanged"]), "{run}");
        }
        assert_eq!(run.json["text"], "echo: sdk", "{mode}: {run}");
    }
    gateway.signal(libc::SIGTERM);
    assert!(gateway.wait_exit(Duration::from_secs(30)).await.success());
}
