//! The real `mcpmux` binary drains on SIGTERM: in front of real server-everything over stdio,
//! a long tool call of a session-era host and one of a 2026-07-28 host, in flight when the
//! signal comes, finish with their results; calls longer than `drain_timeout_secs` are answered
//! with an error at the deadline; meanwhile new sessions are refused while a host may still
//! answer its call's server request; the process exits. Readiness flips first: from the signal
//! on `/readyz` answers 503 (saying why) while `/healthz` stays 200, and with
//! `gateway.shutdown_delay_secs` new sessions are still served for that long; after it, a new
//! call is refused unrun with HTTP 503.

use crate::support::mcp::{messages, RawSession, ACCEPT_BOTH};
use crate::support::serve::ServeProcess;
use crate::support::{path_str, peers, scratch_dir, toml_list};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

const LONG_TOOL: &str = "everything__trigger-long-running-operation";
const MODERN: &str = "2026-07-28";
/// Upper bound for the gateway to exit after the signal.
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Upper bound for a call's response to arrive after the signal.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(25);

async fn start_gateway(tag: &str, drain_timeout_secs: u64) -> ServeProcess {
    start_gateway_with(tag, &format!("drain_timeout_secs = {drain_timeout_secs}")).await
}

async fn start_gateway_with(tag: &str, gateway: &str) -> ServeProcess {
    let everything_js = tokio::task::spawn_blocking(|| peers().everything_js.clone())
        .await
        .expect("peer installation panicked");
    let dir = scratch_dir(tag);
    let servers = format!(
        "[servers.everything]\ncommand = \"node\"\nargs = {}\n",
        toml_list(&[path_str(&everything_js), "stdio".into()])
    );
    let mut gw = ServeProcess::start(&dir, gateway, &servers, &dir, &[]);
    gw.wait_tools(&[LONG_TOOL]).await;
    gw
}

fn long_call_params(secs: u64) -> Value {
    json!({"name": LONG_TOOL, "arguments": {"duration": secs, "steps": secs}})
}

/// A session-era host (initialize, then POST) starts the long call; its messages as they come.
async fn session_era_call(url: &str, secs: u64) -> (RawSession, mpsc::Receiver<Value>) {
    let session = RawSession::open(url, json!({})).await;
    let mut params = long_call_params(secs);
    params["_meta"] = json!({"progressToken": "session-era"});
    let rx = session.stream(json!(7), "tools/call", params).await;
    (session, rx)
}

/// A 2026-07-28 host (no session) starts the long call; its messages as they come.
async fn modern_call(url: &str, secs: u64) -> mpsc::Receiver<Value> {
    let mut params = long_call_params(secs);
    params["_meta"] = json!({
        "progressToken": "modern",
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}
    });
    let body = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": params});
    let resp = reqwest::Client::new()
        .post(url)
        .header("accept", ACCEPT_BOTH)
        .header("content-type", "application/json")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", LONG_TOOL)
        .body(body.to_string())
        .send()
        .await
        .expect("modern POST");
    assert_eq!(resp.status().as_u16(), 200, "modern tools/call");
    messages(resp)
}

/// The response with `id` among the messages, or what came instead.
async fn response(rx: &mut mpsc::Receiver<Value>, id: i64) -> Result<Value, String> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + RESPONSE_TIMEOUT;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(msg)) if msg["id"] == json!(id) => return Ok(msg),
            Ok(Some(msg)) => seen.push(msg),
            Ok(None) => return Err(format!("the stream ended without a response; got {seen:?}")),
            Err(_) => return Err(format!("no response within {RESPONSE_TIMEOUT:?}; got {seen:?}")),
        }
    }
}

/// After the signal, a new host cannot start a session.
async fn new_hosts_are_refused(gw: &ServeProcess) {
    let opened = tokio::time::timeout(
        Duration::from_secs(10),
        RawSession::try_open(&gw.url(), json!({}), "2025-11-25"),
    )
    .await;
    assert!(
        matches!(opened, Ok(Err(_))),
        "a new session opened while draining; log:\n{}",
        gw.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_in_flight_calls_of_both_eras_finish() {
    let _suite = crate::suite::enter(module_path!());
    let mut gw = start_gateway("drain-finish", 10).await;
    let url = gw.url();
    let ((_session, mut old), mut new) = tokio::join!(session_era_call(&url, 5), modern_call(&url, 5));
    tokio::time::sleep(Duration::from_secs(1)).await;
    gw.signal(libc::SIGTERM);
    tokio::time::sleep(Duration::from_millis(300)).await;
    new_hosts_are_refused(&gw).await;

    let (old, new) = tokio::join!(response(&mut old, 7), response(&mut new, 8));
    let status = gw.wait_exit(EXIT_TIMEOUT).await;
    let log = gw.log();
    for (era, reply) in [("session era", old), ("2026-07-28", new)] {
        let reply = reply.unwrap_or_else(|e| panic!("{era}: {e}; log:\n{log}"));
        assert_eq!(
            reply["result"]["content"][0]["text"],
            "Long running operation completed. Duration: 5 seconds, Steps: 5.",
            "{era}: {reply}; log:\n{log}"
        );
    }
    assert!(status.success(), "exit after SIGTERM: {status}; log:\n{log}");
    assert!(log.contains("SIGTERM received"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_longer_than_drain_timeout_end_with_an_error_at_the_deadline() {
    let _suite = crate::suite::enter(module_path!());
    let mut gw = start_gateway("drain-cut", 2).await;
    let url = gw.url();
    let ((_session, mut old), mut new) = tokio::join!(session_era_call(&url, 30), modern_call(&url, 30));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let signalled = Instant::now();
    gw.signal(libc::SIGTERM);

    let (old, new) = tokio::join!(response(&mut old, 7), response(&mut new, 8));
    let answered = signalled.elapsed();
    let status = gw.wait_exit(EXIT_TIMEOUT).await;
    let log = gw.log();
    for (era, reply) in [("session era", old), ("2026-07-28", new)] {
        let reply = reply.unwrap_or_else(|e| panic!("{era}: {e}; log:\n{log}"));
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("shutting down") && message.contains("drain_timeout_secs"),
            "{era}: {reply}; log:\n{log}"
        );
    }
    // Not before the deadline: the calls had their drain time.
    assert!(
        answered >= Duration::from_millis(1900),
        "answered after {answered:?}; log:\n{log}"
    );
    assert!(status.success(), "exit after SIGTERM: {status}; log:\n{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_answers_a_server_request_while_mcpmux_drains() {
    let _suite = crate::suite::enter(module_path!());
    let mut gw = start_gateway("drain-answer", 10).await;
    let session = RawSession::open(&gw.url(), json!({"sampling": {}})).await;
    let params = json!({"name": "everything__trigger-sampling-request", "arguments": {"prompt": "drain"}});
    let mut call = session.stream(json!(9), "tools/call", params).await;
    let request = crate::support::mcp::wait_for(&mut call, |m| m["method"] == "sampling/createMessage").await;
    gw.signal(libc::SIGTERM);
    tokio::time::sleep(Duration::from_millis(300)).await;
    new_hosts_are_refused(&gw).await;

    // The call in flight still gets its host's answer.
    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": {
        "role": "assistant", "model": "m", "content": {"type": "text", "text": "answered while draining"}}});
    assert_eq!(session.post(answer).await.status(), 202, "{}", gw.log());
    let reply = response(&mut call, 9)
        .await
        .unwrap_or_else(|e| panic!("{e}; log:\n{}", gw.log()));
    let text = reply["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("answered while draining"),
        "{reply}; log:\n{}",
        gw.log()
    );
    let status = gw.wait_exit(EXIT_TIMEOUT).await;
    assert!(
        status.success(),
        "exit after SIGTERM: {status}; log:\n{}",
        gw.log()
    );
}

/// The stop did not wait for the call in flight (request 7 on `call`): it is answered with the
/// drain error, and `gw` exits cleanly.
async fn assert_stopped_at_once(gw: &mut ServeProcess, call: &mut mpsc::Receiver<Value>) {
    let reply = response(call, 7)
        .await
        .unwrap_or_else(|e| panic!("{e}; log:\n{}", gw.log()));
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("shutting down"), "{reply}; log:\n{}", gw.log());
    let status = gw.wait_exit(EXIT_TIMEOUT).await;
    assert!(status.success(), "exit: {status}; log:\n{}", gw.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_ends_the_drain() {
    let _suite = crate::suite::enter(module_path!());
    let mut gw = start_gateway("drain-second-signal", 600).await;
    let (_session, mut call) = session_era_call(&gw.url(), 30).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    gw.signal(libc::SIGTERM);
    tokio::time::sleep(Duration::from_millis(500)).await;
    gw.signal(libc::SIGINT);

    // Answered with the drain error long before the call or the drain would have ended.
    assert_stopped_at_once(&mut gw, &mut call).await;
}

/// Ctrl-C with a call in flight: mcpmux says at once, in one line, that it lets the call finish
/// for up to `drain_timeout_secs` and that a second Ctrl-C stops at once; a second Ctrl-C does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_says_how_long_the_drain_may_take_and_a_second_one_stops_at_once() {
    let _suite = crate::suite::enter(module_path!());
    const NOTICE: &str = "press Ctrl-C again (or send a second SIGTERM) to stop at once";
    let mut gw = start_gateway("drain-ctrl-c", 600).await;
    let (_session, mut call) = session_era_call(&gw.url(), 120).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    gw.signal(libc::SIGINT);
    let notice = gw.wait_log_line(&[NOTICE], RESPONSE_TIMEOUT).await;
    assert!(
        notice.contains("WARN") && notice.contains("1 call(s) in flight") && notice.contains("up to 600 s"),
        "{notice}"
    );

    gw.signal(libc::SIGINT);
    assert_stopped_at_once(&mut gw, &mut call).await;
    let log = gw.log();
    assert_eq!(
        log.matches(NOTICE).count(),
        1,
        "said once, at the first signal:\n{log}"
    );
}

/// `GET path` on the gateway's main listener: status and body.
async fn probe(gw: &ServeProcess, path: &str) -> (u16, String) {
    let resp = reqwest::get(format!("http://127.0.0.1:{}{path}", gw.port))
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}; log:\n{}", gw.log()));
    let status = resp.status().as_u16();
    (status, resp.text().await.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_flips_at_once_on_sigterm_while_health_stays_up() {
    let _suite = crate::suite::enter(module_path!());
    let mut gw = start_gateway("drain-readyz", 10).await;
    assert_eq!(probe(&gw, "/readyz").await.0, 200, "{}", gw.log());
    let (session, mut call) = session_era_call(&gw.url(), 4).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    gw.signal(libc::SIGTERM);
    tokio::time::sleep(Duration::from_millis(300)).await;

    // The call is still running: the process serves, but asks balancers to go elsewhere.
    let (ready, body) = probe(&gw, "/readyz").await;
    assert_eq!(ready, 503, "{body}; log:\n{}", gw.log());
    assert!(body.contains("shutting down"), "{body}");
    assert!(body.contains("1 call(s) in flight"), "{body}");
    assert_eq!(probe(&gw, "/healthz").await, (200, "ok\n".into()), "{}", gw.log());
    // A new call is refused unrun with 503 (a balancer may send it to another replica).
    let refused = (session.post(json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "everything__echo", "arguments": {"message": "late"}}})))
    .await;
    assert_eq!(refused.status().as_u16(), 503, "{}", gw.log());
    let body: Value = serde_json::from_str(&refused.text().await.unwrap_or_default()).unwrap_or_default();
    assert_eq!(body["id"], 8, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("shutting down")),
        "{body}"
    );

    let reply = response(&mut call, 7)
        .await
        .unwrap_or_else(|e| panic!("{e}; log:\n{}", gw.log()));
    assert!(
        reply["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("completed")),
        "{reply}"
    );
    let status = gw.wait_exit(EXIT_TIMEOUT).await;
    assert!(
        status.success(),
        "exit after SIGTERM: {status}; log:\n{}",
        gw.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shutdown_delay_keeps_serving_while_not_ready() {
    let _suite = crate::suite::enter(module_path!());
    let mut gw = start_gateway_with("drain-delay", "drain_timeout_secs = 10\nshutdown_delay_secs = 3").await;
    gw.signal(libc::SIGTERM);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(probe(&gw, "/readyz").await.0, 503, "{}", gw.log());

    // Within the delay a new host still gets a session and its calls answered.
    let session = RawSession::open(&gw.url(), json!({})).await;
    let text = session
        .tool_text("everything__echo", json!({"message": "still served"}))
        .await;
    assert_eq!(text, "Echo: still served");

    // After it, the drain refuses new hosts, then the process exits.
    tokio::time::sleep(Duration::from_secs(3)).await;
    new_hosts_are_refused(&gw).await;
    let status = gw.wait_exit(EXIT_TIMEOUT).await;
    assert!(
        status.success(),
        "exit after SIGTERM: {status}; log:\n{}",
        gw.log()
    );
}
