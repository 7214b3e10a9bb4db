//! Forwarding between replicas: a session-era request reaching a replica that does not hold its
//! session is sent to the session's home replica while that lives, so a cancellation, a
//! progress token and a sampling answer reach the call they belong to, the GET stream is the
//! home's, and DELETE ends the session where it lives; the other replica holds nothing. A home
//! that is gone or stopping is replaced: the receiving replica takes the session over. A passport
//! a host forges is refused.

use crate::support::mcp::{messages, recv, wait_for, RawSession};
use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

const KEY: &str = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
const ALICE: &str = "alice-key-0123456789";
const BOB: &str = "bob-key-0123456789";

/// A replica in front of the test server, with `[cluster] key = KEY` and two API keys.
async fn replica() -> mcpmux::Gateway {
    let servers = format!(
        "{}\n[cluster]\nkey = {KEY:?}\n[auth]\n\
         [[auth.api_keys]]\nname = \"alice\"\nkey = {ALICE:?}\n\
         [[auth.api_keys]]\nname = \"bob\"\nkey = {BOB:?}\n",
        test_server_toml("t", &[], None)
    );
    // No balancer in front: nothing to wait for at stop.
    boot_gateway(&servers, "shutdown_delay_secs = 0").await
}

/// A session of `token`'s holder on `url` that can answer sampling.
async fn open(url: &str, token: &str) -> RawSession {
    let mut headers = reqwest::header::HeaderMap::new();
    let bearer = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
    headers.insert(reqwest::header::AUTHORIZATION, bearer);
    let http = reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap();
    let caps = json!({"sampling": {}, "elicitation": {}});
    RawSession::try_open_with(http, url, caps, "2025-11-25")
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// How many sessions the gateway holds (`/status`).
async fn sessions_held(gw: &mcpmux::Gateway) -> u64 {
    let status: Value = reqwest::get(format!("http://{}/status", gw.local_addr()))
        .await
        .expect("GET /status")
        .text()
        .await
        .map(|text| serde_json::from_str(&text).expect("status JSON"))
        .expect("status body");
    status["sessions"].as_u64().expect("a session count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_served_by_its_home_through_any_replica() {
    let _suite = crate::suite::enter(module_path!());
    let (home, other) = (replica().await, replica().await);
    let session = open(&home.url(), ALICE).await;
    let via = session.at(&other.url());

    // A call through the other replica runs on the home, its progress coming back through it.
    let params = json!({"name": "t__progress", "arguments": {"steps": 3}, "_meta": {"progressToken": "p1"}});
    let (done, before) = via.call_with(json!("progress-1"), "tools/call", params).await;
    assert_eq!(done["result"]["content"][0]["text"], "done 3", "{done}");
    let progress = before
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .count();
    assert_eq!(progress, 3, "{before:?}");

    // A call on the home, cancelled through the other replica: the cancellation reaches it.
    let mut slow = session
        .stream(
            json!("slow-1"),
            "tools/call",
            json!({"name": "t__slow", "arguments": {"ms": 30000}}),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cancel = json!({"requestId": "slow-1", "reason": "test"});
    assert_eq!(via.notify("notifications/cancelled", cancel).await, 202);
    assert!(
        recv(&mut slow).await.is_none(),
        "a cancelled call is not answered"
    );
    let cancelled: Vec<Value> =
        serde_json::from_str(&session.tool_text("t__cancellations", json!({})).await).unwrap();
    assert_eq!(
        cancelled.len(),
        1,
        "the upstream saw the cancellation: {cancelled:?}"
    );

    // A sampling request of a call on the home, answered through the other replica.
    let mut sample = session
        .stream(
            json!("sample-1"),
            "tools/call",
            json!({"name": "t__sample", "arguments": {"prompt": "hi"}}),
        )
        .await;
    let asked = wait_for(&mut sample, |m| m["method"] == "sampling/createMessage").await;
    let answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {
        "role": "assistant", "model": "test", "content": {"type": "text", "text": "from afar"}}});
    assert_eq!(via.post(answer).await.status(), 202);
    let done = wait_for(&mut sample, |m| m["id"] == "sample-1").await;
    assert_eq!(
        done["result"]["content"][0]["text"], "sampled: from afar",
        "{done}"
    );

    // The GET stream through the other replica is the home's: a list change reaches it.
    let mut stream = messages(via.get(None).await);
    session.tool_text("t__add_tool", json!({"name": "late"})).await;
    wait_for(&mut stream, |m| m["method"] == "notifications/tools/list_changed").await;
    // The home holds the session's one GET stream.
    assert_eq!(
        session.get(None).await.status(),
        409,
        "a second GET stream on the home"
    );
    drop(stream);

    // Another principal with alice's session id is refused by the home, through the other.
    let bob = open(&other.url(), BOB).await;
    let mut theft = via.at(&other.url());
    theft.http = bob.http.clone();
    let stolen = theft
        .post(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))
        .await;
    assert_eq!(stolen.status(), 404, "bob with alice's session");

    // Nothing was taken over: the other replica holds only bob's session.
    assert_eq!(sessions_held(&other).await, 1);
    // DELETE through the other replica ends the session on its home.
    assert_eq!(via.delete().await, 200);
    let after = session
        .post(json!({"jsonrpc": "2.0", "id": 10, "method": "tools/list"}))
        .await;
    assert_eq!(after.status(), 404, "ended on its home");
    let after = via
        .post(json!({"jsonrpc": "2.0", "id": 11, "method": "tools/list"}))
        .await;
    assert_eq!(after.status(), 404, "ended, through the other replica too");
    home.stop().await;
    other.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_home_is_gone_is_taken_over_and_a_forged_passport_is_refused() {
    let _suite = crate::suite::enter(module_path!());
    let (home, other) = (replica().await, replica().await);
    let session = open(&home.url(), ALICE).await;
    let via = session.at(&other.url());
    assert_eq!(
        via.tool_text("t__echo", json!({"message": "forwarded"})).await,
        "echo: forwarded"
    );
    assert_eq!(sessions_held(&other).await, 0, "served by its home");

    // A host cannot pass itself off as a replica: a passport that does not open is refused.
    let forged = reqwest::Client::new()
        .post(home.url())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header(
            "mcpmux-passport",
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        )
        .header("mcp-session-id", &session.sid)
        .header("mcp-protocol-version", &session.version)
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string())
        .send()
        .await
        .expect("POST");
    assert_eq!(forged.status(), 403, "a forged passport");

    // The home stops: the other replica takes the session over, without a new initialize.
    home.stop().await;
    assert_eq!(
        via.tool_text("t__echo", json!({"message": "moved"})).await,
        "echo: moved"
    );
    assert_eq!(sessions_held(&other).await, 1, "taken over");
    assert_eq!(via.delete().await, 200);
    other.stop().await;
}

/// A host whose call's stream broke when the call's replica went away resumes it with
/// `Last-Event-ID` through another replica: that replica cannot resume a stream it never kept,
/// so it answers the request with an error at once (the event id names the request) rather than
/// leave the host waiting to its own timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_the_stream_of_a_call_whose_replica_is_gone_answers_the_call() {
    let _suite = crate::suite::enter(module_path!());
    let (home, other) = (replica().await, replica().await);
    let session = open(&home.url(), ALICE).await;
    let resp = session
        .post(json!({"jsonrpc": "2.0", "id": "slow-9", "method": "tools/call",
            "params": {"name": "t__slow", "arguments": {"ms": 30000}}}))
        .await;
    assert_eq!(resp.status(), 200);
    let mut events = crate::support::mcp::sse_events(resp);
    let primed = tokio::time::timeout(Duration::from_secs(20), events.recv())
        .await
        .expect("a priming event")
        .expect("the stream");
    let last = primed.id.expect("the priming event has an id");
    // The call's replica goes away (its drain cut short): the stream is gone with it.
    home.drain_cutter().cancel();
    home.stop().await;
    let via = session.at(&other.url());
    let resumed = via.get(Some(&last)).await;
    assert_eq!(resumed.status(), 200);
    let mut answer = messages(resumed);
    let reply = recv(&mut answer).await.expect("an answer for the call");
    assert_eq!(reply["id"], "slow-9", "{reply}");
    assert_eq!(reply["error"]["code"], -32000, "{reply}");
    let why = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(why.contains("cannot be resumed here"), "{why}");
    assert!(
        recv(&mut answer).await.is_none(),
        "the stream ends after the answer"
    );
    other.stop().await;
}
