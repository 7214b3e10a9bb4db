//! Three real `mcpmux serve` replicas behind a real HAProxy and a real nginx (configs rendered
//! from `deploy/balancers/`), each replica with its own stdio server-everything, as each pod or
//! VM of a deployment runs its own stdio servers (a shared HTTP server-everything would hide
//! what a replica's death does to its children). The Python mcp 2.3.0 and TypeScript 1.32.2
//! clients drive them: the session era behind consistent hashing on `Mcp-Session-Id`, the
//! 2026-07-28 era behind round-robin, and a rolling restart (SIGTERM each replica in turn) under
//! load with HAProxy checking `/readyz`. A session-era request reaching a replica other than its
//! session's home is forwarded to the home while it lives; a killed or stopping home's sessions
//! are taken over from their sealed ids.

use crate::support::cluster::{BalancerKind, Cluster, Spread};
use crate::support::everything::check_everything;
use crate::support::mcp::{message_with_id, messages, RawSession, ACCEPT_BOTH};
use crate::support::{path_str, peers, run_py_client_async, run_ts_client_async, ClientRun};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const REPLICAS: usize = 3;
const MODERN: &str = "2026-07-28";
pub(crate) const ECHO: &str = "everything__echo";
pub(crate) const LONG_TOOL: &str = "everything__trigger-long-running-operation";
/// Small pages, so listing takes several requests (each may reach another replica).
const GATEWAY: &str = "page_size = 3\ndrain_timeout_secs = 15";
/// For the rolling restarts behind nginx (its passive `fail_timeout`, 5 s, for the replica
/// restarted before is over) and of session-era hosts behind HAProxy (its checks mark the
/// replica down first): the replica keeps serving for a while after SIGTERM.
const DELAYED_STOP: &str = "page_size = 3\ndrain_timeout_secs = 15\nshutdown_delay_secs = 4";

/// `[servers.everything]`: server-everything over stdio, a child of each replica.
pub(crate) async fn everything_servers() -> String {
    let js = tokio::task::spawn_blocking(|| peers().everything_js.clone())
        .await
        .expect("peer installation panicked");
    format!(
        "[servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n",
        path_str(&js)
    )
}

async fn cluster(tag: &str, kind: BalancerKind, spread: Spread, gateway: &str) -> Cluster {
    let servers = everything_servers().await;
    Cluster::start(tag, REPLICAS, kind, spread, gateway, &servers, &[ECHO, LONG_TOOL]).await
}

#[track_caller]
fn assert_run(run: &ClientRun, cluster: &Cluster) {
    if let Err(why) = check_everything(run, "everything", false) {
        panic!("{why}:\n{run}{}", cluster.logs());
    }
}

/// How many sessions each replica holds now (from its own `/status`).
async fn sessions_per_replica(cluster: &Cluster) -> Vec<u64> {
    let mut counts = Vec::new();
    for r in &cluster.replicas {
        let doc: Value = reqwest::get(r.admin_url("/status"))
            .await
            .expect("GET /status")
            .text()
            .await
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .expect("/status is JSON");
        counts.push(doc["sessions"].as_u64().unwrap_or(0));
    }
    counts
}

/// The session era behind consistent hashing (HAProxy: and its stick table): SDK clients run every round trip (calls,
/// progress, sampling, elicitation, prompts, resources, paging by 3), and raw sessions spread
/// over the replicas each keep working; a request that reached a replica other than its
/// session's would be answered 404 and fail the run.
async fn session_era_behind(kind: BalancerKind, tag: &str) {
    let cluster = cluster(tag, kind, Spread::SessionHash, GATEWAY).await;
    let url = cluster.url();
    let py_args = [
        "--mode",
        "legacy",
        "--prefix",
        "everything__",
        "--resource-prefix",
        "mcpmux://everything/",
        "--no-roots",
    ];
    let ts_args = [
        "--prefix",
        "everything__",
        "--resource-prefix",
        "mcpmux://everything/",
        "--no-roots",
    ];
    // Raw sessions held open meanwhile: new sessions round-robin, so they land on every replica.
    let mut held = Vec::new();
    for _ in 0..REPLICAS * 2 {
        held.push(RawSession::open(&url, json!({})).await);
    }
    // One client after the other: two sessions with calls in flight on one replica's shared
    // stdio server-everything make its sampling request ambiguous (it goes to the oldest call's
    // session, by the attribution rule), and behind nginx's hash both may land on one replica.
    let py = run_py_client_async(&url, "everything", &py_args).await;
    let ts = run_ts_client_async(&url, "everything", &ts_args).await;
    assert_run(&py, &cluster);
    assert_run(&ts, &cluster);
    assert_eq!(py.json["protocol_version"], "2025-11-25", "{py}");

    for (i, s) in held.iter().enumerate() {
        let (tools, pages) = s.list_all("tools/list", "tools").await;
        assert!(
            pages > 3 && tools.len() > 9,
            "session {i}: {pages} pages, {} tools",
            tools.len()
        );
        let text = s.tool_text(ECHO, json!({"message": format!("held {i}")})).await;
        assert_eq!(text, format!("Echo: held {i}"));
    }
    let spread = sessions_per_replica(&cluster).await;
    assert!(
        spread.iter().filter(|&&n| n > 0).count() >= 2,
        "the sessions did not spread over the replicas: {spread:?}"
    );
    for s in &held {
        s.delete().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_era_behind_haproxy_consistent_hash() {
    let _suite = crate::suite::enter(module_path!());
    session_era_behind(BalancerKind::Haproxy, "replicas-haproxy-hash").await;
}

/// nginx (open source) hashes `Mcp-Session-Id` but cannot learn which replica answered the
/// `initialize` (HAProxy's stick table does): the session's next request lands on the replica
/// its id hashes to, which must take the session over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_era_behind_nginx_consistent_hash() {
    let _suite = crate::suite::enter(module_path!());
    session_era_behind(BalancerKind::Nginx, "replicas-nginx-hash").await;
}

/// One 2026-07-28 `tools/call` (no session): the result, or what went wrong.
pub(crate) async fn modern_call(
    http: &reqwest::Client,
    url: &str,
    id: u64,
    tool: &str,
    args: Value,
) -> Result<Value, String> {
    let params = json!({"name": tool, "arguments": args, "_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}}});
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let resp = http
        .post(url)
        .header("accept", ACCEPT_BOTH)
        .header("content-type", "application/json")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| format!("POST: {e}"))?;
    let status = resp.status().as_u16();
    if status != 200 {
        let text = resp.text().await.unwrap_or_default();
        return Err(format!("HTTP {status}: {text}"));
    }
    let mut rx = messages(resp);
    loop {
        match tokio::time::timeout(Duration::from_secs(30), rx.recv()).await {
            Ok(Some(msg)) if msg["id"] == json!(id) => {
                return match msg.get("result") {
                    Some(result) if result["isError"] != json!(true) => Ok(result.clone()),
                    _ => Err(format!("answer: {msg}")),
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => return Err("the response ended without an answer".into()),
            Err(_) => return Err("no answer within 30 s".into()),
        }
    }
}

/// The 2026-07-28 era behind plain round-robin: the Python client lists every page (each page
/// request may reach another replica) and calls; raw requests reach every replica.
async fn modern_era_behind(kind: BalancerKind, tag: &str) {
    let cluster = cluster(tag, kind, Spread::RoundRobin, GATEWAY).await;
    let url = cluster.url();
    let args = [
        "--mode",
        MODERN,
        ECHO,
        r#"{"message": "round robin"}"#,
        "everything__get-sum",
        r#"{"a": 2, "b": 40}"#,
    ];
    let (a, b) = tokio::join!(
        run_py_client_async(&url, "call", &args),
        run_py_client_async(&url, "call", &args),
    );
    for run in [&a, &b] {
        assert!(run.success(), "{run}{}", cluster.logs());
        assert_eq!(run.json["protocol_version"], MODERN, "{run}");
        let calls = run.json["calls"].as_array().cloned().unwrap_or_default();
        assert_eq!(calls[0]["text"], "Echo: round robin", "{run}");
        assert!(
            calls[1]["text"].as_str().is_some_and(|t| t.contains("42")),
            "{run}"
        );
        let tools = run.json["tools"].as_array().map(Vec::len).unwrap_or(0);
        assert!(tools > 9, "fewer tools than pages of 3 would hold: {run}");
    }
    let http = reqwest::Client::new();
    for id in 0..(REPLICAS as u64 * 3) {
        let msg = format!("call {id}");
        let result = modern_call(&http, &url, id, ECHO, json!({"message": msg}))
            .await
            .unwrap_or_else(|e| panic!("call {id}: {e}{}", cluster.logs()));
        assert_eq!(result["content"][0]["text"], format!("Echo: {msg}"));
    }
    if let Some(per_replica) = cluster.requests_per_replica() {
        assert!(
            per_replica.iter().all(|&n| n > 0),
            "round-robin left a replica without requests: {per_replica:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_era_behind_haproxy_round_robin() {
    let _suite = crate::suite::enter(module_path!());
    modern_era_behind(BalancerKind::Haproxy, "replicas-haproxy-rr").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_era_behind_nginx_round_robin() {
    let _suite = crate::suite::enter(module_path!());
    modern_era_behind(BalancerKind::Nginx, "replicas-nginx-rr").await;
}

/// What a load of callers saw.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) ok: AtomicU64,
    pub(crate) failed: AtomicU64,
    /// The first failures: when each call started, and what went wrong.
    failures: Mutex<Vec<(Instant, String)>>,
}

impl Tally {
    pub(crate) fn record(&self, started: Instant, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => {
                self.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(why) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
                if failures.len() < 20 {
                    failures.push((started, why));
                }
            }
        }
    }

    pub(crate) fn failures(&self) -> Vec<(Instant, String)> {
        self.failures.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Set `stop`, wait for the `callers` to end, then the calls that went through and those
    /// that failed.
    pub(crate) async fn settle(
        &self,
        stop: &AtomicBool,
        callers: Vec<tokio::task::JoinHandle<()>>,
    ) -> (u64, u64) {
        stop.store(true, Ordering::Relaxed);
        for caller in callers {
            caller.await.expect("a caller panicked");
        }
        (
            self.ok.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}

/// 2026-07-28 callers that keep calling through the balancer until `stop`: short echoes and
/// calls running 2 s with progress (so calls are in flight on the replica that is stopping).
pub(crate) fn modern_load(
    url: String,
    callers: u64,
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..callers)
        .map(|caller| {
            let (url, tally, stop) = (url.clone(), tally.clone(), stop.clone());
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let id = caller * 1_000_000 + n;
                    let started = Instant::now();
                    let outcome = if caller % 2 == 0 {
                        let msg = format!("c{caller}-{n}");
                        match modern_call(&http, &url, id, ECHO, json!({"message": msg})).await {
                            Ok(r) if r["content"][0]["text"] == format!("Echo: {msg}") => Ok(()),
                            Ok(r) => Err(format!("echo {msg}: {r}")),
                            Err(e) => Err(format!("echo {msg}: {e}")),
                        }
                    } else {
                        let args = json!({"duration": 2, "steps": 2});
                        modern_call(&http, &url, id, LONG_TOOL, args)
                            .await
                            .map(drop)
                            .map_err(|e| format!("long call {id}: {e}"))
                    };
                    tally.record(started, outcome);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
        })
        .collect()
}

/// Session-era hosts, one on each of `sessions`, that keep calling echo until `stop`, `pause`
/// apart.
pub(crate) fn session_load(
    sessions: Vec<RawSession>,
    pause: Duration,
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (sessions.into_iter().enumerate())
        .map(|(i, session)| {
            let (tally, stop) = (tally.clone(), stop.clone());
            tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let msg = format!("s{i}-{n}");
                    let started = Instant::now();
                    tally.record(started, session_echo(&session, n, &msg).await);
                    tokio::time::sleep(pause).await;
                }
            })
        })
        .collect()
}

/// Rolling restart: SIGTERM each replica in turn while 2026-07-28 callers keep calling through
/// `kind`, wait until it has drained and exited, start it again. No call fails.
async fn rolling_restart(kind: BalancerKind, tag: &str, gateway: &str) {
    let mut cluster = cluster(tag, kind, Spread::SessionHash, gateway).await;
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let callers = modern_load(cluster.url(), 4, tally.clone(), stop.clone());
    tokio::time::sleep(Duration::from_secs(2)).await;
    for i in 0..REPLICAS {
        cluster.sigterm(i);
        cluster.wait_balancer_sees(i, false).await;
        cluster.wait_exit(i).await;
        cluster.restart(i).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let (ok, failed) = tally.settle(&stop, callers).await;
    let failures = tally.failures();
    eprintln!("rolling restart behind {kind:?}: {ok} calls ok, {failed} failed");
    assert_eq!(failed, 0, "{ok} ok; failures: {failures:#?}{}", cluster.logs());
    assert!(ok > 20, "too few calls made it: {ok}");
}

/// Behind HAProxy (the deploy config: checks on `/readyz` every 1 s, down after 2; `retry-on
/// conn-failure 503`), replicas with the default settings: at SIGTERM the replica's readiness
/// flips and it keeps serving for the `[cluster]` default shutdown delay, then drains (its
/// calls in flight finish); a new request that still reaches it then is refused unrun with 503
/// and HAProxy sends it to another replica. (`rolling_restart::` runs the issue 25 balancer,
/// which retries no 503.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_restart_behind_haproxy_fails_no_modern_call() {
    let _suite = crate::suite::enter(module_path!());
    rolling_restart(BalancerKind::Haproxy, "replicas-rolling-haproxy", GATEWAY).await;
}

/// Behind nginx (no active checks): once the replica drains, it answers new requests 503
/// unrun and nginx passes them to the next replica (`proxy_next_upstream error http_503
/// non_idempotent`), as it does with the refused connections of a replica that is down. nginx
/// then leaves the replica alone for `fail_timeout` (5 s), also once it is back: with
/// `shutdown_delay_secs = 4` the next replica stops only after that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_restart_behind_nginx_fails_no_modern_call() {
    let _suite = crate::suite::enter(module_path!());
    rolling_restart(BalancerKind::Nginx, "replicas-rolling-nginx", DELAYED_STOP).await;
}

/// `kill -9` of one replica (and its stdio server) under 2026-07-28 load behind HAProxy: only
/// calls that were in flight at the kill fail, each with an answer or a closed stream (nothing
/// hangs); new calls reach the other replicas (a refused connection is retried elsewhere) at
/// once, before the health checks mark the dead replica down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_under_modern_load_fails_only_the_calls_in_flight() {
    let _suite = crate::suite::enter(module_path!());
    let mut cluster = cluster(
        "replicas-kill9-modern",
        BalancerKind::Haproxy,
        Spread::SessionHash,
        GATEWAY,
    )
    .await;
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let callers = modern_load(cluster.url(), 4, tally.clone(), stop.clone());
    // One call surely in flight on the replica that dies: sent to it directly.
    let direct = cluster.replicas[1].url();
    let doomed = tokio::spawn(async move {
        let args = json!({"duration": 30, "steps": 30});
        modern_call(&reqwest::Client::new(), &direct, 1, LONG_TOOL, args).await
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    cluster.kill9(1);
    // Dead and reaped by now: a call that starts from here on was not in flight on it.
    let killed_at = Instant::now();
    let ended = tokio::time::timeout(Duration::from_secs(10), doomed)
        .await
        .expect("the call in flight on the killed replica hangs")
        .expect("the doomed call panicked");
    assert!(ended.is_err(), "a call on a killed replica succeeded: {ended:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ok_before_down = tally.ok.load(Ordering::Relaxed);
    cluster.wait_balancer_sees(1, false).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (ok, failed) = tally.settle(&stop, callers).await;
    let failures = tally.failures();
    eprintln!("kill -9 of one replica: {ok} calls ok, {failed} failed: {failures:?}");
    // At most one call per caller can be in flight on the replica at the kill.
    assert!(failed <= 4, "{failed} failed: {failures:#?}{}", cluster.logs());
    for (started, why) in &failures {
        assert!(
            *started < killed_at,
            "a call started after the kill failed: {why}"
        );
        assert!(!why.contains("no answer within"), "a call hung: {why}");
    }
    assert!(
        ok_before_down > 20 && ok > ok_before_down,
        "too few calls made it: {ok}"
    );
}

// ------------------------------------------------------------------------------------------
// Sessions across replicas (issue 16): forwarded to a live home, taken over from a dead one.

/// A session-era request that reaches a replica other than the one its session was opened on
/// (the balancer's ring changed, or plain round-robin) is served, without a new `initialize`:
/// that replica forwards it to the session's home.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_era_request_on_another_replica_is_served() {
    let _suite = crate::suite::enter(module_path!());
    let cluster = cluster(
        "replicas-other",
        BalancerKind::Haproxy,
        Spread::SessionHash,
        GATEWAY,
    )
    .await;
    let home = RawSession::open(&cluster.replicas[0].url(), json!({})).await;
    assert_eq!(
        home.tool_text(ECHO, json!({"message": "home"})).await,
        "Echo: home"
    );
    for other in &cluster.replicas[1..] {
        let elsewhere = home.at(&other.url());
        let reply = elsewhere
            .post(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": ECHO, "arguments": {"message": "elsewhere"}}}))
            .await;
        assert_eq!(reply.status().as_u16(), 200, "replica on port {}", other.port);
        let (tools, _) = elsewhere.list_all("tools/list", "tools").await;
        assert!(
            tools.len() > 9,
            "paging on another replica: {} tools",
            tools.len()
        );
    }
}

/// `kill -9` of a session's home replica: the session continues on another replica, without a
/// new `initialize`; only the call in flight on the dead replica fails, and cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_of_the_home_replica_keeps_its_sessions() {
    let _suite = crate::suite::enter(module_path!());
    let mut cluster = cluster(
        "replicas-kill9",
        BalancerKind::Haproxy,
        Spread::SessionHash,
        GATEWAY,
    )
    .await;
    let url = cluster.url();
    let session = RawSession::open(&url, json!({})).await;
    assert_eq!(
        session.tool_text(ECHO, json!({"message": "before"})).await,
        "Echo: before"
    );
    let counts = sessions_per_replica(&cluster).await;
    let home = counts
        .iter()
        .position(|&n| n == 1)
        .expect("the session's home replica");
    let long = json!({"name": LONG_TOOL, "arguments": {"duration": 30, "steps": 30}});
    let mut in_flight = session.stream(json!(99), "tools/call", long).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.kill9(home);
    // The call in flight on the dead replica ends (its stream closes), nothing hangs.
    let ended = message_with_id(&mut in_flight, &json!(99), Duration::from_secs(10))
        .await
        .expect("the stream of the call on the dead replica ended");
    assert!(ended.is_none_or(|m| m.get("error").is_some()));
    cluster.wait_balancer_sees(home, false).await;
    assert_eq!(
        session.tool_text(ECHO, json!({"message": "after"})).await,
        "Echo: after"
    );
}

/// One session-era echo through `s`: Ok, or what went wrong (never a panic).
pub(crate) async fn session_echo(s: &RawSession, id: u64, msg: &str) -> Result<(), String> {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": ECHO, "arguments": {"message": msg}}});
    let resp = s.post(body).await;
    if resp.status() != 200 {
        return Err(format!("{msg}: HTTP {}", resp.status()));
    }
    let mut rx = messages(resp);
    while let Ok(Some(reply)) = tokio::time::timeout(Duration::from_secs(30), rx.recv()).await {
        if reply["id"] == json!(id) {
            return match reply["result"]["content"][0]["text"] == format!("Echo: {msg}") {
                true => Ok(()),
                false => Err(format!("{msg}: {reply}")),
            };
        }
    }
    Err(format!("{msg}: no answer"))
}

/// Rolling restart with session-era clients: their sessions survive each replica's restart
/// (taken over by the replica the ring moves them to, then by the restarted replica when they
/// move back) and no call fails. The replicas keep serving for `shutdown_delay_secs` after
/// SIGTERM, until HAProxy's checks of `/readyz` have marked them down: echo calls drain at once,
/// and a replica that closes its keep-alive connections while HAProxy still sends on them makes
/// HAProxy close the host's connection unanswered (a POST is not retried).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_restart_behind_haproxy_fails_no_session_era_call() {
    let _suite = crate::suite::enter(module_path!());
    let mut cluster = cluster(
        "replicas-rolling-sessions",
        BalancerKind::Haproxy,
        Spread::SessionHash,
        DELAYED_STOP,
    )
    .await;
    let url = cluster.url();
    let mut sessions = Vec::new();
    for _ in 0..REPLICAS * 2 {
        sessions.push(RawSession::open(&url, json!({})).await);
    }
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let pause = Duration::from_millis(50);
    let callers = session_load(sessions, pause, tally.clone(), stop.clone());
    for i in 0..REPLICAS {
        cluster.sigterm(i);
        cluster.wait_balancer_sees(i, false).await;
        cluster.wait_exit(i).await;
        cluster.restart(i).await;
    }
    let (ok, failed) = tally.settle(&stop, callers).await;
    let failures = tally.failures();
    assert_eq!(failed, 0, "{ok} ok; failures: {failures:#?}{}", cluster.logs());
    assert!(ok > 20, "too few calls made it: {ok}");
}
