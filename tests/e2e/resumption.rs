//! Resumable POST streams toward hosts (SEP-1699): priming events, a call that survives its
//! host's dropped connection and is continued with `Last-Event-ID`, an upstream that polls
//! (ends its stream mid-call) mirrored to hosts that may poll and hidden from older ones.

use crate::support::conformance::Target;
use crate::support::mcp::*;
use crate::support::*;
use futures_util::StreamExt;
use mcpmux::protocol::sse::{SseDecoder, SseEvent};
use serde_json::{json, Value};
use tokio::sync::mpsc;

const WAIT: std::time::Duration = std::time::Duration::from_secs(15);

async fn next_event(rx: &mut mpsc::Receiver<SseEvent>) -> Option<SseEvent> {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("no SSE event in time")
}

/// The first `n` events of a response, read in this task; then the connection is dropped at
/// once, the way a host's breaks (a reader task could read on and let mcpmux deliver the rest of
/// the stream to the connection that is about to break).
async fn read_then_break(resp: reqwest::Response, n: usize) -> Vec<SseEvent> {
    let mut body = resp.bytes_stream();
    let (mut decoder, mut seen) = (SseDecoder::new(1 << 20), Vec::new());
    while seen.len() < n {
        let chunk = tokio::time::timeout(WAIT, body.next())
            .await
            .expect("no SSE event in time")
            .expect("the stream ended early")
            .expect("the stream broke");
        decoder.push(&chunk, &mut seen).expect("SSE");
    }
    seen
}

/// Every event until the response ends.
async fn all_events(mut rx: mpsc::Receiver<SseEvent>) -> Vec<SseEvent> {
    let mut out = Vec::new();
    while let Some(ev) = next_event(&mut rx).await {
        out.push(ev);
    }
    out
}

fn message(ev: &SseEvent) -> Option<Value> {
    serde_json::from_str(&ev.data).ok()
}

fn call(id: i64, tool: &str, args: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}})
}

/// The conformance target over HTTP behind mcpmux: its `test_reconnection` ends the call's SSE
/// stream after a priming event (retry 500 ms) and answers on the resumed stream.
async fn polling_upstream() -> (ChildGuard, mcpmux::Gateway) {
    let port = free_port();
    let target = tokio::task::spawn_blocking(move || Target::TypeScript.start_http(port))
        .await
        .expect("start the conformance target");
    let servers = format!("[servers.target]\nurl = \"http://127.0.0.1:{port}/mcp\"\nnamespace = \"\"\n");
    (target, boot_gateway(&servers, "").await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_polls_makes_a_2025_11_25_host_poll_too() {
    let _suite = crate::suite::enter(module_path!());
    let (_target, gw) = polling_upstream().await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    let resp = s.post(call(7, "test_reconnection", json!({}))).await;
    assert_eq!(resp.status(), 200);
    let events = all_events(sse_events(resp)).await;
    let first = events.first().expect("a priming event");
    assert!(
        first.data.is_empty() && first.id.is_some(),
        "priming event first: {events:?}"
    );
    assert!(
        first.retry_ms.is_some(),
        "the priming event announces a retry delay: {first:?}"
    );
    assert!(
        events.iter().all(|ev| message(ev).is_none_or(|m| m["id"] != 7)),
        "the stream ended before the result, as the upstream's did: {events:?}"
    );
    let last = events
        .last()
        .and_then(|ev| ev.id.clone())
        .expect("an event id to resume from");
    assert_eq!(
        events.last().and_then(|ev| ev.retry_ms),
        Some(500),
        "the upstream's delay is passed on"
    );

    let resumed = s.get(Some(&last)).await;
    assert_eq!(resumed.status(), 200);
    let rest = all_events(sse_events(resumed)).await;
    let result = rest
        .iter()
        .filter_map(message)
        .find(|m| m["id"] == 7)
        .expect("the result after resuming");
    assert_eq!(result["result"]["isError"], Value::Null, "{result}");
    // Everything was delivered: the stream is gone, and the id now opens the standalone stream.
    let standalone = s.get(Some(&last)).await;
    assert_eq!(standalone.status(), 200);
    assert_eq!(s.get(None).await.status(), 409, "that standalone stream is open");
    drop(standalone);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_host_keeps_its_stream_while_mcpmux_resumes_the_upstream() {
    let _suite = crate::suite::enter(module_path!());
    let (_target, gw) = polling_upstream().await;
    let s = RawSession::open_version(&gw.url(), json!({}), "2025-06-18").await;
    let resp = s.post(call(3, "test_reconnection", json!({}))).await;
    let events = all_events(sse_events(resp)).await;
    assert!(
        events.iter().all(|ev| !ev.data.is_empty()),
        "no priming or poll events: {events:?}"
    );
    let last = events.last().and_then(message).expect("a message");
    assert_eq!(last["id"], 3, "the result on the POST stream itself: {events:?}");
    assert!(last["result"]["content"].is_array(), "{last}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_outlives_its_dropped_stream_and_is_resumed_with_last_event_id() {
    let _suite = crate::suite::enter(module_path!());
    let log = scratch_dir("resumption").join("upstream.log");
    let gw = boot_gateway(&test_server_toml("slowpoke", &[], Some(&log)), "").await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    let resp = s.post(call(11, "slowpoke__slow", json!({"ms": 400}))).await;
    let priming = read_then_break(resp, 1).await.remove(0);
    let id = priming.id.expect("priming event id");
    assert!(priming.data.is_empty());

    let resumed = s.get(Some(&id)).await;
    assert_eq!(resumed.status(), 200);
    let rest = all_events(sse_events(resumed)).await;
    let result = rest
        .iter()
        .filter_map(message)
        .find(|m| m["id"] == 11)
        .expect("the result");
    assert_eq!(result["result"]["content"][0]["text"], "slept 400", "{result}");
    let cancels = upstream_log(&log)
        .into_iter()
        .filter(|m| m["method"] == "notifications/cancelled")
        .count();
    assert_eq!(cancels, 0, "a dropped stream does not cancel the call");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_stream_continues_after_the_last_event_the_host_saw() {
    let _suite = crate::suite::enter(module_path!());
    let gw = boot_gateway(&test_server_toml("steps", &[], None), "").await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    let params = json!({"name":"steps__progress","arguments":{"steps":3,"delay_ms":300},"_meta":{"progressToken":"p"}});
    let body = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":params});
    let seen = read_then_break(s.post(body.clone()).await, 2).await;
    assert!(seen[0].data.is_empty(), "a priming event first: {seen:?}");
    let first = seen[1].clone();
    assert_eq!(
        message(&first).expect("a message")["params"]["progress"],
        1,
        "{first:?}"
    );

    let rest = all_events(sse_events(s.get(first.id.as_deref()).await)).await;
    let progress: Vec<Value> = rest
        .iter()
        .filter_map(message)
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["progress"].clone())
        .collect();
    assert_eq!(
        progress,
        vec![json!(2), json!(3)],
        "nothing replayed twice, nothing lost: {rest:?}"
    );
    assert!(
        rest.iter().filter_map(message).any(|m| m["id"] == 1),
        "the result: {rest:?}"
    );
    let ids: Vec<String> = rest.iter().filter_map(|e| e.id.clone()).collect();
    assert_eq!(ids.len(), rest.len(), "every event has an id: {rest:?}");

    // Another call streams under event ids of its own (sealed: their stream number cannot be
    // read here, and a prefix of two tokens sealed under one key may well be the same).
    let second = all_events(sse_events(s.post(body).await)).await;
    let second_ids: Vec<&str> = second.iter().filter_map(|e| e.id.as_deref()).collect();
    assert!(
        !second_ids.is_empty(),
        "the second call's events have ids: {second:?}"
    );
    let first_ids: Vec<&str> = (std::iter::once(&first).chain(&rest))
        .filter_map(|e| e.id.as_deref())
        .collect();
    assert!(
        second_ids.iter().all(|id| !first_ids.contains(id)),
        "no event id of the first call again: {first_ids:?} / {second_ids:?}"
    );
    gw.stop().await;
}
