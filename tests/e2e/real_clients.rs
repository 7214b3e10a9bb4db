//! End-to-end tests with real MCP SDK clients (Python `mcp`, TypeScript SDK) talking to an
//! in-process mcpmux gateway in front of real upstream servers: server-everything over stdio and
//! over Streamable HTTP, and mcp-server-time over stdio.
//!
//! Each test starts its own gateway (and its own upstreams) and stops it gracefully at the end.

use crate::support::everything::{check_everything, str_list};
use crate::support::{
    boot_gateway, free_port, peers, run_py_client_async, run_ts_client_async, start_everything_http,
    toml_list, ChildGuard, ClientRun,
};
use serde_json::Value;

/// How an upstream is shared between host sessions.
#[derive(Clone, Copy)]
enum Iso {
    Shared,
    PerSession,
}

impl Iso {
    fn toml(self) -> &'static str {
        match self {
            Iso::Shared => "shared",
            Iso::PerSession => "per-session",
        }
    }
}

/// `[servers.NAME]` for server-everything over stdio.
fn everything_stdio(name: &str, iso: Iso) -> String {
    let (command, args) = peers().everything_stdio_cmd();
    format!(
        "[servers.{name}]\ncommand = {command:?}\nargs = {}\nisolation = {:?}\n\n",
        toml_list(&args),
        iso.toml()
    )
}

/// `[servers.NAME]` for a server-everything listening on Streamable HTTP at `port`.
fn everything_http(name: &str, port: u16, iso: Iso) -> String {
    format!(
        "[servers.{name}]\nurl = \"http://127.0.0.1:{port}/mcp\"\nisolation = {:?}\n\n",
        iso.toml()
    )
}

/// `[servers.NAME]` for mcp-server-time over stdio.
fn time_stdio(name: &str) -> String {
    let (python, args) = &peers().time_cmd;
    let python = python.to_str().expect("UTF-8 python path");
    format!(
        "[servers.{name}]\ncommand = {python:?}\nargs = {}\n\n",
        toml_list(args)
    )
}

/// Start the gateway in-process on an ephemeral port with these `[servers.*]` tables.
async fn start_gateway(servers: &str) -> mcpmux::Gateway {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    boot_gateway(servers, "").await
}

/// A server-everything over Streamable HTTP, started on the blocking pool (it waits for its port).
async fn spawn_everything_http() -> (u16, ChildGuard) {
    tokio::task::spawn_blocking(|| {
        let port = free_port();
        (port, start_everything_http(port))
    })
    .await
    .expect("start_everything_http panicked")
}

/// Install the peers on the blocking pool before anything else needs them.
async fn ensure_peers() {
    tokio::task::spawn_blocking(|| {
        peers();
    })
    .await
    .expect("peer installation panicked");
}

/// Arguments for the Python `everything` scenario against namespace `ns` (its tools prefixed
/// `{ns}__`, its resources read back through `mcpmux://{ns}/`).
fn py_everything_args(mode: &str, ns: &str) -> Vec<String> {
    let mut args = ["--mode", mode].map(String::from).to_vec();
    args.extend(ts_everything_args(ns));
    args
}

/// Arguments for the `everything` scenario of either client against namespace `ns`.
fn ts_everything_args(ns: &str) -> Vec<String> {
    vec![
        "--prefix".into(),
        format!("{ns}__"),
        "--resource-prefix".into(),
        format!("mcpmux://{ns}/"),
    ]
}

/// [`run_py_client_async`] with owned arguments (so several runs can be joined).
async fn py_owned(url: &str, scenario: &str, args: Vec<String>) -> ClientRun {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_py_client_async(url, scenario, &args).await
}

/// [`run_ts_client_async`] with owned arguments (so several runs can be joined).
async fn ts_owned(url: &str, scenario: &str, args: Vec<String>) -> ClientRun {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_ts_client_async(url, scenario, &args).await
}

/// Checks common to every `everything` scenario run (sampling, elicitation, progress, prompts,
/// resources and logging/setLevel all went through the gateway); `roots` also requires the
/// roots round trip.
#[track_caller]
fn assert_everything(run: &ClientRun, namespace: &str, roots: bool) {
    if let Err(why) = check_everything(run, namespace, roots) {
        panic!("{why}:\n{run}");
    }
}

// ---------------------------------------------------------------------------------------------

/// Python SDK (legacy and auto mode) against stdio everything, HTTP everything and stdio time:
/// tools of all three are listed under their namespaces and calls reach each upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_smoke_three_upstreams_legacy_and_auto() {
    let _suite = crate::suite::enter(module_path!());
    ensure_peers().await;
    let (port, _http) = spawn_everything_http().await;
    let servers = everything_stdio("everything", Iso::Shared)
        + &everything_http("everyhttp", port, Iso::Shared)
        + &time_stdio("time");
    let gw = start_gateway(&servers).await;
    let url = gw.url();

    for mode in ["legacy", "auto"] {
        let smoke = run_py_client_async(&url, "smoke", &["--mode", mode, "--prefix", "everything__"]).await;
        smoke.assert_ok();
        assert_eq!(smoke.json["server_name"], "mcpmux", "{smoke}");
        assert!(
            smoke.json["protocol_version"]
                .as_str()
                .is_some_and(|v| !v.is_empty()),
            "no negotiated protocol version:\n{smoke}"
        );
        let tools = str_list(&smoke.json["tools"]);
        for want in [
            "everything__echo",
            "everyhttp__echo",
            "time__get_current_time",
            "time__convert_time",
        ] {
            assert!(
                tools.contains(&want),
                "[{mode}] {want} not listed; tools: {tools:?}"
            );
        }
        assert!(
            tools.iter().all(|t| ["everything__", "everyhttp__", "time__"]
                .iter()
                .any(|p| t.starts_with(p))),
            "[{mode}] a tool without a namespace prefix: {tools:?}"
        );
        assert_eq!(smoke.json["echo_text"], "Echo: hi", "{smoke}");

        let msg_stdio = format!("via-stdio-{mode}");
        let msg_http = format!("via-http-{mode}");
        let calls = run_py_client_async(
            &url,
            "call",
            &[
                "--mode",
                mode,
                "time__get_current_time",
                r#"{"timezone": "UTC"}"#,
                "everything__echo",
                &format!(r#"{{"message": "{msg_stdio}"}}"#),
                "everyhttp__echo",
                &format!(r#"{{"message": "{msg_http}"}}"#),
            ],
        )
        .await;
        calls.assert_ok();
        let results = calls.json["calls"].as_array().cloned().unwrap_or_default();
        assert_eq!(results.len(), 3, "{calls}");

        let time_text = results[0]["text"].as_str().unwrap_or_default();
        let time: Value = serde_json::from_str(time_text)
            .unwrap_or_else(|e| panic!("[{mode}] get_current_time text is not JSON ({e}): {time_text:?}"));
        assert_eq!(time["timezone"], "UTC", "[{mode}] {time}");
        assert!(
            time["datetime"].as_str().is_some_and(|d| d.contains('T')),
            "[{mode}] no ISO datetime in {time}"
        );
        assert_eq!(results[1]["text"], format!("Echo: {msg_stdio}"), "{calls}");
        assert_eq!(results[2]["text"], format!("Echo: {msg_http}"), "{calls}");
    }
    gw.stop().await;
}

/// Where the `everything` scenario's server-everything runs.
#[derive(Clone, Copy)]
enum Upstream {
    /// stdio child of the gateway, namespace `everything`.
    Stdio,
    /// Streamable HTTP server on its own port, namespace `everyhttp`.
    Http,
}

/// Which SDK client drives the `everything` scenario.
#[derive(Clone, Copy)]
enum Sdk {
    /// Python, once in legacy and once in auto mode (concurrently).
    Python,
    TypeScript,
}

// Over HTTP these scenarios also guard the upstream handshake order (initialize, GET stream,
// `initialized` acknowledged, then requests): server-everything registers its sampling,
// elicitation and roots tools when it sees `initialized`, so a `tools/list` that overtook it would
// miss them.

/// Run the `everything` scenario, roots round trip included, through a gateway whose only
/// upstream is one server-everything with per-session isolation.
async fn everything_through(upstream: Upstream, sdk: Sdk) {
    ensure_peers().await;
    let iso = Iso::PerSession;
    let (ns, servers, _http) = match upstream {
        Upstream::Stdio => ("everything", everything_stdio("everything", iso), None),
        Upstream::Http => {
            let (port, guard) = spawn_everything_http().await;
            ("everyhttp", everything_http("everyhttp", port, iso), Some(guard))
        }
    };
    let gw = start_gateway(&servers).await;
    let url = gw.url();
    match sdk {
        Sdk::Python => {
            let (legacy, auto) = tokio::join!(
                py_owned(&url, "everything", py_everything_args("legacy", ns)),
                py_owned(&url, "everything", py_everything_args("auto", ns)),
            );
            assert_eq!(legacy.json["mode"], "legacy", "{legacy}");
            assert_everything(&legacy, ns, true);
            assert_eq!(auto.json["mode"], "auto", "{auto}");
            assert_everything(&auto, ns, true);
        }
        Sdk::TypeScript => {
            let run = ts_owned(&url, "everything", ts_everything_args(ns)).await;
            assert_everything(&run, ns, true);
        }
    }
    gw.stop().await;
}

/// Python `everything` scenario (legacy and auto) through a per-session stdio server-everything:
/// sampling, elicitation, roots and progress round trips all reach the right host session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_everything_per_session_stdio() {
    let _suite = crate::suite::enter(module_path!());
    everything_through(Upstream::Stdio, Sdk::Python).await;
}

/// Same through a per-session Streamable HTTP server-everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_everything_per_session_http() {
    let _suite = crate::suite::enter(module_path!());
    everything_through(Upstream::Http, Sdk::Python).await;
}

// With SHARED isolation (the default) the `everything` scenario of every client, over stdio and
// HTTP, is a cell of the interop matrix (tests/interop.rs).

/// TypeScript SDK client: smoke through per-session stdio and HTTP server-everything plus stdio
/// time, and the `everything` scenario through the per-session stdio one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_smoke_and_everything() {
    let _suite = crate::suite::enter(module_path!());
    ensure_peers().await;
    let (port, _http) = spawn_everything_http().await;
    let servers = everything_stdio("everything", Iso::PerSession)
        + &everything_http("everyhttp", port, Iso::PerSession)
        + &time_stdio("time");
    let gw = start_gateway(&servers).await;
    let url = gw.url();

    let (smoke_stdio, smoke_http, every_stdio) = tokio::join!(
        run_ts_client_async(&url, "smoke", &["--prefix", "everything__"]),
        run_ts_client_async(&url, "smoke", &["--prefix", "everyhttp__"]),
        ts_owned(&url, "everything", ts_everything_args("everything")),
    );
    for smoke in [&smoke_stdio, &smoke_http] {
        smoke.assert_ok();
        assert_eq!(smoke.json["server_name"], "mcpmux", "{smoke}");
        assert_eq!(smoke.json["echo_text"], "Echo: hi", "{smoke}");
        let tools = str_list(&smoke.json["tools"]);
        for want in ["everything__echo", "everyhttp__echo", "time__get_current_time"] {
            assert!(tools.contains(&want), "{want} not listed:\n{smoke}");
        }
    }
    assert_everything(&every_stdio, "everything", true);
    gw.stop().await;
}

/// TypeScript `everything` scenario through a per-session Streamable HTTP server-everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_everything_per_session_http() {
    let _suite = crate::suite::enter(module_path!());
    everything_through(Upstream::Http, Sdk::TypeScript).await;
}

/// 16 concurrent Python sessions through one SHARED stdio server-everything: every session's
/// JSON-RPC ids overlap with the others', yet each call gets its own echo back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sixteen_concurrent_sessions_shared_stdio() {
    let _suite = crate::suite::enter(module_path!());
    ensure_peers().await;
    let gw = start_gateway(&everything_stdio("everything", Iso::Shared)).await;
    let run = run_py_client_async(
        &gw.url(),
        "concurrent",
        &["16", "--mode", "legacy", "--prefix", "everything__"],
    )
    .await;
    run.assert_ok();
    assert_eq!(run.json["sessions"], 16, "{run}");
    assert_eq!(run.json["ok_calls"], 16 * 20, "{run}");
    gw.stop().await;
}
