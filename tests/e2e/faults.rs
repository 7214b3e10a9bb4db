//! Upstream faults end to end, with the in-repo fault-injecting test server and real peers: a
//! server that stops answering (found by the health check, restarted), timeouts (cancelled
//! upstream; extended by progress when configured, never past the hard maximum), in-flight
//! limits and fairness between sessions, a reply over the line limit, a slow-starting modern
//! server, a crash loop (reported by `/status` and `mcpmux status`), and an abandoned session
//! whose per-session upstream process goes away with it.

use crate::support::mcp::RawSession;
use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

/// A guard against hangs (not a performance assertion): no single step here may take longer.
const STEP_LIMIT: Duration = Duration::from_secs(60);

async fn bounded<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(STEP_LIMIT, fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what} did not finish within {STEP_LIMIT:?}"),
    }
}

fn status_url(gw: &mcpmux::Gateway) -> String {
    format!("http://{}/status", gw.local_addr())
}

fn error_message(reply: &Value) -> String {
    reply["error"]["message"].as_str().unwrap_or_default().to_string()
}

async fn pid_of(s: &RawSession, tool: &str) -> Option<u64> {
    let text = s.tool_text(tool, json!({})).await;
    serde_json::from_str::<Value>(&text).ok()?["pid"].as_u64()
}

fn process_alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| !stat.contains(") Z "))
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_answering_is_found_by_its_health_check_and_restarted() {
    let _suite = crate::suite::enter(module_path!());
    let servers = format!(
        "{}health_check_interval_secs = 1\nhealth_check_timeout_secs = 1\n\n{}",
        test_server_toml("frozen", &[], None),
        test_server_toml("other", &[], None)
    );
    let gw = boot_gateway(&servers, "").await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    let first_pid = pid_of(&s, "frozen__whoami").await;
    // The pending call fails once the health check gives the connection up.
    let frozen = bounded(
        "the frozen call",
        s.call("tools/call", json!({"name": "frozen__freeze", "arguments": {}})),
    )
    .await;
    let message = error_message(&frozen);
    assert!(
        message.contains("frozen") && message.contains("health check"),
        "{frozen}"
    );
    assert_eq!(
        s.tool_text("other__echo", json!({"message": "fine"})).await,
        "echo: fine"
    );
    // The supervisor restarts it: a new process answers.
    let restarted = bounded("the restart", async {
        loop {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let reply = s
                .call("tools/call", json!({"name": "frozen__whoami", "arguments": {}}))
                .await;
            if reply["result"].is_object() {
                break pid_of(&s, "frozen__whoami").await;
            }
        }
    })
    .await;
    assert_ne!(restarted, first_pid);
    let doc = gateway_status(&gw).await;
    let entry = status_upstream(&doc, "frozen");
    assert_eq!(entry["phase"], "ready", "{doc}");
    assert!(entry["restarts"].as_u64() >= Some(1), "{doc}");
    assert!(
        entry["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("health check")),
        "{doc}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_cancel_upstream_and_progress_extends_them_up_to_the_hard_maximum() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("timeouts");
    let log = dir.join("plain.jsonl");
    let servers = format!(
        "{}request_timeout_secs = 1\n\n{}request_timeout_secs = 1\ntimeout_resets_on_progress = true\n",
        test_server_toml("plain", &[], Some(&log)),
        test_server_toml("patient", &[], None)
    );
    let gw = boot_gateway(&servers, "max_request_timeout_secs = 4").await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    let call = |name: &str, steps: u64| json!({"name": name, "arguments": {"steps": steps, "delay_ms": 600}, "_meta": {"progressToken": "p"}});

    // A hung call: -32001 naming the server, and the upstream is told to stop.
    let hung = bounded(
        "the hung call",
        s.call("tools/call", json!({"name": "plain__hang", "arguments": {}})),
    )
    .await;
    assert_eq!(hung["error"]["code"], -32001, "{hung}");
    assert!(error_message(&hung).contains("plain"), "{hung}");
    let cancelled = bounded("the cancellation", async {
        loop {
            let seen = upstream_log(&log);
            if seen.iter().any(|m| m["method"] == "notifications/cancelled") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    cancelled.await;

    // Progress every 0.6 s keeps a 1 s timeout alive where the server says so...
    let (reply, _) = s
        .call_with(json!("p1"), "tools/call", call("patient__progress", 4))
        .await;
    assert!(reply["result"].is_object(), "{reply}");
    // ...not where it does not...
    let (reply, _) = s
        .call_with(json!("p2"), "tools/call", call("plain__progress", 4))
        .await;
    assert_eq!(reply["error"]["code"], -32001, "{reply}");
    // ...and never past gateway.max_request_timeout_secs (4 s) however much progress comes.
    let (reply, _) = s
        .call_with(json!("p3"), "tools/call", call("patient__progress", 12))
        .await;
    assert_eq!(reply["error"]["code"], -32001, "{reply}");
    assert!(error_message(&reply).contains("within 4 s"), "{reply}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_limits_fail_fast_and_one_session_cannot_starve_another() {
    let _suite = crate::suite::enter(module_path!());
    let servers = format!(
        "{}\n{}max_in_flight = 2\n",
        test_server_toml("busy", &[], None),
        test_server_toml("narrow", &[], None)
    );
    let gw = boot_gateway(&servers, "max_in_flight_per_session = 8").await;
    let flooder = RawSession::open(&gw.url(), json!({})).await;
    let other = RawSession::open(&gw.url(), json!({})).await;
    let slow = |ms: u64| json!({"name": "busy__slow", "arguments": {"ms": ms}});

    let flood = futures_util::future::join_all((0..20).map(|_| flooder.call("tools/call", slow(3000))));
    let calm = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        futures_util::future::join_all((0..6).map(|_| other.call("tools/call", slow(100)))).await
    };
    let (flooded, calm) = bounded("the flood", async { tokio::join!(flood, calm) }).await;
    let refused = flooded.iter().filter(|r| r["error"]["code"] == -32003).count();
    let served = flooded.iter().filter(|r| r["result"].is_object()).count();
    assert_eq!((served, refused), (8, 12), "{flooded:?}");
    assert!(calm.iter().all(|r| r["result"].is_object()), "{calm:?}");

    // A server's own limit: its third concurrent call is refused at once, naming it.
    let narrow = json!({"name": "narrow__slow", "arguments": {"ms": 1500}});
    let replies = bounded(
        "the narrow calls",
        futures_util::future::join_all((0..3).map(|_| other.call("tools/call", narrow.clone()))),
    )
    .await;
    let overloaded: Vec<_> = replies.iter().filter(|r| r["error"]["code"] == -32003).collect();
    assert_eq!(overloaded.len(), 1, "{replies:?}");
    assert!(error_message(overloaded[0]).contains("narrow"), "{replies:?}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_over_the_line_limit_fails_its_call_at_once() {
    let _suite = crate::suite::enter(module_path!());
    let servers = format!("{}max_line_bytes = 65536\n", test_server_toml("t", &[], None));
    let gw = boot_gateway(&servers, "").await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    let too_big = bounded(
        "the oversized reply",
        s.call(
            "tools/call",
            json!({"name": "t__big", "arguments": {"bytes": 200_000}}),
        ),
    )
    .await;
    assert!(error_message(&too_big).contains("max_line_bytes"), "{too_big}");
    let fits = s.tool_text("t__big", json!({"bytes": 60_000})).await;
    assert_eq!(fits.len(), 60_000);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_starting_modern_server_is_still_spoken_to_in_its_era() {
    let _suite = crate::suite::enter(module_path!());
    // mcp-server-time (Python mcp 2.3.0) after 7 s of start-up: the discover probe is answered
    // after mcpmux already sent initialize, which the server refuses.
    let (python, args) = peers().time_cmd.clone();
    let script = format!("sleep 7; exec {python:?} {}", args.join(" "));
    let servers = format!(
        "[servers.time]\ncommand = \"sh\"\nargs = [\"-c\", {script:?}]\n\n{}",
        test_server_toml("t", &["--start-delay-ms", "3000"], None)
    );
    let gw = boot_gateway(&servers, "").await;
    // A host's initialize no longer waits this long for them: wait until both are ready.
    bounded("both servers ready", async {
        loop {
            let doc = gateway_status(&gw).await;
            if ["time", "t"]
                .iter()
                .all(|n| status_upstream(&doc, n)["phase"] == "ready")
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    let text = s
        .tool_text("time__get_current_time", json!({"timezone": "UTC"}))
        .await;
    assert!(text.contains("UTC"), "{text}");
    assert_eq!(
        s.tool_text("t__echo", json!({"message": "late"})).await,
        "echo: late"
    );
    let doc = gateway_status(&gw).await;
    assert_eq!(status_upstream(&doc, "time")["era"], "stateless", "{doc}");
    assert_eq!(status_upstream(&doc, "t")["era"], "session", "{doc}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_loop_is_reported_and_retried_slowly_while_others_serve() {
    let _suite = crate::suite::enter(module_path!());
    let servers = format!(
        "{}\n{}",
        test_server_toml("broken", &["--crash-on-start"], None),
        test_server_toml("fine", &[], None)
    );
    let gw = boot_gateway(&servers, "").await;
    let doc = bounded("the crash loop", async {
        loop {
            let doc = gateway_status(&gw).await;
            if status_upstream(&doc, "broken")["phase"] == "crash-loop" {
                break doc;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;
    let broken = status_upstream(&doc, "broken");
    assert!(broken["restarts"].as_u64() >= Some(4), "{doc}");
    assert!(
        broken["last_error"].as_str().is_some_and(|e| !e.is_empty()),
        "{doc}"
    );
    assert_eq!(status_upstream(&doc, "fine")["phase"], "ready", "{doc}");

    // `mcpmux status` prints it and exits 1 (not every upstream is ready).
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mcpmux"));
    cmd.args(["status", "--url", &status_url(&gw)]);
    let run = tokio::task::spawn_blocking(move || run_client(cmd, Duration::from_secs(30)))
        .await
        .expect("status command");
    assert_eq!(run.status.code(), Some(1), "{run}");
    assert!(
        run.stdout.contains("crash-loop") && run.stdout.contains("fine"),
        "{run}"
    );

    let s = RawSession::open(&gw.url(), json!({})).await;
    assert_eq!(
        s.tool_text("fine__echo", json!({"message": "up"})).await,
        "echo: up"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_session_is_reaped_with_its_per_session_process() {
    let _suite = crate::suite::enter(module_path!());
    let servers = format!(
        "{}isolation = \"per-session\"\n",
        test_server_toml("own", &[], None)
    );
    let gw = boot_gateway(&servers, "session_idle_timeout_secs = 2").await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    let pid = pid_of(&s, "own__whoami").await.expect("whoami pid");
    assert!(process_alive(pid));
    assert_eq!(gateway_status(&gw).await["sessions"], 1);
    // The host goes away without DELETE.
    drop(s);
    bounded("the reaping", async {
        while process_alive(pid) || gateway_status(&gw).await["sessions"] != 0 {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await;
    gw.stop().await;
}
