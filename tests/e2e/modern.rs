//! The stateless era (2026-07-28) end to end: Python mcp 2.3.0 clients in forced-modern and
//! legacy mode at the same time, in front of server-everything (session era, stdio) and a Python
//! mcp 2.3.0 server (modern, Streamable HTTP); sampling bridged both ways; listen streams; the
//! header and version rules; cancellation by closing the request's stream.

use crate::support::mcp::RawSession;
use crate::support::*;
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

const MODERN: &str = "2026-07-28";

/// Start the modern Python upstream on a free port; returns its guard and URL.
fn start_modern_upstream() -> (ChildGuard, String) {
    let port = free_port();
    let mut cmd = Command::new(&peers().python);
    cmd.arg(repo_root().join("tests/fixtures/py_modern_server.py"))
        .arg(port.to_string());
    let log = log_dir().join(format!("py-modern-server-{port}.log"));
    let guard = spawn_server(cmd, port, &log, "py_modern_server.py");
    (guard, format!("http://127.0.0.1:{port}/mcp"))
}

fn run_py_modern(url: &str, args: &[&str]) -> ClientRun {
    let mut cmd = Command::new(&peers().python);
    cmd.arg(repo_root().join("tests/clients/py_modern.py"))
        .arg(url)
        .args(args);
    run_client(cmd, Duration::from_secs(90))
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("blocking task")
}

/// The gateway in front of server-everything (stdio) and the modern Python server (HTTP).
/// server-everything runs per session: a shared stdio connection cannot tell which host a
/// sampling request is for when two hosts call at once (see the README's attribution rule).
async fn mixed_gateway(everything_isolation: &str) -> (mcpmux::Gateway, ChildGuard) {
    let (upstream, upstream_url) = blocking(start_modern_upstream).await;
    let (cmd, args) = peers().everything_stdio_cmd();
    let servers = format!(
        "[servers.everything]\ncommand = {cmd:?}\nargs = {}\nisolation = {everything_isolation:?}\n\n[servers.pym]\nurl = {upstream_url:?}\n",
        toml_list(&args)
    );
    (boot_gateway(&servers, "").await, upstream)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_eras_side_by_side_with_sampling_bridged_both_ways() {
    let _suite = crate::suite::enter(module_path!());
    let (gw, _upstream) = mixed_gateway("per-session").await;
    let url = gw.url();
    let everything = |mode: &'static str| {
        let url = url.clone();
        blocking(move || {
            let args = ["--mode", mode, "--prefix", "everything__"];
            run_py_client(&url, "everything", &args)
        })
    };
    let ask = |mode: &'static str| {
        let url = url.clone();
        blocking(move || run_py_modern(&url, &["ask", "pym__ask", "--mode", mode]))
    };
    let (modern_all, legacy_all, legacy_ask, modern_ask) = tokio::join!(
        everything(MODERN),
        everything("legacy"),
        ask("legacy"),
        ask(MODERN)
    );

    // A modern host: sampling and elicitation from a session-era upstream became input-required
    // results, progress rode the request's stream.
    modern_all.assert_ok();
    assert_eq!(modern_all.json["protocol_version"], MODERN, "{modern_all}");
    assert!(
        modern_all.json["sampling_calls"].as_u64() >= Some(1),
        "{modern_all}"
    );
    assert_eq!(modern_all.json["elicitation_accepted"], true, "{modern_all}");
    assert!(
        modern_all.json["progress"]
            .as_array()
            .is_some_and(|p| p.len() >= 3),
        "{modern_all}"
    );
    // A session-era host at the same time, unaffected.
    legacy_all.assert_ok();
    assert_ne!(legacy_all.json["protocol_version"], MODERN, "{legacy_all}");
    // A modern upstream's input-required result: real sampling requests to the legacy host...
    legacy_ask.assert_ok();
    assert_eq!(legacy_ask.json["protocol_version"], "2025-11-25", "{legacy_ask}");
    // ...and passed through, requestState untouched, to the modern host.
    modern_ask.assert_ok();
    assert_eq!(modern_ask.json["protocol_version"], MODERN, "{modern_ask}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_streams_and_session_streams_both_receive_list_changed() {
    let _suite = crate::suite::enter(module_path!());
    let (gw, _upstream) = mixed_gateway("shared").await;
    let url = gw.url();
    let run = blocking(move || run_py_modern(&url, &["listen", "pym__add_tool", "made_at_runtime"])).await;
    run.assert_ok();
    assert_eq!(run.json["subscription_id"], "listen-1", "{run}");
    assert_eq!(run.json["legacy_notified"], true, "{run}");
    let tools = run.json["tools"].as_array().cloned().unwrap_or_default();
    assert!(tools.contains(&json!("pym__made_at_runtime")), "{run}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_param_headers_are_checked_from_hosts_and_recomputed_for_a_modern_upstream() {
    let _suite = crate::suite::enter(module_path!());
    let (gw, _upstream) = mixed_gateway("shared").await;
    // A non-ASCII value travels in the =?base64?...?= form; the Python server refuses a call
    // whose Mcp-Param-Region header is missing or differs from the argument.
    let arguments = json!({"region": "Zürich", "text": "grüezi"}).to_string();
    let expected = "Zürich: grüezi";
    for mode in [MODERN, "legacy"] {
        let (url, arguments) = (gw.url(), arguments.clone());
        let args = ["call", "pym__regional", &arguments, expected, "--mode", mode].map(String::from);
        let run = blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run_py_modern(&url, &args)
        })
        .await;
        run.assert_ok();
    }

    // A raw modern call whose header disagrees with the argument is refused before any upstream.
    let m = Modern {
        http: reqwest::Client::new(),
        url: gw.url(),
    };
    let call =
        json!({"name": "pym__regional", "arguments": {"region": "Bern", "text": "x"}, "_meta": envelope()});
    let req = m
        .request("tools/call", call)
        .header("mcp-name", "pym__regional")
        .header("mcp-param-region", "Basel");
    let (status, mismatch) = m.send(req).await;
    assert_eq!(
        (status, mismatch["error"]["code"].clone()),
        (400, json!(-32020)),
        "{mismatch}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_subscriptions_reach_a_modern_upstream_through_its_listen_filter() {
    let _suite = crate::suite::enter(module_path!());
    let (gw, _upstream) = mixed_gateway("shared").await;
    let url = gw.url();
    let run = blocking(move || run_py_modern(&url, &["watch", "pym__set_note"])).await;
    run.assert_ok();
    assert_eq!(run.json["listen_event"], "ResourceUpdated", "{run}");

    // The modern upstream's list hints (tools 30 s public, resources 45 s private) combine with
    // server-everything's part: the shortest lifetime, the most private scope.
    let m = Modern {
        http: reqwest::Client::new(),
        url: gw.url(),
    };
    for (method, max_ttl, scope) in [
        ("tools/list", 30_000, "public"),
        ("resources/list", 45_000, "private"),
    ] {
        let (status, list) = m.send(m.request(method, json!({"_meta": envelope()}))).await;
        assert_eq!(status, 200, "{list}");
        let ttl = list["result"]["ttlMs"].as_u64().unwrap_or(u64::MAX);
        assert!(ttl > 0 && ttl <= max_ttl, "{method}: {list}");
        assert_eq!(list["result"]["cacheScope"], scope, "{method}: {list}");
    }
    gw.stop().await;
}

/// A raw modern request to the gateway.
struct Modern {
    http: reqwest::Client,
    url: String,
}

fn envelope() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}
    })
}

impl Modern {
    fn request(&self, method: &str, params: Value) -> reqwest::RequestBuilder {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        self.http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", MODERN)
            .header("mcp-method", method)
            .body(body.to_string())
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> (u16, Value) {
        let resp = req.send().await.expect("POST");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        let json = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .chain(std::iter::once(text.as_str()))
            .find_map(|l| serde_json::from_str::<Value>(l).ok())
            .unwrap_or(Value::Null);
        (status, json)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_requests_follow_the_header_and_version_rules() {
    let _suite = crate::suite::enter(module_path!());
    let servers = test_server_toml("t", &[], None);
    let gw = boot_gateway(&servers, "").await;
    let m = Modern {
        http: reqwest::Client::new(),
        url: gw.url(),
    };

    let (status, discover) = m
        .send(m.request("server/discover", json!({"_meta": envelope()})))
        .await;
    assert_eq!(status, 200, "{discover}");
    let result = &discover["result"];
    assert_eq!(result["supportedVersions"][0], MODERN, "{discover}");
    assert_eq!(result["resultType"], "complete");
    assert!(
        result["ttlMs"].is_u64() && result["cacheScope"].is_string(),
        "{discover}"
    );
    assert!(result["capabilities"]["tools"].is_object(), "{discover}");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcpmux"
    );

    let (status, list) = m
        .send(m.request("tools/list", json!({"_meta": envelope()})))
        .await;
    assert_eq!(status, 200);
    assert_eq!(list["result"]["resultType"], "complete", "{list}");
    assert!(list["result"]["ttlMs"].is_u64(), "{list}");
    assert!(list["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()));

    let call = json!({"name": "t__echo", "arguments": {"message": "hi"}, "_meta": envelope()});
    let (status, ok) = m
        .send(
            m.request("tools/call", call.clone())
                .header("mcp-name", "t__echo"),
        )
        .await;
    assert_eq!(status, 200, "{ok}");
    assert_eq!(ok["result"]["resultType"], "complete", "{ok}");
    // Answered at once and alone: plain JSON, as for session-era hosts.
    let resp = m
        .request("tools/call", call.clone())
        .header("mcp-name", "t__echo")
        .send()
        .await
        .expect("POST");
    assert_eq!(resp.headers()["content-type"], "application/json");

    // Mcp-Name says another tool than the body: 400, -32020.
    let (status, mismatch) = m
        .send(
            m.request("tools/call", call.clone())
                .header("mcp-name", "t__other"),
        )
        .await;
    assert_eq!(
        (status, mismatch["error"]["code"].clone()),
        (400, json!(-32020)),
        "{mismatch}"
    );
    // No Mcp-Name at all.
    let (status, missing) = m.send(m.request("tools/call", call)).await;
    assert_eq!(
        (status, missing["error"]["code"].clone()),
        (400, json!(-32020)),
        "{missing}"
    );

    // A version mcpmux does not speak: 400, -32022 with the supported list.
    let mut future = envelope();
    future["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let req = m
        .request("tools/list", json!({"_meta": future}))
        .header("mcp-protocol-version", "2099-01-01");
    let (status, unsupported) = m.send(req).await;
    assert_eq!(status, 400, "{unsupported}");
    assert_eq!(unsupported["error"]["code"], -32022);
    assert_eq!(unsupported["error"]["data"]["requested"], "2099-01-01");
    assert!(unsupported["error"]["data"]["supported"]
        .as_array()
        .is_some_and(|v| v.contains(&json!(MODERN))));

    // The modern header without the _meta it requires: 400, -32602.
    let (status, no_meta) = m.send(m.request("tools/list", json!({}))).await;
    assert_eq!(
        (status, no_meta["error"]["code"].clone()),
        (400, json!(-32602)),
        "{no_meta}"
    );
    // A method the 2026-07-28 revision does not have: 404, -32601.
    let (status, ping) = m.send(m.request("ping", json!({"_meta": envelope()}))).await;
    assert_eq!(
        (status, ping["error"]["code"].clone()),
        (404, json!(-32601)),
        "{ping}"
    );
    // A requestState that mcpmux did not seal is refused.
    let forged =
        json!({"name": "t__echo", "arguments": {}, "requestState": "mcpmux1.e30.AAAA", "_meta": envelope()});
    let (status, refused) = m
        .send(m.request("tools/call", forged).header("mcp-name", "t__echo"))
        .await;
    assert_eq!(
        (status, refused["error"]["code"].clone()),
        (400, json!(-32602)),
        "{refused}"
    );

    // GET and DELETE of a modern-only exchange: 405.
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let resp = m
            .http
            .request(method.clone(), &m.url)
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", MODERN)
            .send()
            .await
            .expect("request");
        assert_eq!(resp.status().as_u16(), 405, "{method}");
    }
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_modern_stream_cancels_the_call_upstream() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("modern-cancel");
    let log = dir.join("upstream.jsonl");
    let gw = boot_gateway(&test_server_toml("t", &[], Some(&log)), "").await;
    let m = Modern {
        http: reqwest::Client::new(),
        url: gw.url(),
    };
    let call = json!({"name": "t__slow", "arguments": {"ms": 20000}, "_meta": envelope()});
    let resp = m
        .request("tools/call", call)
        .header("mcp-name", "t__slow")
        .send()
        .await
        .expect("POST");
    assert_eq!(resp.status().as_u16(), 200);
    // Wait until the upstream has the call, then hang up.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !upstream_log(&log).iter().any(|m| m["method"] == "tools/call") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the call never reached the upstream"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(resp);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let seen = upstream_log(&log);
        let call_id = seen
            .iter()
            .find(|m| m["method"] == "tools/call")
            .map(|m| m["id"].clone());
        let cancelled = seen
            .iter()
            .find(|m| m["method"] == "notifications/cancelled")
            .map(|m| m["params"]["requestId"].clone());
        if let (Some(call_id), Some(cancelled)) = (call_id, cancelled) {
            assert_eq!(call_id, cancelled, "the cancellation names the upstream's id");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no notifications/cancelled upstream: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    gw.stop().await;
}

/// Whether a result carries the modern upstream's own identity.
fn names_upstream(result: &Value) -> bool {
    let info = &result["_meta"]["io.modelcontextprotocol/serverInfo"];
    !info.is_null() && info["name"] != "mcpmux"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_upstreams_envelope_and_identity_reach_no_host() {
    let _suite = crate::suite::enter(module_path!());
    let (gw, _upstream) = mixed_gateway("shared").await;
    // A 2025-11-25 host sees what a server of its own revision sends: no resultType, no
    // upstream serverInfo (mcpmux is its server).
    let s = RawSession::open(&gw.url(), json!({})).await;
    let calls = [
        (
            "tools/call",
            json!({"name": "pym__set_note", "arguments": {"text": "hi"}}),
        ),
        ("resources/read", json!({"uri": "mcpmux://pym/note://pad"})),
    ];
    for (method, params) in &calls {
        let resp = s.call(method, params.clone()).await;
        let result = &resp["result"];
        assert!(result.is_object(), "{method}: {resp}");
        for key in ["resultType", "ttlMs", "cacheScope"] {
            assert!(
                result.get(key).is_none(),
                "{method}: {key} reached a 2025-11-25 host: {resp}"
            );
        }
        assert!(
            result["_meta"]
                .get("io.modelcontextprotocol/serverInfo")
                .is_none(),
            "{method}: {resp}"
        );
    }
    // A modern host gets the modern envelope, with mcpmux's identity only.
    let m = Modern {
        http: reqwest::Client::new(),
        url: gw.url(),
    };
    let call = json!({"name": "pym__set_note", "arguments": {"text": "x"}, "_meta": envelope()});
    let (status, resp) = m
        .send(m.request("tools/call", call).header("mcp-name", "pym__set_note"))
        .await;
    assert_eq!(status, 200, "{resp}");
    assert_eq!(resp["result"]["resultType"], "complete", "{resp}");
    assert!(!names_upstream(&resp["result"]), "{resp}");
    assert_eq!(
        resp["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mcpmux",
        "{resp}"
    );
    gw.stop().await;
}
