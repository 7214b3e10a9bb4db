//! Sealed SSE event ids and server-to-client request ids across replicas sharing a `[cluster]`
//! key, in front of the test server: a `Last-Event-ID` forged, cut, in the old plain form,
//! sealed under another key or for another session resumes nothing (the GET is answered as one
//! without it); a standalone (GET) stream reconnecting with its last event id on another replica
//! brings the session's resource subscriptions (re-made upstream there) and its log level; an
//! answer to a sampling request under an id mcpmux did not seal for the session is refused
//! with 400 and never reaches the upstream. The real TypeScript SDK 1.32.2 and Python mcp 2.3.0
//! clients, moved from one replica to the other by a stand-in balancer that breaks their
//! connections, reconnect their GET stream with its last event id and keep their subscription
//! and log level.

use crate::support::mcp::*;
use crate::support::*;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use mcpmux::protocol::sse::SseEvent;
use mcpmux::seal::{ClusterKey, Purpose, Sealer};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const KEY_A: &str = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
const KEY_B: &str = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=";
/// A resource of the test server, and the URI mcpmux exposes it under.
const RESOURCE: &str = "test://static/3";
const EXPOSED: &str = "mcpmux://t/test://static/3";

/// A gateway in front of the test server, sealing with `key`.
async fn replica(key: &str) -> mcpmux::Gateway {
    replica_with(key, "").await
}

/// [`replica`] with more configuration (`[auth]`, `[[policy]]`).
async fn replica_with(key: &str, extra: &str) -> mcpmux::Gateway {
    let servers = format!(
        "{}\n[cluster]\nkey = {key:?}\n{extra}",
        test_server_toml("t", &[], None)
    );
    // No balancer in front: nothing to wait for at stop.
    boot_gateway(&servers, "shutdown_delay_secs = 0").await
}

fn sealer(key: &str) -> Sealer {
    Sealer::new(&ClusterKey::parse(key).expect("a key"), &[])
}

async fn next_event(rx: &mut mpsc::Receiver<SseEvent>) -> SseEvent {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("no SSE event in time")
        .expect("the stream ended")
}

/// The next event whose message satisfies `pred`.
async fn event_where(rx: &mut mpsc::Receiver<SseEvent>, pred: impl Fn(&Value) -> bool) -> SseEvent {
    loop {
        let event = next_event(rx).await;
        if serde_json::from_str::<Value>(&event.data).is_ok_and(|m| pred(&m)) {
            return event;
        }
    }
}

/// `token` with one bit of its sealed bytes flipped, and cut short.
fn spoiled(token: &str) -> [(&'static str, String); 2] {
    let bytes = URL_SAFE_NO_PAD.decode(token).expect("base64url");
    let mut flipped = bytes.clone();
    flipped[20] ^= 1;
    [
        ("forged", URL_SAFE_NO_PAD.encode(flipped)),
        ("truncated", URL_SAFE_NO_PAD.encode(&bytes[..bytes.len() - 4])),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_truncated_other_key_or_other_session_event_id_resumes_nothing() {
    let _suite = crate::suite::enter(module_path!());
    let home = replica(KEY_A).await;
    let s = RawSession::open(&home.url(), json!({})).await;
    let other = RawSession::open(&home.url(), json!({})).await;
    // A call that runs a while: its POST stream opens with a priming event.
    let call = json!({"jsonrpc":"2.0","id":7,"method":"tools/call",
        "params":{"name":"t__slow","arguments":{"ms":20000}}});
    let resp = s.post(call).await;
    assert_eq!(resp.status(), 200);
    let mut events = sse_events(resp);
    let id = next_event(&mut events).await.id.expect("a priming event id");
    assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{id}");
    // Both standalone streams are open: a GET answered as one without Last-Event-ID gets 409.
    let (standalone, others) = (s.get(None).await, other.get(None).await);
    assert_eq!(
        (standalone.status().as_u16(), others.status().as_u16()),
        (200, 200)
    );
    assert_eq!(s.get(Some(&id)).await.status(), 200, "the id resumes its stream");

    let plaintext = sealer(KEY_A)
        .open(Purpose::EventId, s.sid.as_bytes(), &id)
        .expect("sealed under the key, for the session");
    let resealed = sealer(KEY_A).seal(Purpose::EventId, s.sid.as_bytes(), &plaintext);
    assert_eq!(
        s.get(Some(&resealed)).await.status(),
        200,
        "the same position sealed again under the key"
    );
    let [forged, truncated] = spoiled(&id);
    let refused = [
        forged,
        truncated,
        ("the old plain form", "1-0".to_string()),
        (
            "another key",
            sealer(KEY_B).seal(Purpose::EventId, s.sid.as_bytes(), &plaintext),
        ),
        (
            "sealed for another session",
            sealer(KEY_A).seal(Purpose::EventId, other.sid.as_bytes(), &plaintext),
        ),
    ];
    for (what, bad) in &refused {
        assert_eq!(s.get(Some(bad)).await.status(), 409, "{what}");
    }
    assert_eq!(other.get(Some(&id)).await.status(), 409, "on another session");

    assert_eq!(
        s.notify("notifications/cancelled", json!({"requestId": 7})).await,
        202
    );
    drop((standalone, others, events));
    home.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_stream_reconnecting_on_another_replica_brings_its_subscriptions_and_log_level() {
    let _suite = crate::suite::enter(module_path!());
    let (one, two) = (replica(KEY_A).await, replica(KEY_A).await);
    let s = RawSession::open(&one.url(), json!({})).await;
    let resp = s.get(None).await;
    assert_eq!(resp.status(), 200);
    let mut events = sse_events(resp);
    let primed = next_event(&mut events).await;
    assert!(
        primed.data.is_empty() && primed.id.is_some(),
        "a priming event first: {primed:?}"
    );
    let subscribed = s.call("resources/subscribe", json!({"uri": EXPOSED})).await;
    assert_eq!(subscribed["result"], json!({}), "{subscribed}");
    let level = s.call("logging/setLevel", json!({"level": "warning"})).await;
    assert_eq!(level["result"], json!({}), "{level}");
    // Each change primes the stream with a fresh id; every message's id is current too.
    assert!(next_event(&mut events).await.data.is_empty());
    assert_eq!(s.tool_text("t__touch", json!({"uri": RESOURCE})).await, "touched");
    let updated = event_where(&mut events, |m| m["method"] == "notifications/resources/updated").await;
    let last = updated.id.expect("an id on every standalone event");
    drop(events);
    one.stop().await;

    // The host reconnects its stream with that id through the balancer, which now sends the
    // session to the other replica: it takes the session over and restores both.
    let moved = s.at(&two.url());
    let resp = moved.get(Some(&last)).await;
    assert_eq!(resp.status(), 200);
    let mut events = sse_events(resp);
    assert_eq!(
        moved.tool_text("t__touch", json!({"uri": RESOURCE})).await,
        "touched",
        "subscribed again upstream"
    );
    let updated = event_where(&mut events, |m| m["method"] == "notifications/resources/updated").await;
    let message: Value = serde_json::from_str(&updated.data).expect("JSON");
    assert_eq!(message["params"]["uri"], EXPOSED);
    let log = |id: i64, level: &str| {
        let args = json!({"name": "t__log", "arguments": {"count": 2, "level": level}});
        moved.call_with(json!(id), "tools/call", args)
    };
    let (_, before) = log(1, "info").await;
    assert!(
        before.iter().all(|m| m["method"] != "notifications/message"),
        "below the restored level: {before:?}"
    );
    let (_, before) = log(2, "error").await;
    let logged = before
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .count();
    assert_eq!(logged, 2, "{before:?}");
    drop(events);
    two.stop().await;
}

/// Alice's API key, and a policy letting her use the test server's tools and `resources`.
fn alice_may_read(resources: &str) -> String {
    format!(
        "[auth]\n[[auth.api_keys]]\nname = \"alice\"\nkey = \"alice-key-0123456789\"\ngroups = [\"eng\"]\n\
         [[policy]]\ngroups = [\"eng\"]\nallow = [\"t__*\", {resources:?}]\n"
    )
}

/// The subscriptions are made again through the pipeline: a URI the policy of the replica
/// taking the session over no longer lets the principal read is not subscribed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_the_policy_no_longer_allows_is_not_made_again() {
    let _suite = crate::suite::enter(module_path!());
    let one = replica_with(KEY_A, &alice_may_read("mcpmux://t/*")).await;
    let two = replica_with(KEY_A, &alice_may_read("mcpmux://t/test://static/1")).await;
    let s = RawSession::open_as(&one.url(), "alice-key-0123456789").await;
    for uri in ["mcpmux://t/test://static/1", EXPOSED] {
        let subscribed = s.call("resources/subscribe", json!({ "uri": uri })).await;
        assert_eq!(subscribed["result"], json!({}), "{subscribed}");
    }
    let resp = s.get(None).await;
    assert_eq!(resp.status(), 200);
    let mut events = sse_events(resp);
    assert_eq!(s.tool_text("t__touch", json!({"uri": RESOURCE})).await, "touched");
    let updated = event_where(&mut events, |m| m["method"] == "notifications/resources/updated").await;
    let last = updated.id.expect("an event id");
    drop(events);
    one.stop().await;

    let moved = s.at(&two.url());
    let resp = moved.get(Some(&last)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        moved
            .tool_text("t__touch", json!({"uri": "test://static/1"}))
            .await,
        "touched",
        "the URI still allowed is subscribed again"
    );
    assert_eq!(
        moved.tool_text("t__touch", json!({"uri": RESOURCE})).await,
        "not subscribed",
        "the URI no longer allowed is not"
    );
    drop(resp);
    two.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampling_answer_under_an_id_not_sealed_for_the_session_is_refused_with_400() {
    let _suite = crate::suite::enter(module_path!());
    let home = replica(KEY_A).await;
    let caps = json!({"sampling": {}});
    let s = RawSession::open(&home.url(), caps.clone()).await;
    let other = RawSession::open(&home.url(), caps).await;
    let args = json!({"name": "t__sample", "arguments": {"prompt": "hi"}});
    let mut call = s.stream(json!(5), "tools/call", args).await;
    let request = wait_for(&mut call, |m| m["method"] == "sampling/createMessage").await;
    let id = request["id"].as_str().expect("a string id").to_string();
    let answer = |id: Value, text: &str| {
        json!({"jsonrpc": "2.0", "id": id, "result": {"role": "assistant", "model": "m",
            "content": {"type": "text", "text": text}}})
    };
    let plaintext = sealer(KEY_A)
        .open(Purpose::ServerRequestId, s.sid.as_bytes(), &id)
        .expect("sealed under the key, for the session");
    let [forged, truncated] = spoiled(&id);
    let refused = [
        forged,
        truncated,
        ("a number", "1".to_string()),
        (
            "another key",
            sealer(KEY_B).seal(Purpose::ServerRequestId, s.sid.as_bytes(), &plaintext),
        ),
        (
            "sealed for another session",
            sealer(KEY_A).seal(Purpose::ServerRequestId, other.sid.as_bytes(), &plaintext),
        ),
    ];
    for (what, bad) in &refused {
        let bad = match *what {
            "a number" => json!(1),
            _ => json!(bad),
        };
        let resp = s.post(answer(bad, "forged")).await;
        assert_eq!(resp.status(), 400, "{what}");
        let body: Value = serde_json::from_str(&resp.text().await.expect("body")).expect("JSON");
        assert_eq!(body["id"], Value::Null, "{what}: {body}");
    }
    let stolen = other.post(answer(json!(id), "stolen")).await;
    assert_eq!(stolen.status(), 400, "on another session");
    assert_eq!(s.post(answer(json!(id), "from the host")).await.status(), 202);
    let done = wait_for(&mut call, |m| m["id"] == json!(5)).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "sampled: from the host",
        "only the host's answer reached the upstream: {done}"
    );
    home.stop().await;
}

/// A stand-in for a balancer: every connection goes to the replica it points at; moving it
/// breaks every open connection (as that replica's death would) and sends new ones elsewhere.
struct Switch {
    addr: SocketAddr,
    target: Arc<Mutex<(SocketAddr, CancellationToken)>>,
    task: tokio::task::JoinHandle<()>,
}

impl Switch {
    async fn start(to: SocketAddr) -> Switch {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let target = Arc::new(Mutex::new((to, CancellationToken::new())));
        let current = target.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let (to, cut) = current.lock().expect("switch").clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(to).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut.cancelled() => {}
                    }
                });
            }
        });
        Switch { addr, target, task }
    }

    /// Break every connection and send the next ones to `to`.
    fn move_to(&self, to: SocketAddr) {
        let mut target = self.target.lock().expect("switch");
        target.1.cancel();
        *target = (to, CancellationToken::new());
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_clients_reconnect_their_get_stream_on_another_replica_and_keep_their_subscription() {
    let _suite = crate::suite::enter(module_path!());
    let (one, two) = (replica(KEY_A).await, replica(KEY_A).await);
    let dir = scratch_dir("cluster-events");
    for client in ["typescript", "python"] {
        let switch = Switch::start(one.local_addr()).await;
        let url = format!("http://{}/mcp", switch.addr);
        let marker = dir.join(format!("{client}.subscribed"));
        let mut args: Vec<String> = vec![
            EXPOSED.into(),
            RESOURCE.into(),
            path_str(&marker),
            "--prefix".into(),
            "t__".into(),
        ];
        if client == "python" {
            args.extend(["--mode".into(), "legacy".into()]);
        }
        let run = tokio::spawn(async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            match client {
                "typescript" => run_ts_client_async(&url, "resubscribe", &args).await,
                _ => run_py_client_async(&url, "resubscribe", &args).await,
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        while !marker.exists() && !run.is_finished() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // The session's replica goes away: its connections break, the next ones reach the other.
        switch.move_to(two.local_addr());
        let run = run.await.expect("the client's task");
        assert!(run.success(), "{client}:\n{run}");
        assert!(
            run.json["touches"].as_u64().is_some_and(|n| n >= 1),
            "{client}: {}",
            run.json
        );
        assert_eq!(run.json["logs"], json!(["error", "error"]), "{client}");
    }
    one.stop().await;
    two.stop().await;
}
