//! Legacy HTTP+SSE (protocol 2024-11-05) on both faces of mcpmux, with real peers:
//! server-everything in SSE mode as an upstream (forced with `transport = "sse"` and found by
//! the spec's fallback), the Python SDK's `sse_client` and the Inspector CLI (`--transport sse`)
//! as hosts on `/sse`, both at once, losing and regaining the upstream, and the HTTP rules of
//! the legacy endpoints.

use crate::support::everything::check_everything;
use crate::support::mcp::{wait_for, RawSession, WAIT};
use crate::support::{
    boot_gateway, free_port, peers, run_client, run_py_client_async, scratch_dir, test_server_toml,
    toml_list, ChildGuard, ClientRun, CLIENT_TIMEOUT,
};
use futures_util::StreamExt;
use mcpmux::protocol::sse::{SseDecoder, SseEvent};
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// server-everything in SSE mode on `port` (`GET /sse`, `POST /message?sessionId=…`), started
/// on the blocking pool (it waits for the port).
async fn start_everything_sse(port: u16) -> ChildGuard {
    tokio::task::spawn_blocking(move || crate::support::start_everything_sse(port))
        .await
        .expect("start server-everything (sse)")
}

async fn gateway(servers: &str, extra: &str) -> mcpmux::Gateway {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    boot_gateway(servers, extra).await
}

/// The Python client (mcp 2.3.0) with owned arguments.
async fn py(url: &str, scenario: &str, args: &[String]) -> ClientRun {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_py_client_async(url, scenario, &args).await
}

/// `everything` scenario arguments against namespace `ns` over `transport` (http or sse).
fn everything_args(ns: &str, transport: &str, roots: bool) -> Vec<String> {
    let mut args: Vec<String> = ["--mode", "legacy", "--transport", transport]
        .map(String::from)
        .to_vec();
    args.extend([
        "--prefix".into(),
        format!("{ns}__"),
        "--resource-prefix".into(),
        format!("mcpmux://{ns}/"),
    ]);
    if !roots {
        args.push("--no-roots".into());
    }
    args
}

fn base_url(gw: &mcpmux::Gateway) -> String {
    format!("http://{}", gw.local_addr())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sse_upstream_forced_and_detected_and_a_legacy_host_in_front() {
    let _suite = crate::suite::enter(module_path!());
    let port = free_port();
    let _everything = start_everything_sse(port).await;
    let url = format!("http://127.0.0.1:{port}/sse");
    let servers =
        format!("[servers.forced]\nurl = {url:?}\ntransport = \"sse\"\n\n[servers.auto]\nurl = {url:?}\n");
    let gw = gateway(&servers, "").await;

    // A Streamable HTTP host through /mcp: namespaced tools, sampling, elicitation, progress,
    // prompts, resources and setLevel, against the forced and the detected legacy upstream.
    for ns in ["forced", "auto"] {
        let run = py(&gw.url(), "everything", &everything_args(ns, "http", false)).await;
        check_everything(&run, ns, false).unwrap_or_else(|e| panic!("{ns} through /mcp: {e}\n{run}"));
    }
    let echo = |ns: &str| {
        [
            format!("{ns}__echo"),
            json!({"message": format!("via {ns}")}).to_string(),
        ]
    };
    let mut args = vec!["--mode".to_string(), "legacy".into()];
    args.extend(echo("forced"));
    args.extend(echo("auto"));
    let run = py(&gw.url(), "call", &args).await;
    run.assert_ok();
    let texts: Vec<&str> = run.json["calls"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["text"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(texts, ["Echo: via forced", "Echo: via auto"], "{run}");

    // Both faces legacy at once: the Python SDK's SSE client on /sse, the upstream over SSE.
    let sse = format!("{}/sse", base_url(&gw));
    let run = py(&sse, "everything", &everything_args("auto", "sse", false)).await;
    check_everything(&run, "auto", false)
        .unwrap_or_else(|e| panic!("legacy host, legacy upstream: {e}\n{run}"));
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_a_legacy_sse_upstream_fails_its_calls_at_once_and_it_reconnects() {
    let _suite = crate::suite::enter(module_path!());
    let port = free_port();
    let mut everything = start_everything_sse(port).await;
    let servers = format!("[servers.ev]\nurl = \"http://127.0.0.1:{port}/sse\"\n");
    let gw = gateway(&servers, "").await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    assert_eq!(
        s.tool_text("ev__echo", json!({"message": "one"})).await,
        "Echo: one"
    );

    let id = json!(s.next_id());
    let params = json!({"name": "ev__trigger-long-running-operation",
        "arguments": {"duration": 30, "steps": 30}, "_meta": {"progressToken": "slow"}});
    let mut rx = s.stream(id.clone(), "tools/call", params).await;
    wait_for(&mut rx, |m| m["method"] == "notifications/progress").await;
    let killed = Instant::now();
    everything.kill();
    let reply = wait_for(&mut rx, |m| m["id"] == id).await;
    let waited = killed.elapsed();
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("'ev'"), "the error names the server: {reply}");
    assert!(
        waited < Duration::from_secs(5),
        "failed after {waited:?}, not at once"
    );

    let _everything = start_everything_sse(port).await;
    let restarted = Instant::now();
    let deadline = restarted + Duration::from_secs(40);
    loop {
        let resp = s
            .call(
                "tools/call",
                json!({"name": "ev__echo", "arguments": {"message": "two"}}),
            )
            .await;
        if resp["result"]["content"][0]["text"] == "Echo: two" {
            eprintln!(
                "pending call failed {waited:?} after the kill; calls work again {:?} after the restart",
                restarted.elapsed()
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no reconnect in time; last answer {resp}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_hosts_python_sse_client_and_inspector_on_sse() {
    let _suite = crate::suite::enter(module_path!());
    let (command, args) = peers().everything_stdio_cmd();
    let servers = format!(
        "[servers.everything]\ncommand = {command:?}\nargs = {}\nisolation = \"per-session\"\n",
        toml_list(&args)
    );
    let gw = gateway(&servers, "").await;
    let sse = format!("{}/sse", base_url(&gw));

    // Per-session upstream: the roots round trip reaches this host too.
    let run = py(&sse, "everything", &everything_args("everything", "sse", true)).await;
    check_everything(&run, "everything", true).unwrap_or_else(|e| panic!("python sse client: {e}\n{run}"));
    // The SDK's auto mode probes server/discover first; the refusal sends it to initialize.
    let auto = ["--mode", "auto", "--transport", "sse", "--prefix", "everything__"].map(String::from);
    py(&sse, "smoke", &auto).await.assert_ok();

    let p = peers();
    let mut cmd = Command::new(&p.node22);
    cmd.arg(&p.inspector_js)
        .args(["--cli", &sse, "--transport", "sse", "--method", "tools/call"])
        .args([
            "--tool-name",
            "everything__echo",
            "--tool-arg",
            "message=from-inspector",
        ])
        .env("HOME", scratch_dir("inspector-home"));
    let run = tokio::task::spawn_blocking(move || run_client(cmd, CLIENT_TIMEOUT))
        .await
        .expect("inspector run");
    assert!(run.exited_ok(), "inspector --transport sse failed:\n{run}");
    assert!(run.stdout.contains("Echo: from-inspector"), "{run}");
    gw.stop().await;
}

/// A raw legacy SSE host: the stream's events and the message endpoint it was given.
struct LegacyHost {
    http: reqwest::Client,
    endpoint: String,
    events: mpsc::Receiver<SseEvent>,
    /// Reads the stream; aborting it closes the connection.
    reader: tokio::task::JoinHandle<()>,
}

/// Decode a stream's events into a channel, in a task that owns the connection.
fn read_events(resp: reqwest::Response) -> (mpsc::Receiver<SseEvent>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(256);
    let reader = tokio::spawn(async move {
        let mut decoder = SseDecoder::new(1 << 20);
        let mut events = Vec::new();
        let mut body = resp.bytes_stream();
        while let Some(Ok(chunk)) = body.next().await {
            if decoder.push(&chunk, &mut events).is_err() {
                return;
            }
            for event in events.drain(..) {
                if tx.send(event).await.is_err() {
                    return;
                }
            }
        }
    });
    (rx, reader)
}

impl LegacyHost {
    async fn open(base: &str, sse_path: &str) -> (LegacyHost, String) {
        let http = reqwest::Client::new();
        let resp = http
            .get(format!("{base}{sse_path}"))
            .header("accept", "text/event-stream")
            .send()
            .await
            .expect("GET sse");
        assert_eq!(resp.status(), 200);
        let ctype = resp.headers()["content-type"]
            .to_str()
            .unwrap_or_default()
            .to_string();
        assert!(ctype.starts_with("text/event-stream"), "{ctype}");
        let (mut events, reader) = read_events(resp);
        let first = tokio::time::timeout(WAIT, events.recv())
            .await
            .ok()
            .flatten()
            .expect("a first event");
        assert_eq!(first.event.as_deref(), Some("endpoint"), "{first:?}");
        let host = LegacyHost {
            http,
            endpoint: format!("{base}{}", first.data),
            events,
            reader,
        };
        (host, first.data)
    }

    async fn post_to(&self, url: &str, body: &str, content_type: &str) -> u16 {
        self.http
            .post(url)
            .header("content-type", content_type)
            .body(body.to_string())
            .send()
            .await
            .expect("POST")
            .status()
            .as_u16()
    }

    async fn post(&self, body: Value) -> u16 {
        self.post_to(&self.endpoint, &body.to_string(), "application/json")
            .await
    }

    /// The next `message` event matching `pred` (others are skipped).
    async fn wait(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let event = tokio::time::timeout_at(deadline, self.events.recv())
                .await
                .ok()
                .flatten()
                .expect("expected message never arrived");
            assert_eq!(event.event.as_deref(), Some("message"), "{event:?}");
            let msg: Value = serde_json::from_str(&event.data).expect("JSON message");
            if pred(&msg) {
                return msg;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_endpoints_follow_the_http_rules_and_end_with_their_stream() {
    let _suite = crate::suite::enter(module_path!());
    let servers = test_server_toml("test", &["--tools", "2"], None);
    let gw = gateway(&servers, "path = \"/api/mcp\"\nmax_body_bytes = 4096\n").await;
    let base = base_url(&gw);
    let http = reqwest::Client::new();
    let foreign = http
        .get(format!("{base}/api/sse"))
        .header("origin", "http://evil.example")
        .send()
        .await
        .expect("GET");
    assert_eq!(foreign.status(), 403);

    let (mut host, endpoint) = LegacyHost::open(&base, "/api/sse").await;
    let sid = endpoint
        .strip_prefix("/api/message?sessionId=")
        .unwrap_or_else(|| panic!("endpoint event {endpoint:?}"));
    assert!(
        sid.len() == 64 && sid.bytes().all(|b| b.is_ascii_hexdigit()),
        "{sid}"
    );
    let message = format!("{base}/api/message");
    assert_eq!(host.post_to(&message, "{}", "application/json").await, 400);
    let unknown = format!("{message}?sessionId=nope");
    assert_eq!(host.post_to(&unknown, "{}", "application/json").await, 404);
    assert_eq!(host.post_to(&host.endpoint, "{}", "text/plain").await, 415);
    let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(8192));
    let too_large = (http.post(&host.endpoint))
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .expect("POST");
    assert_eq!(too_large.status(), 413);
    assert_eq!(too_large.headers()["content-type"], "application/json");
    let body: Value = serde_json::from_str(&too_large.text().await.unwrap_or_default()).unwrap_or_default();
    assert_eq!(
        body["error"]["code"], -32600,
        "a JSON-RPC refusal like the others: {body}"
    );
    let forged = http
        .post(&host.endpoint)
        .header("content-type", "application/json")
        .header("origin", "http://evil.example")
        .body("{}")
        .send()
        .await
        .expect("POST");
    assert_eq!(forged.status(), 403);

    // Before initialize a request gets an error on the stream; initialize at 2024-11-05.
    assert_eq!(
        host.post(json!({"jsonrpc":"2.0","id":"early","method":"tools/list"}))
            .await,
        202
    );
    let early = host.wait(|m| m["id"] == "early").await;
    assert_eq!(early["error"]["code"], -32600, "{early}");
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2024-11-05","capabilities":{"sampling":{}},
        "clientInfo":{"name":"raw-legacy","version":"0"}}});
    assert_eq!(host.post(init).await, 202);
    let result = host.wait(|m| m["id"] == 1).await;
    assert_eq!(result["result"]["protocolVersion"], "2024-11-05", "{result}");
    assert_eq!(result["result"]["serverInfo"]["name"], "mcpmux", "{result}");
    assert_eq!(
        host.post(json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
            .await,
        202
    );

    // A request with a null id is invalid, answered on the stream with id null, and not run.
    let null_id = json!({"jsonrpc":"2.0","id":null,"method":"tools/call",
        "params":{"name":"test__echo","arguments":{"message":"null-id"}}});
    assert_eq!(host.post(null_id).await, 202);
    let invalid = host.wait(|m| m.get("id") == Some(&Value::Null)).await;
    assert_eq!(invalid["error"]["code"], -32600, "{invalid}");

    // A batch: each reply is its own message event.
    let batch = json!([
        {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test__echo","arguments":{"message":"b"}}},
        {"jsonrpc":"2.0","id":3,"method":"ping"}
    ]);
    assert_eq!(host.post(batch).await, 202);
    let pong = host.wait(|m| m["id"] == 3).await;
    assert_eq!(pong["result"], json!({}));
    let echoed = host.wait(|m| m["id"] == 2).await;
    assert_eq!(echoed["result"]["content"][0]["text"], "echo: b", "{echoed}");

    // A server-to-client request rides the stream and the POSTed answer reaches the upstream.
    let call = json!({"jsonrpc":"2.0","id":4,"method":"tools/call",
        "params":{"name":"test__sample","arguments":{"prompt":"p"}}});
    assert_eq!(host.post(call).await, 202);
    let ask = host.wait(|m| m["method"] == "sampling/createMessage").await;
    let answer = json!({"jsonrpc":"2.0","id":ask["id"],"result":{"role":"assistant",
        "content":{"type":"text","text":"sampled-over-legacy"},"model":"m"}});
    assert_eq!(host.post(answer).await, 202);
    let done = host.wait(|m| m["id"] == 4).await;
    assert!(done.to_string().contains("sampled-over-legacy"), "{done}");

    // Closing the stream ends the session.
    host.reader.abort();
    let endpoint = host.endpoint.clone();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = http
            .post(&endpoint)
            .header("content-type", "application/json")
            .body(json!({"jsonrpc":"2.0","method":"notifications/initialized"}).to_string())
            .send()
            .await
            .expect("POST")
            .status();
        if status == 404 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the session outlived its stream (status {status})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    gw.stop().await;
}
