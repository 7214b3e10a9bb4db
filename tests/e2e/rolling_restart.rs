//! A rolling restart as issue 25 ran it: three real `mcpmux serve` replicas (each with its own
//! stdio server-everything) with nothing set but `[cluster]`, behind a real HAProxy checking
//! `/readyz` every 500 ms and marking a replica down after 2 failed checks, retrying only
//! refused connections (HAProxy's default; no retry of a 503). Session-era and 2026-07-28
//! clients call through it without pause while each replica in turn gets SIGTERM, exits and is
//! started again before the next: no call fails, because a stopping replica keeps serving
//! until the balancer has seen its readiness flip (the `[cluster]` default of
//! `gateway.shutdown_delay_secs`). A second signal still stops a replica at once.

use crate::replicas::{everything_servers, modern_load, session_load, Tally, ECHO, LONG_TOOL};
use crate::support::cluster::{BalancerKind, Cluster, HaproxyTweaks, Spread};
use crate::support::mcp::{message_with_id, RawSession};
use crate::support::scratch_dir;
use crate::support::serve::ServeProcess;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const REPLICAS: usize = 3;
/// The issue's balancer: checks every 500 ms, down after 2 in a row, up after 2.
const ISSUE_CHECKS: &str = "inter 500ms fall 2 rise 2";
/// Only a refused connection is sent elsewhere: a 503 reaches the client.
const ISSUE_RETRIES: &str = "conn-failure";
/// What the stopping replica logs while it keeps serving (it did stop by a delay).
const DELAY_LOG: &str = "still serving until the shutdown delay is over";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_with_only_cluster_set_fails_no_call() {
    let _suite = crate::suite::enter(module_path!());
    let servers = everything_servers().await;
    let tweaks = HaproxyTweaks {
        checks: Some(ISSUE_CHECKS),
        retry_on: Some(ISSUE_RETRIES),
    };
    let balancer = (BalancerKind::Haproxy, Spread::SessionHash, tweaks);
    let want = [ECHO, LONG_TOOL];
    let mut cluster =
        Cluster::start_tweaked("rolling-issue25", REPLICAS, balancer, "", &servers, &want).await;
    let url = cluster.url();
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    // Four 2026-07-28 callers (echoes, and calls running 2 s) and three session-era hosts.
    let mut callers = modern_load(url.clone(), 4, tally.clone(), stop.clone());
    let mut sessions = Vec::new();
    for _ in 0..REPLICAS {
        sessions.push(RawSession::open(&url, json!({})).await);
    }
    let pause = Duration::from_millis(20);
    callers.extend(session_load(sessions, pause, tally.clone(), stop.clone()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut served_before = Vec::new();
    for i in 0..REPLICAS {
        served_before.push(tally.ok.load(Ordering::Relaxed));
        cluster.sigterm(i);
        cluster.wait_balancer_sees(i, false).await;
        cluster.wait_exit(i).await;
        cluster.restart(i).await;
    }
    let (ok, failed) = tally.settle(&stop, callers).await;
    let failures = tally.failures();
    eprintln!("rolling restart (issue 25 balancer): {ok} calls ok, {failed} failed");
    assert_eq!(failed, 0, "{ok} ok; failures: {failures:#?}{}", cluster.logs());
    // Calls kept going through every restart.
    served_before.push(ok);
    assert!(
        served_before.windows(2).all(|w| w[1] > w[0] + 10),
        "calls stalled: ok counts at each SIGTERM {served_before:?}"
    );
    for (i, r) in cluster.replicas.iter().enumerate() {
        assert!(
            r.log().contains(DELAY_LOG),
            "replica {} did not keep serving after SIGTERM:\n{}",
            i + 1,
            r.log()
        );
    }
}

/// A `[cluster]` replica (nothing else set) with a call in flight: the first SIGTERM starts the
/// shutdown delay (still serving, `/readyz` 503); a second one ends the stop at once: the call
/// in flight (it would run 120 s) is answered with the drain error and the replica exits,
/// instead of serving out the delay and the call (`drain_timeout_secs` is 600).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_stops_a_replica_at_once_during_its_shutdown_delay() {
    let _suite = crate::suite::enter(module_path!());
    let servers = everything_servers().await;
    let key = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 32]>())
    };
    let dir = scratch_dir("rolling-second-signal");
    let servers = format!("{servers}\n[cluster]\nkey = \"{key}\"\n");
    let mut gw = ServeProcess::start(&dir, "drain_timeout_secs = 600", &servers, &dir, &[]);
    gw.wait_tools(&[LONG_TOOL]).await;
    let session = RawSession::open(&gw.url(), json!({})).await;
    let long = json!({"name": LONG_TOOL, "arguments": {"duration": 120, "steps": 120}});
    let mut call = session.stream(json!(7), "tools/call", long).await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    gw.signal(libc::SIGTERM);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ready = reqwest::get(format!("http://127.0.0.1:{}/readyz", gw.port)).await;
    let ready = ready.map(|r| r.status().as_u16()).unwrap_or(0);
    assert_eq!(ready, 503, "{}", gw.log());
    // In the shutdown delay: a new call is still served.
    let text = session.tool_text(ECHO, json!({"message": "in the delay"})).await;
    assert_eq!(text, "Echo: in the delay");

    gw.signal(libc::SIGTERM);
    let reply = message_with_id(&mut call, &json!(7), Duration::from_secs(30))
        .await
        .unwrap_or_else(|_| panic!("the call was not answered; log:\n{}", gw.log()));
    let reply: Value = reply.unwrap_or_else(|| panic!("the stream ended unanswered; log:\n{}", gw.log()));
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("shutting down"), "{reply}; log:\n{}", gw.log());
    let status = gw.wait_exit(Duration::from_secs(30)).await;
    assert!(status.success(), "exit: {status}; log:\n{}", gw.log());
    assert!(gw.log().contains(DELAY_LOG), "{}", gw.log());
}
