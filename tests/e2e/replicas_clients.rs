//! Real clients of both eras through three `mcpmux serve` replicas behind plain round-robin
//! (HAProxy, and nginx for the full scenarios), where every request of a session may reach any
//! replica and is forwarded to the session's home: the Python mcp 2.3.0 client in the session
//! era and in 2026-07-28, the TypeScript SDK 1.32.2 client (session era only: it does not speak
//! 2026-07-28). Their full `everything` scenario with a cancellation round trip; then their
//! `soak` scenario (many sessions calling in a loop) under `kill -9` of one replica, where only
//! the calls running on it fail, and under a rolling restart, where none does.
//!
//! Each replica runs its own stdio server-everything and in-repo test server (`t__`: its
//! `cancellations` tool shows that a cancellation reached the upstream, and its `add_tool` makes
//! a `tools/list_changed` on the one replica it is called on).

use crate::support::cluster::{BalancerKind, Cluster, Spread};
use crate::support::everything::check_everything;
use crate::support::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const REPLICAS: usize = 3;
const MODERN: &str = "2026-07-28";
const ECHO: &str = "everything__echo";
const LONG_TOOL: &str = "everything__trigger-long-running-operation";
const ADD_TOOL: &str = "t__add_tool";
/// Small pages, so listing takes several requests (each may reach another replica).
const GATEWAY: &str = "page_size = 3\ndrain_timeout_secs = 15";
/// For the rolling restart: a replica keeps serving for a while after SIGTERM, until HAProxy's
/// checks of `/readyz` have marked it down (see `replicas.rs`).
const DELAYED_STOP: &str = "page_size = 3\ndrain_timeout_secs = 15\nshutdown_delay_secs = 4";
/// Sessions each soak client opens.
const SESSIONS: usize = 3;
/// How long the parked call of the `kill -9` test runs (s): every session has one in flight at
/// the kill, at least a few seconds from its end.
const PARK_SECS: u64 = 14;
/// A soak client's whole run may take this long (s).
const SOAK_TIMEOUT: u64 = 110;
/// A soak call that takes longer than this (s) counts as a hang.
const CALL_TIMEOUT: u64 = 20;

/// The tests of this file one at a time: each runs three replicas, a balancer and up to three
/// client processes, as much as 2 cores carry.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn servers() -> String {
    let js = tokio::task::spawn_blocking(|| peers().everything_js.clone())
        .await
        .expect("peer installation panicked");
    let t = test_server_toml(
        "t",
        &[
            "--tools",
            "0",
            "--resources",
            "0",
            "--prompts",
            "0",
            "--templates",
            "0",
        ],
        None,
    );
    format!(
        "[servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n\n{t}",
        path_str(&js)
    )
}

async fn cluster(tag: &str, kind: BalancerKind, gateway: &str) -> Cluster {
    let servers = servers().await;
    let want = [ECHO, LONG_TOOL, ADD_TOOL];
    Cluster::start(tag, REPLICAS, kind, Spread::RoundRobin, gateway, &servers, &want).await
}

/// Each replica's `/status` (`Value::Null` for one that does not answer).
async fn statuses(cluster: &Cluster) -> Vec<Value> {
    let mut docs = Vec::new();
    for r in &cluster.replicas {
        let doc = match reqwest::get(r.admin_url("/status")).await {
            Ok(resp) => (resp.text().await.ok())
                .and_then(|text| serde_json::from_str(&text).ok())
                .unwrap_or(Value::Null),
            Err(_) => Value::Null,
        };
        docs.push(doc);
    }
    docs
}

fn count(doc: &Value, key: &str) -> u64 {
    doc[key].as_u64().unwrap_or(0)
}

/// Session-era sessions with their GET stream open, over every replica that answers.
async fn get_streams_open(cluster: &Cluster) -> usize {
    (statuses(cluster).await.iter())
        .flat_map(|doc| doc["session_list"].as_array().cloned().unwrap_or_default())
        .filter(|s| s["get_stream"] == true)
        .count()
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

// ------------------------------------------------------------------------------------------
// Everything, behind round-robin.

/// `everything` with a cancellation round trip through `t__`, for each client of each era, one
/// after the other (two sessions with calls in flight on one replica's shared stdio
/// server-everything make its sampling request ambiguous).
async fn everything_behind_round_robin(kind: BalancerKind, tag: &str) {
    let _one = ONE_AT_A_TIME.lock().await;
    let cluster = cluster(tag, kind, GATEWAY).await;
    let url = cluster.url();
    let common = [
        "--prefix",
        "everything__",
        "--resource-prefix",
        "mcpmux://everything/",
        "--no-roots",
        "--cancel-prefix",
        "t__",
    ];
    let with_mode = |mode: &'static str| [&["--mode", mode][..], &common[..]].concat();
    let runs = [
        (
            "python, session era",
            run_py_client_async(&url, "everything", &with_mode("legacy")).await,
        ),
        (
            "typescript, session era",
            run_ts_client_async(&url, "everything", &common).await,
        ),
        (
            "python, 2026-07-28",
            run_py_client_async(&url, "everything", &with_mode(MODERN)).await,
        ),
    ];
    for (who, run) in &runs {
        // A 2026-07-28 host has no initialize, so no server info: the rest is checked below.
        let checked = match run.json["protocol_version"] == MODERN {
            true if run.success() => Ok(()),
            true => Err(format!("the client failed: {}", run.json["error"])),
            false => check_everything(run, "everything", false),
        };
        if let Err(why) = checked {
            panic!("{who}: {why}:\n{run}{}", cluster.logs());
        }
        assert_eq!(run.json["cancel_reached_upstream"], true, "{who}: {run}");
        assert_eq!(
            run.json["after_cancel_text"], "echo: after cancel",
            "{who}: {run}"
        );
    }
    assert_eq!(runs[0].1.json["protocol_version"], "2025-11-25", "{}", runs[0].1);
    assert_eq!(runs[1].1.json["protocol_version"], "2025-11-25", "{}", runs[1].1);
    // The 2026-07-28 host's sampling and elicitation were input-required round trips (the
    // upstream is of the session era); their retries reached whichever replica was next.
    let modern = &runs[2].1;
    assert_eq!(modern.json["protocol_version"], MODERN, "{modern}");
    assert!(modern.json["sampling_calls"].as_u64() >= Some(1), "{modern}");
    assert_eq!(modern.json["sampling_result_has_text"], true, "{modern}");
    assert_eq!(modern.json["elicitation_accepted"], true, "{modern}");
    let progress = modern.json["progress"].as_array().map_or(0, Vec::len);
    assert!(progress >= 3, "{modern}");
    assert!(modern.json["tools_count"].as_u64() > Some(9), "{modern}");
    assert!(modern.json["resource_text_len"].as_u64() > Some(0), "{modern}");
    if let Some(per_replica) = cluster.requests_per_replica() {
        assert!(
            per_replica.iter().all(|&n| n > 10),
            "round-robin left a replica (nearly) without requests: {per_replica:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_clients_of_both_eras_behind_haproxy_round_robin() {
    let _suite = crate::suite::enter(module_path!());
    everything_behind_round_robin(BalancerKind::Haproxy, "clients-rr-haproxy").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_clients_of_both_eras_behind_nginx_round_robin() {
    let _suite = crate::suite::enter(module_path!());
    everything_behind_round_robin(BalancerKind::Nginx, "clients-rr-nginx").await;
}

// ------------------------------------------------------------------------------------------
// Soak: many sessions of both eras calling in a loop.

/// The soak clients running: the Python client in the session era and in 2026-07-28 and the
/// TypeScript client, `SESSIONS` sessions each, until the stop file appears.
struct Load {
    dir: PathBuf,
    runs: Vec<(&'static str, tokio::task::JoinHandle<ClientRun>)>,
}

const CLIENTS: [&str; 3] = ["python-session", "python-modern", "typescript-session"];

impl Load {
    fn start(url: &str, dir: &Path) -> Load {
        std::fs::create_dir_all(dir).expect("load dir");
        let file = |name: &str| path_str(&dir.join(name));
        let runs = CLIENTS
            .iter()
            .map(|&who| {
                let mut args: Vec<String> = [
                    SESSIONS.to_string(),
                    "--prefix".into(),
                    "everything__".into(),
                    "--timeout".into(),
                    SOAK_TIMEOUT.to_string(),
                    "--stop-file".into(),
                    file("stop"),
                    "--park-file".into(),
                    file("park"),
                    "--parked-file".into(),
                    file(&format!("parked-{who}")),
                    "--park-secs".into(),
                    PARK_SECS.to_string(),
                    "--call-timeout".into(),
                    CALL_TIMEOUT.to_string(),
                ]
                .into();
                let url = url.to_string();
                let handle = tokio::task::spawn_blocking(move || {
                    let mut cmd = match who {
                        "typescript-session" => {
                            let mut cmd = std::process::Command::new("node");
                            cmd.arg(repo_root().join("tests/clients/ts_client.mjs"))
                                .env("MCPMUX_PEERS_NPM", &peers().npm_modules);
                            cmd
                        }
                        _ => {
                            let mut cmd = std::process::Command::new(&peers().python);
                            cmd.arg(repo_root().join("tests/clients/py_client.py"));
                            let mode = if who == "python-modern" { MODERN } else { "legacy" };
                            args.extend(["--mode".to_string(), mode.to_string()]);
                            cmd
                        }
                    };
                    cmd.arg(&url).arg("soak").args(&args);
                    run_client(cmd, Duration::from_secs(SOAK_TIMEOUT + 10))
                });
                (who, handle)
            })
            .collect();
        Load {
            dir: dir.to_path_buf(),
            runs,
        }
    }

    /// Ask every session for one long call and wait until each client reports that all its
    /// sessions have theirs running (their first progress arrived).
    async fn park(&self, cluster: &Cluster) {
        std::fs::write(self.dir.join("park"), "").expect("park file");
        let deadline = Instant::now() + Duration::from_secs(30);
        for who in CLIENTS {
            let parked = self.dir.join(format!("parked-{who}"));
            while !parked.exists() {
                assert!(
                    Instant::now() < deadline,
                    "{who}: not every session got its park call running{}",
                    cluster.logs()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    /// Stop the clients and collect what each saw; panics when one could not run.
    async fn stop(self, cluster: &Cluster) -> Vec<(&'static str, ClientRun)> {
        std::fs::write(self.dir.join("stop"), "").expect("stop file");
        let mut out = Vec::new();
        for (who, handle) in self.runs {
            let run = handle.await.expect("a soak client panicked");
            assert!(run.success(), "{who} could not run:\n{run}{}", cluster.logs());
            out.push((who, run));
        }
        out
    }
}

/// The sessions of every run (one JSON object each).
fn sessions(runs: &[(&'static str, ClientRun)]) -> Vec<(&'static str, Value)> {
    (runs.iter())
        .flat_map(|(who, run)| {
            let list = run.json["sessions"].as_array().cloned().unwrap_or_default();
            list.into_iter().map(move |s| (*who, s))
        })
        .collect()
}

/// Every failed call of every run: (client, failure).
fn failures(runs: &[(&'static str, ClientRun)]) -> Vec<(&'static str, Value)> {
    (runs.iter())
        .flat_map(|(who, run)| {
            let list = run.json["failures"].as_array().cloned().unwrap_or_default();
            list.into_iter().map(move |f| (*who, f))
        })
        .collect()
}

/// Every session continued without a new `initialize` (the session era: one `initialize`, one
/// session id; 2026-07-28: none), and each session-era session got a `tools/list_changed` after
/// `changed_at` (Unix seconds).
#[track_caller]
fn assert_sessions_kept(runs: &[(&'static str, ClientRun)], cluster: &Cluster, changed_at: f64) {
    let all = sessions(runs);
    assert_eq!(all.len(), CLIENTS.len() * SESSIONS, "{all:?}");
    for (who, s) in &all {
        let modern = *who == "python-modern";
        let (initializes, ids) = (count(s, "initializes"), count(s, "session_ids"));
        if modern {
            assert_eq!((initializes, ids), (0, 0), "{who}: {s}");
            assert_eq!(s["protocol_version"], MODERN, "{who}: {s}");
            continue;
        }
        assert_eq!(
            (initializes, ids),
            (1, 1),
            "{who}: a session re-initialized or changed its id: {s}{}",
            cluster.logs()
        );
        let times = s["list_changed_at"].as_array().cloned().unwrap_or_default();
        assert!(
            times.iter().any(|t| t.as_f64() > Some(changed_at)),
            "{who}: tools/list_changed did not reach the session: {s}{}",
            cluster.logs()
        );
    }
}

/// Wait until every session-era session of the load has its GET stream open again on a live
/// replica, then change the tool list of every live replica's test server (called on each
/// replica directly): each session's home notifies it. Returns when the changes began (Unix s).
async fn list_changed_on_every_replica(cluster: &Cluster, live: &[usize], tag: &str) -> f64 {
    let want = 2 * SESSIONS;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let open = get_streams_open(cluster).await;
        if open >= want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{open} of {want} GET streams open again{}",
            cluster.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let http = reqwest::Client::new();
    let changed_at = unix_now();
    for &i in live {
        let name = format!("{tag}_{i}");
        let url = cluster.replicas[i].url();
        let result = crate::replicas::modern_call(&http, &url, 1, ADD_TOOL, json!({"name": name}))
            .await
            .unwrap_or_else(|e| panic!("add_tool on replica {}: {e}{}", i + 1, cluster.logs()));
        assert_eq!(result["isError"], Value::Null, "{result}");
    }
    // Let the notifications (debounced) arrive before the clients stop.
    tokio::time::sleep(Duration::from_secs(2)).await;
    changed_at
}

/// `kill -9` of one replica while every session of both eras has one long call in flight (and
/// nothing else: no call starts or ends around the kill, so what was in flight on it is known
/// exactly from its `/status` just before). Exactly those calls fail, each cleanly (an error or
/// an ended stream, never a hang), all started before the kill; a call that another replica
/// ran and the killed one only relayed continues (the client resumes its stream, through a live
/// replica, from the call's home). Every session continues without re-initializing, its GET
/// stream reopens on a live replica, and `tools/list_changed` reaches every session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_under_real_clients_of_both_eras_fails_only_the_calls_on_the_killed_replica() {
    let _suite = crate::suite::enter(module_path!());
    let _one = ONE_AT_A_TIME.lock().await;
    let tag = "clients-kill9";
    let mut cluster = cluster(tag, BalancerKind::Haproxy, GATEWAY).await;
    let load = Load::start(&cluster.url(), &scratch_dir(tag).join("load"));
    tokio::time::sleep(Duration::from_secs(4)).await;
    load.park(&cluster).await;
    // Every session has exactly its park call in flight, for several seconds more.
    let docs = statuses(&cluster).await;
    let in_flight: Vec<u64> = docs.iter().map(|d| count(d, "calls_in_flight")).collect();
    let held: Vec<u64> = docs.iter().map(|d| count(d, "sessions")).collect();
    assert_eq!(
        in_flight.iter().sum::<u64>(),
        (CLIENTS.len() * SESSIONS) as u64,
        "not exactly one call per session in flight: {docs:#?}"
    );
    // The replica homing the most sessions, so its death moves some.
    let victim = (0..REPLICAS)
        .max_by_key(|&i| (held[i], in_flight[i]))
        .expect("a replica");
    assert!(held[victim] > 0, "no replica holds a session: {docs:#?}");
    cluster.kill9(victim);
    let killed_at = unix_now();
    let expected = in_flight[victim];
    let live: Vec<usize> = (0..REPLICAS).filter(|&i| i != victim).collect();
    let changed_at = list_changed_on_every_replica(&cluster, &live, "after_kill").await;
    // The park calls that survived have ended by now, and the load went on after them.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let runs = load.stop(&cluster).await;

    let failed = failures(&runs);
    eprintln!(
        "kill -9 of replica {} ({} sessions held, calls in flight per replica {in_flight:?}): \
         {} failures: {failed:#?}",
        victim + 1,
        held[victim],
        failed.len()
    );
    let summary = format!("failures: {failed:#?}\nsessions: {:#?}", sessions(&runs));
    for (who, f) in &failed {
        let started = f["started"].as_f64().unwrap_or(f64::MAX);
        assert!(
            started < killed_at,
            "{who}: a call that started after the kill failed: {f}\n{summary}"
        );
        let why = f["error"].as_str().unwrap_or_default();
        assert!(!why.starts_with("hang"), "{who}: a call hung: {f}\n{summary}");
    }
    assert_eq!(
        failed.len() as u64,
        expected,
        "{expected} calls were in flight on the killed replica; failures: {failed:#?}{}",
        cluster.logs()
    );
    assert_sessions_kept(&runs, &cluster, changed_at);
    for (who, run) in &runs {
        assert!(
            count(&run.json, "ok_calls") > 5,
            "{who}: too few calls made it: {run}"
        );
    }
}

/// Rolling restart (SIGTERM each replica in turn, wait until it has drained and exited, start it
/// again) under the soak load of both eras behind round-robin: no call fails, no session
/// re-initializes, and every session's GET stream is open again at the end and gets
/// `tools/list_changed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_restart_under_real_clients_of_both_eras_fails_no_call() {
    let _suite = crate::suite::enter(module_path!());
    let _one = ONE_AT_A_TIME.lock().await;
    let tag = "clients-rolling";
    let mut cluster = cluster(tag, BalancerKind::Haproxy, DELAYED_STOP).await;
    let load = Load::start(&cluster.url(), &scratch_dir(tag).join("load"));
    tokio::time::sleep(Duration::from_secs(3)).await;
    for i in 0..REPLICAS {
        cluster.sigterm(i);
        cluster.wait_balancer_sees(i, false).await;
        cluster.wait_exit(i).await;
        cluster.restart(i).await;
    }
    let all: Vec<usize> = (0..REPLICAS).collect();
    let changed_at = list_changed_on_every_replica(&cluster, &all, "after_restart").await;
    let runs = load.stop(&cluster).await;
    let failed = failures(&runs);
    assert!(
        failed.is_empty(),
        "{} calls failed in a rolling restart: {failed:#?}{}",
        failed.len(),
        cluster.logs()
    );
    assert_sessions_kept(&runs, &cluster, changed_at);
    for (who, run) in &runs {
        assert!(
            count(&run.json, "ok_calls") > 10,
            "{who}: too few calls made it: {run}"
        );
    }
}
