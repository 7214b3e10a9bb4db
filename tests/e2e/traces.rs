//! OpenTelemetry traces end to end: an OTLP/HTTP receiver in the test collects what mcpmux
//! exports (OTLP JSON); hosts send a `traceparent` header (session era) or `_meta.traceparent`
//! (2026-07-28) through mcpmux to the in-repo test server (stdio, its `echo_meta` tool reports
//! the `_meta` it got) and to an HTTP upstream (reports its headers and `_meta`). The trace links
//! host → SERVER span → CLIENT span → upstream, the audit log names the same trace, and no
//! argument or token is exported. A collector that is down costs a count, not a call.

use crate::support::mcp::{messages, recv, RawSession, ACCEPT_BOTH};
use crate::support::otlp::*;
use crate::support::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const KEY: &str = "trace-test-key-0123456789abcdef";
/// An argument value that must never reach the collector.
const SECRET_ARG: &str = "argument-value-never-exported-5f1e";
const HOST_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const HOST_SPAN: &str = "b7ad6b7169203331";
const HOST_STATE: &str = "vendor=abc";
const MODERN: &str = "2026-07-28";

/// The test server (`echo_meta`, logging what it receives to `log`) and the HTTP upstream,
/// behind API-key auth, with `[audit]` and `[telemetry]` exporting to `otlp_port`.
fn config(otlp_port: u16, http_url: &str, log: &std::path::Path, audit: &std::path::Path) -> String {
    format!(
        "[telemetry]\notlp_endpoint = \"http://127.0.0.1:{otlp_port}\"\nservice_name = \"edge-gw\"\n\n\
         [auth]\n[[auth.api_keys]]\nname = \"alice\"\nkey = \"{KEY}\"\n\n\
         [audit]\npath = {:?}\n\n\
         {}\n[servers.web]\nurl = {http_url:?}\n",
        path_str(audit),
        test_server_toml("tr", &["--tools", "0", "--echo-meta"], Some(log)),
    )
}

/// A gateway exporting to a collector of the test's own, in front of the test server and the HTTP
/// upstream (see [`config`]), with the upstream's log and the audit log in `scratch_dir(tag)`.
struct Traced {
    collected: Collected,
    gw: mcpmux::Gateway,
    /// What the test server received.
    log: std::path::PathBuf,
    audit: std::path::PathBuf,
}

impl Traced {
    async fn start(tag: &str) -> Traced {
        let (collected, otlp_port) = start_collector("edge-gw").await;
        let http_url = start_http_upstream().await;
        let dir = scratch_dir(tag);
        let (log, audit) = (dir.join("upstream.log"), dir.join("audit.log"));
        let gw = boot_gateway(&config(otlp_port, &http_url, &log, &audit), "").await;
        Traced {
            collected,
            gw,
            log,
            audit,
        }
    }
}

fn authed_client() -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let bearer = format!("Bearer {KEY}");
    headers.insert("authorization", bearer.parse().expect("header"));
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .expect("client")
}

/// A session once both upstreams' tools are listed.
async fn ready_session(url: &str) -> RawSession {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(s) = RawSession::try_open_with(authed_client(), url, json!({}), "2025-11-25").await {
            let list = s.call("tools/list", json!({})).await;
            let names: Vec<&str> = (list["result"]["tools"].as_array().into_iter().flatten())
                .filter_map(|t| t["name"].as_str())
                .collect();
            if names.contains(&"tr__echo_meta") && names.contains(&"web__echo_headers") {
                return s;
            }
        }
        assert!(Instant::now() < deadline, "the tools never showed up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Call `tool` in the session with the host's `traceparent`/`tracestate` headers; the parsed
/// JSON text the tool answered.
async fn traced_call(s: &RawSession, tool: &str) -> Value {
    let id = s.next_id();
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": {"message": SECRET_ARG}}});
    let resp = (s.http.post(&s.url))
        .header("accept", ACCEPT_BOTH)
        .header("content-type", "application/json")
        .header("mcp-session-id", &s.sid)
        .header("mcp-protocol-version", &s.version)
        .header("traceparent", format!("00-{HOST_TRACE}-{HOST_SPAN}-01"))
        .header("tracestate", HOST_STATE)
        .body(body.to_string())
        .send()
        .await
        .expect("POST");
    assert!(resp.status().is_success(), "{tool}: HTTP {}", resp.status());
    let mut rx = messages(resp);
    while let Some(msg) = recv(&mut rx).await {
        if msg["id"] == json!(id) {
            let text = msg["result"]["content"][0]["text"].as_str();
            let text = text.unwrap_or_else(|| panic!("{tool}: {msg}"));
            return serde_json::from_str(text).expect("the tool answers JSON");
        }
    }
    panic!("{tool}: no response");
}

fn audit_trace_ids(path: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["method"] == "tools/call")
        .filter_map(|l| l["trace_id"].as_str().map(String::from))
        .collect()
}

/// Nothing exported carries an argument value or the credential.
fn assert_nothing_secret(collected: &Collected) {
    for body in collected.bodies() {
        assert!(!body.contains(SECRET_ARG), "an argument was exported: {body}");
        assert!(!body.contains(KEY), "the API key was exported: {body}");
    }
    let contains = |raw: &[u8], what: &str| raw.windows(what.len()).any(|w| w == what.as_bytes());
    for raw in collected.raw() {
        assert!(
            !contains(&raw, SECRET_ARG) && !contains(&raw, KEY),
            "a secret in the export"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traceparent_header_links_host_server_client_and_upstream() {
    let _suite = crate::suite::enter(module_path!());
    let Traced {
        collected, gw, audit, ..
    } = Traced::start("traces-header").await;
    let s = ready_session(&gw.url()).await;

    let stdio_seen = traced_call(&s, "tr__echo_meta").await;
    let http_seen = traced_call(&s, "web__echo_headers").await;
    assert_eq!(stdio_seen["tracestate"], HOST_STATE, "{stdio_seen}");
    let stdio_parent = parent_id(&stdio_seen["traceparent"], HOST_TRACE);
    let http_parent = parent_id(&http_seen["header_traceparent"], HOST_TRACE);
    assert_eq!(http_seen["header_tracestate"], HOST_STATE, "{http_seen}");
    assert_eq!(
        http_seen["meta_traceparent"], http_seen["header_traceparent"],
        "the HTTP upstream gets the same context in _meta and in its headers"
    );
    gw.stop().await;

    let spans = collected.spans();
    for (exposed, original, upstream_saw, transport) in [
        ("tr__echo_meta", "echo_meta", &stdio_parent, "pipe"),
        ("web__echo_headers", "echo_headers", &http_parent, "tcp"),
    ] {
        let server = span_named(&spans, &format!("tools/call {exposed}"));
        let client = span_named(&spans, &format!("tools/call {original}"));
        assert_eq!(server["kind"], 2, "SERVER: {server}");
        assert_eq!(client["kind"], 3, "CLIENT: {client}");
        for span in [server, client] {
            assert_eq!(span["traceId"], HOST_TRACE, "{span}");
            assert_eq!(span["traceState"], HOST_STATE, "{span}");
            assert_eq!(attr(span, "mcp.method.name").as_deref(), Some("tools/call"));
            assert_eq!(
                attr(span, "gen_ai.operation.name").as_deref(),
                Some("execute_tool")
            );
            assert!(attr(span, "jsonrpc.request.id").is_some(), "{span}");
            assert_ne!(span["status"]["code"], 2, "{span}");
        }
        assert_eq!(
            server["parentSpanId"], HOST_SPAN,
            "the SERVER span's parent is the host's"
        );
        assert_eq!(
            client["parentSpanId"], server["spanId"],
            "the CLIENT span's parent is the SERVER span"
        );
        assert_eq!(
            &client["spanId"],
            upstream_saw.as_str(),
            "the upstream's parent is the CLIENT span"
        );
        assert_eq!(attr(server, "gen_ai.tool.name").as_deref(), Some(exposed));
        assert_eq!(attr(client, "gen_ai.tool.name").as_deref(), Some(original));
        assert_eq!(
            attr(server, "mcp.protocol.version").as_deref(),
            Some("2025-11-25")
        );
        assert_eq!(attr(server, "mcp.session.id").as_deref(), Some(s.sid.as_str()));
        assert!(attr(client, "mcp.protocol.version").is_some(), "{client}");
        let upstream = exposed.split("__").next();
        assert_eq!(attr(client, "mcpmux.upstream").as_deref(), upstream);
        assert_eq!(attr(server, "network.transport").as_deref(), Some("tcp"));
        assert_eq!(attr(client, "network.transport").as_deref(), Some(transport));
    }
    let web = span_named(&spans, "tools/call echo_headers");
    assert_eq!(attr(web, "server.address").as_deref(), Some("127.0.0.1"));
    assert!(attr(web, "server.port").is_some(), "{web}");
    assert_nothing_secret(&collected);
    let traces = audit_trace_ids(&audit);
    assert!(!traces.is_empty(), "no audit lines");
    assert!(
        traces.iter().all(|t| t == HOST_TRACE),
        "audit trace ids: {traces:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_requests_meta_traceparent_is_its_parent_and_the_rest_of_meta_passes_untouched() {
    let _suite = crate::suite::enter(module_path!());
    let Traced {
        collected,
        gw,
        log,
        audit,
    } = Traced::start("traces-meta").await;
    drop(ready_session(&gw.url()).await);

    // The request's own context (in `_meta`) and another one in the HTTP header: `_meta` wins.
    let meta_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let meta_span = "00f067aa0ba902b7";
    let header_trace = "11111111111111111111111111111111";
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "tr__echo_meta",
        "arguments": {"message": SECRET_ARG},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "traceparent": format!("00-{meta_trace}-{meta_span}-01"),
            "tracestate": "rojo=00f067aa0ba902b7",
            "example.com/keep": {"kept": [1, "two"]}
        }
    }});
    let resp = authed_client()
        .post(gw.url())
        .header("accept", ACCEPT_BOTH)
        .header("content-type", "application/json")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "tr__echo_meta")
        .header("traceparent", format!("00-{header_trace}-2222222222222222-01"))
        .body(body.to_string())
        .send()
        .await
        .expect("POST");
    assert_eq!(resp.status().as_u16(), 200);
    let mut rx = messages(resp);
    let reply = loop {
        let msg = recv(&mut rx).await.expect("a response");
        if msg["id"] == 7 {
            break msg;
        }
    };
    let text = reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{reply}"));
    let seen: Value = serde_json::from_str(text).expect("JSON");
    let upstream_parent = parent_id(&seen["traceparent"], meta_trace);
    assert_eq!(seen["tracestate"], "rojo=00f067aa0ba902b7");
    // The other `_meta` members reached the upstream as the host wrote them.
    let received = upstream_log(&log);
    let call = (received.iter())
        .find(|m| m["method"] == "tools/call" && m["params"]["_meta"].get("traceparent").is_some())
        .expect("the upstream logged the call");
    assert_eq!(
        call["params"]["_meta"]["example.com/keep"],
        json!({"kept": [1, "two"]})
    );
    assert_eq!(call["params"]["arguments"], json!({"message": SECRET_ARG}));
    gw.stop().await;

    let spans = collected.spans();
    let server = span_named(&spans, "tools/call tr__echo_meta");
    let client = span_named(&spans, "tools/call echo_meta");
    assert_eq!(server["traceId"], meta_trace);
    assert_eq!(
        server["parentSpanId"], meta_span,
        "the SERVER span's parent is `_meta`'s"
    );
    assert_eq!(
        server["links"][0]["traceId"], header_trace,
        "linked to the HTTP header's context"
    );
    assert_eq!(attr(server, "mcp.protocol.version").as_deref(), Some(MODERN));
    assert_eq!(
        attr(server, "mcp.session.id"),
        None,
        "a modern request has no session"
    );
    assert_eq!(client["traceId"], meta_trace);
    assert_eq!(client["parentSpanId"], server["spanId"]);
    assert_eq!(client["spanId"], upstream_parent.as_str());
    assert_nothing_secret(&collected);
    let traces = audit_trace_ids(&audit);
    assert!(!traces.is_empty(), "no audit lines");
    assert!(
        traces.iter().all(|t| t == meta_trace),
        "audit trace ids: {traces:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_collector_down_calls_succeed_and_the_dropped_spans_are_counted() {
    let _suite = crate::suite::enter(module_path!());
    let down = free_port();
    let servers = format!(
        "[telemetry]\notlp_endpoint = \"http://127.0.0.1:{down}\"\n\n{}",
        test_server_toml("tr", &["--tools", "0", "--echo-meta"], None)
    );
    let gw = boot_gateway(&servers, "").await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !s
        .call("tools/list", json!({}))
        .await
        .to_string()
        .contains("tr__echo")
    {
        assert!(Instant::now() < deadline, "tr never listed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..3 {
        assert_eq!(
            s.tool_text("tr__echo", json!({"message": "hi"})).await,
            "echo: hi"
        );
    }
    // The exporter sends within a second or so; the count says what it could not deliver.
    let deadline = Instant::now() + Duration::from_secs(30);
    while gw.dropped_spans().unwrap_or(0) < 3 {
        assert!(
            Instant::now() < deadline,
            "dropped spans: {:?}",
            gw.dropped_spans()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The same count is on /metrics (the exposition's counter is at least what was seen here:
    // the exporter may have dropped more since).
    let seen = gw.dropped_spans().unwrap_or(0);
    let exposition = reqwest::get(format!("http://{}/metrics", gw.local_addr()))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("the exposition");
    let counted = (exposition.lines())
        .find_map(|line| line.strip_prefix("mcpmux_trace_spans_dropped_total "))
        .and_then(|value| value.trim().parse::<f64>().ok());
    assert!(
        counted.is_some_and(|n| n >= seen as f64),
        "{counted:?} < {seen}\n{exposition}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_endpoint_nothing_is_traced_and_meta_passes_as_sent() {
    let _suite = crate::suite::enter(module_path!());
    let servers = test_server_toml("tr", &["--tools", "0", "--echo-meta"], None);
    let gw = boot_gateway(&servers, "").await;
    assert_eq!(gw.dropped_spans(), None);
    let s = RawSession::open(&gw.url(), json!({})).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !s
        .call("tools/list", json!({}))
        .await
        .to_string()
        .contains("tr__echo_meta")
    {
        assert!(Instant::now() < deadline, "tr never listed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let host = format!("00-{HOST_TRACE}-{HOST_SPAN}-01");
    let reply = s
        .call(
            "tools/call",
            json!({"name": "tr__echo_meta", "arguments": {}, "_meta": {"traceparent": host}}),
        )
        .await;
    let text = reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{reply}"));
    let seen: Value = serde_json::from_str(text).expect("JSON");
    assert_eq!(
        seen["traceparent"],
        host.as_str(),
        "traces off: the host's own context passes"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_of_a_batch_and_each_legacy_sse_message_gets_its_server_span() {
    let _suite = crate::suite::enter(module_path!());
    let (collected, otlp_port) = start_collector("edge-gw").await;
    let servers = format!(
        "[telemetry]\notlp_endpoint = \"http://127.0.0.1:{otlp_port}\"\nservice_name = \"edge-gw\"\n\n{}",
        test_server_toml("tr", &["--tools", "0", "--echo-meta"], None)
    );
    let gw = boot_gateway(&servers, "").await;
    let s = RawSession::open_version(&gw.url(), json!({}), "2025-03-26").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !s
        .call("tools/list", json!({}))
        .await
        .to_string()
        .contains("tr__echo_meta")
    {
        assert!(Instant::now() < deadline, "tr never listed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A 2025-03-26 batch of two calls under one HTTP traceparent: a SERVER span each.
    let call = |id: i64, tool: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": {"message": SECRET_ARG}}})
    };
    let resp = (s.http.post(&s.url))
        .header("accept", ACCEPT_BOTH)
        .header("content-type", "application/json")
        .header("mcp-session-id", &s.sid)
        .header("mcp-protocol-version", &s.version)
        .header("traceparent", format!("00-{HOST_TRACE}-{HOST_SPAN}-01"))
        .body(json!([call(101, "tr__echo_meta"), call(102, "tr__echo")]).to_string())
        .send()
        .await
        .expect("POST batch");
    assert!(resp.status().is_success(), "batch: HTTP {}", resp.status());
    let mut rx = messages(resp);
    let mut answered = Vec::new();
    while answered.len() < 2 {
        let msg = recv(&mut rx)
            .await
            .unwrap_or_else(|| panic!("batch answers: {answered:?}"));
        if msg.get("result").is_some() {
            answered.push(msg["id"].clone());
        }
    }

    // A legacy SSE host's message names its parent in `_meta` (its POST was answered already).
    let legacy_trace = "5bf92f3577b34da6a3ce929d0e0e4737";
    let legacy_span = "10f067aa0ba902b8";
    let base = format!("http://{}", gw.local_addr());
    let http = reqwest::Client::new();
    let sse = (http.get(format!("{base}/sse")))
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("GET /sse");
    assert_eq!(sse.status(), 200);
    let mut events = sse_messages(sse);
    let first = recv(&mut events).await.expect("the endpoint event");
    let endpoint = format!("{base}{}", first["endpoint"].as_str().expect("endpoint"));
    let post = |body: Value| {
        let request = (http.post(&endpoint))
            .header("content-type", "application/json")
            .body(body.to_string());
        async move { request.send().await.expect("POST").status().as_u16() }
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "legacy", "version": "0"}}});
    assert_eq!(post(init).await, 202);
    crate::support::mcp::wait_for(&mut events, |m| m["id"] == 1).await;
    assert_eq!(
        post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await,
        202
    );
    let traced = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "tr__echo_meta", "arguments": {},
        "_meta": {"traceparent": format!("00-{legacy_trace}-{legacy_span}-01")}}});
    assert_eq!(post(traced).await, 202);
    let reply = crate::support::mcp::wait_for(&mut events, |m| m["id"] == 2).await;
    let text = reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{reply}"));
    let seen: Value = serde_json::from_str(text).expect("JSON");
    let upstream_parent = parent_id(&seen["traceparent"], legacy_trace);

    // Failures are on the spans: a tool's `isError`, and a JSON-RPC error of mcpmux's own.
    let failed = s
        .call("tools/call", json!({"name": "tr__echo", "arguments": {}}))
        .await;
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    let unknown = s
        .call("tools/call", json!({"name": "tr__no_such_tool", "arguments": {}}))
        .await;
    let code = unknown["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("{unknown}"));

    // A parent that says "not sampled" is obeyed: no span, and its context goes on as sent.
    let unsampled = "00-6bf92f3577b34da6a3ce929d0e0e4738-20f067aa0ba902b9-00";
    let reply = (s.call(
        "tools/call",
        json!({"name": "tr__echo_meta", "arguments": {},
        "_meta": {"traceparent": unsampled}}),
    ))
    .await;
    let text = reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{reply}"));
    let seen: Value = serde_json::from_str(text).expect("JSON");
    assert_eq!(seen["traceparent"], unsampled);
    gw.stop().await;

    let spans = collected.spans();
    for name in ["tools/call tr__echo_meta", "tools/call tr__echo"] {
        let batched: Vec<&Value> = (spans.iter())
            .filter(|s| s["name"] == name && s["traceId"] == HOST_TRACE)
            .collect();
        assert_eq!(batched.len(), 1, "{name}: {spans:#?}");
        assert_eq!(batched[0]["parentSpanId"], HOST_SPAN);
        assert_eq!(
            attr(batched[0], "mcp.protocol.version").as_deref(),
            Some("2025-03-26")
        );
    }
    let legacy: Vec<&Value> = (spans.iter())
        .filter(|s| s["kind"] == 2 && s["traceId"] == legacy_trace)
        .collect();
    assert_eq!(legacy.len(), 1, "{spans:#?}");
    assert_eq!(legacy[0]["parentSpanId"], legacy_span);
    assert_eq!(
        attr(legacy[0], "mcp.protocol.version").as_deref(),
        Some("2024-11-05")
    );
    let client = (spans.iter())
        .find(|s| s["kind"] == 3 && s["traceId"] == legacy_trace)
        .unwrap_or_else(|| panic!("no CLIENT span in the legacy trace: {spans:#?}"));
    assert_eq!(client["name"], "tools/call echo_meta");
    assert_eq!(client["parentSpanId"], legacy[0]["spanId"]);
    assert_eq!(client["spanId"], upstream_parent.as_str());
    let tool_errors: Vec<&Value> = (spans.iter())
        .filter(|s| attr(s, "error.type").as_deref() == Some("tool_error"))
        .collect();
    let names: Vec<&Value> = tool_errors.iter().map(|s| &s["name"]).collect();
    assert_eq!(
        names,
        [&json!("tools/call echo"), &json!("tools/call tr__echo")],
        "CLIENT, then SERVER"
    );
    assert!(
        tool_errors.iter().all(|s| s["status"]["code"] == 2),
        "{tool_errors:?}"
    );
    // A name the catalog does not have names no span: the span is named after the method.
    let refused = (spans.iter())
        .find(|s| attr(s, "gen_ai.tool.name").as_deref() == Some("tr__no_such_tool"))
        .unwrap_or_else(|| panic!("no span of the unknown tool: {spans:#?}"));
    assert_eq!(refused["name"], "tools/call", "{refused}");
    assert_eq!(attr(refused, "error.type"), Some(code.to_string()));
    assert_eq!(attr(refused, "rpc.response.status_code"), Some(code.to_string()));
    assert_eq!(refused["status"]["code"], 2);
    let unsampled_spans = spans
        .iter()
        .filter(|s| s["traceId"] == "6bf92f3577b34da6a3ce929d0e0e4738");
    assert_eq!(
        unsampled_spans.count(),
        0,
        "spans of an unsampled trace were exported"
    );
    assert_nothing_secret(&collected);
}

/// The Python SDK client (`call` scenario) with a `traceparent` header and the bearer key.
fn python_call(url: &str, mode: &str, traceparent: &str) -> ClientRun {
    let mut cmd = std::process::Command::new(&peers().python);
    cmd.arg(repo_root().join("tests/clients/py_client.py"))
        .arg(url)
        .args([
            "call",
            "tr__echo_meta",
            r#"{"message": "from python"}"#,
            "--mode",
            mode,
        ])
        .env("MCPMUX_TEST_BEARER", KEY)
        .env("MCPMUX_TEST_TRACEPARENT", traceparent);
    run_client(cmd, Duration::from_secs(90))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_clients_traceparent_reaches_the_upstream_through_both_eras() {
    let _suite = crate::suite::enter(module_path!());
    let Traced { collected, gw, .. } = Traced::start("traces-python").await;
    drop(ready_session(&gw.url()).await);
    let mut expected = Vec::new();
    for (mode, trace) in [
        ("legacy", "7bf92f3577b34da6a3ce929d0e0e4731"),
        (MODERN, "8bf92f3577b34da6a3ce929d0e0e4732"),
    ] {
        let traceparent = format!("00-{trace}-{HOST_SPAN}-01");
        let url = gw.url();
        let run = tokio::task::spawn_blocking(move || python_call(&url, mode, &traceparent))
            .await
            .expect("python client");
        assert!(run.status.success(), "{mode}: {}\n{}", run.stdout, run.stderr);
        let seen: Value = serde_json::from_str(run.call_text("tr__echo_meta")).expect("JSON");
        expected.push((mode, trace, parent_id(&seen["traceparent"], trace)));
    }
    gw.stop().await;
    let spans = collected.spans();
    for (mode, trace, upstream_parent) in expected {
        let in_trace = |kind: i64| {
            (spans.iter())
                .find(|s| {
                    s["kind"] == kind
                        && s["traceId"] == trace
                        && s["name"].as_str().is_some_and(|n| n.starts_with("tools/call"))
                })
                .unwrap_or_else(|| panic!("{mode}: no kind {kind} tools/call span in {spans:#?}"))
        };
        let (server, client) = (in_trace(2), in_trace(3));
        assert_eq!(server["name"], "tools/call tr__echo_meta", "{mode}");
        assert_eq!(server["parentSpanId"], HOST_SPAN, "{mode}");
        assert_eq!(client["parentSpanId"], server["spanId"], "{mode}");
        assert_eq!(client["spanId"], upstream_parent.as_str(), "{mode}");
    }
    assert_nothing_secret(&collected);
}
