//! End-to-end tests with real MCP SDK clients (Python `mcp`, TypeScript SDK) talking to an
//! in-process mcpmux gateway in front of real upstream servers: server-everything over stdio and
//! over Streamable HTTP, and mcp-server-time over stdio.
//!
//! Each test starts its own gateway (and its own upstreams) and stops it gracefully at the end.

mod support;

use serde_json::Value;
use support::{
    free_port, peers, run_py_client_async, run_ts_client_async, start_everything_http, ChildGuard, ClientRun,
};

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

fn toml_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

/// Start the gateway in-process on an ephemeral port with these `[servers.*]` tables.
async fn start_gateway(servers: &str) -> mcpmux::Gateway {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let text = format!("[gateway]\nlisten = \"127.0.0.1:0\"\n\n{servers}");
    let config = mcpmux::Config::from_toml_str(&text, "test.toml", &|k| std::env::var(k).ok())
        .unwrap_or_else(|e| panic!("test config rejected: {e}\n{text}"));
    mcpmux::start(config)
        .await
        .unwrap_or_else(|e| panic!("gateway did not start: {e}"))
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

fn str_list(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Checks common to every `everything` scenario run (sampling, elicitation, progress, prompts,
/// resources and logging/setLevel all went through the gateway); `roots` also requires the
/// roots round trip.
#[track_caller]
fn assert_everything(run: &ClientRun, namespace: &str, roots: bool) {
    run.assert_ok();
    let o = &run.json;
    assert_eq!(
        o["server_name"], "mcpmux",
        "server name seen by the client:\n{run}"
    );
    assert_eq!(o["set_level"], "ok", "logging/setLevel:\n{run}");
    assert!(
        o["sampling_calls"].as_u64().unwrap_or(0) >= 1,
        "no sampling request reached the client:\n{run}"
    );
    assert_eq!(
        o["sampling_result_has_text"], true,
        "sampled text not in the tool result:\n{run}"
    );
    assert!(
        o["elicitation_calls"].as_u64().unwrap_or(0) >= 1,
        "no elicitation request reached the client:\n{run}"
    );
    assert_eq!(
        o["elicitation_accepted"], true,
        "elicitation answer not seen by the upstream:\n{run}"
    );
    if roots {
        assert!(
            o["roots_calls"].as_u64().unwrap_or(0) >= 1,
            "no roots/list reached the client:\n{run}"
        );
        assert_eq!(
            o["roots_listed"], true,
            "the client's root not seen by the upstream:\n{run}"
        );
    }
    let progress = o["progress"].as_array().map(Vec::len).unwrap_or(0);
    assert!(
        progress >= 3,
        "expected >= 3 progress notifications, got {progress}:\n{run}"
    );
    assert!(
        str_list(&o["prompts"]).contains(&format!("{namespace}__simple-prompt").as_str()),
        "prompt not namespaced as expected:\n{run}"
    );
    let prefix = format!("mcpmux://{namespace}/");
    let listed = o["resource_uri"].as_str().unwrap_or_default();
    let read = o["resource_read_uri"].as_str().unwrap_or_default();
    assert!(
        read.starts_with(&prefix),
        "resource read back with URI {read:?}, expected prefix {prefix:?}:\n{run}"
    );
    assert_eq!(
        listed, read,
        "resources/read answered for a different URI than listed:\n{run}"
    );
    assert!(
        o["resource_text_len"].as_u64().unwrap_or(0) > 0,
        "resource read returned no text:\n{run}"
    );
}

// ---------------------------------------------------------------------------------------------

/// Python SDK (legacy and auto mode) against stdio everything, HTTP everything and stdio time:
/// tools of all three are listed under their namespaces and calls reach each upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_smoke_three_upstreams_legacy_and_auto() {
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

/// Python `everything` scenario (legacy and auto) through per-session upstreams, stdio and
/// HTTP: sampling, elicitation, roots and progress round trips all reach the right host session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_everything_scenario_per_session_stdio_and_http() {
    ensure_peers().await;
    let (port, _http) = spawn_everything_http().await;
    let servers = everything_stdio("everything", Iso::PerSession)
        + &everything_http("everyhttp", port, Iso::PerSession);
    let gw = start_gateway(&servers).await;
    let url = gw.url();

    let cases: Vec<(&str, &str)> = ["everything", "everyhttp"]
        .into_iter()
        .flat_map(|ns| ["legacy", "auto"].map(|mode| (ns, mode)))
        .collect();
    let runs =
        futures_util::future::join_all(
            cases.iter().map(|(ns, mode)| {
                let prefix = format!("{ns}__");
                let url = url.clone();
                async move {
                    run_py_client_async(&url, "everything", &["--mode", mode, "--prefix", &prefix]).await
                }
            }),
        )
        .await;
    for ((ns, mode), run) in cases.iter().zip(&runs) {
        assert_eq!(run.json["mode"], *mode, "{run}");
        assert_everything(run, ns, true);
    }
    gw.stop().await;
}

/// With SHARED upstreams the `everything` scenario works too, except roots: server-everything
/// asks for roots once per its own session, so they cannot follow each host session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_everything_scenario_shared_stdio_and_http_without_roots() {
    ensure_peers().await;
    let (port, _http) = spawn_everything_http().await;
    let servers =
        everything_stdio("everything", Iso::Shared) + &everything_http("everyhttp", port, Iso::Shared);
    let gw = start_gateway(&servers).await;
    let url = gw.url();

    let (stdio, http) = tokio::join!(
        run_py_client_async(
            &url,
            "everything",
            &["--mode", "legacy", "--prefix", "everything__", "--no-roots"]
        ),
        run_py_client_async(
            &url,
            "everything",
            &["--mode", "auto", "--prefix", "everyhttp__", "--no-roots"]
        ),
    );
    assert_everything(&stdio, "everything", false);
    assert_everything(&http, "everyhttp", false);
    gw.stop().await;
}

/// TypeScript SDK client: smoke and everything scenarios through per-session stdio and HTTP
/// server-everything plus stdio time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_smoke_and_everything() {
    ensure_peers().await;
    let (port, _http) = spawn_everything_http().await;
    let servers = everything_stdio("everything", Iso::PerSession)
        + &everything_http("everyhttp", port, Iso::PerSession)
        + &time_stdio("time");
    let gw = start_gateway(&servers).await;
    let url = gw.url();

    let (smoke_stdio, smoke_http, every_stdio, every_http) = tokio::join!(
        run_ts_client_async(&url, "smoke", &["--prefix", "everything__"]),
        run_ts_client_async(&url, "smoke", &["--prefix", "everyhttp__"]),
        run_ts_client_async(&url, "everything", &["--prefix", "everything__"]),
        run_ts_client_async(&url, "everything", &["--prefix", "everyhttp__"]),
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
    assert_everything(&every_http, "everyhttp", true);
    gw.stop().await;
}

/// 16 concurrent Python sessions through one SHARED stdio server-everything: every session's
/// JSON-RPC ids overlap with the others', yet each call gets its own echo back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sixteen_concurrent_sessions_shared_stdio() {
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
