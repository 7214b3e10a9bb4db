//! Interoperability, proven by a suite and clients nobody here wrote:
//!
//! * the official conformance suite's server side against mcpmux with each of the project's two
//!   conformance targets (TypeScript SDK, Python SDK) behind it (`namespace = ""`), once as a
//!   stdio upstream and once as a Streamable HTTP upstream, and against each target directly as
//!   the baseline (active and pending suites);
//! * the suite's client side with mcpmux as the client (`tests/conformance/client_wrapper.py`);
//! * a client matrix: the Python `mcp` SDK (legacy and auto mode), the TypeScript SDK and the MCP
//!   Inspector CLI against mcpmux fronting server-everything over stdio and over HTTP.
//!
//! It writes `docs/interop.md` from what it saw, then fails if anything failed.
//! Regenerate the document with: `cargo test --test interop`.

// The tests' support drives processes the Unix way (signals, process groups, waitid): on
// Windows this test crate is empty (docs/development.md, "Windows").
#![cfg(unix)]

mod support;

use std::time::Duration;
use support::conformance::{client_wrapper_command, run_client_scenario, run_server_suite, SuiteRun, Target};
use support::everything::check_everything;
use support::interop_report::{Cell, ConformanceColumn, Report};
use support::{
    boot_gateway, free_port, path_str, peers, run_client, run_py_client, run_ts_client, scratch_dir,
    start_everything_http, toml_list,
};

const CLIENT_SCENARIOS: [&str; 4] = [
    "initialize",
    "tools_call",
    "sse-retry",
    "elicitation-sep1034-client-defaults",
];
const INSPECTOR_TIMEOUT: Duration = Duration::from_secs(60);

/// Run blocking work (a child process) off the runtime that serves the in-process gateway.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f)
        .await
        .expect("blocking step panicked")
}

/// The suite's active and pending server scenarios against `url`.
async fn server_suites(url: String) -> (SuiteRun, SuiteRun) {
    let active_url = url.clone();
    let active = blocking(move || run_server_suite(&active_url, "active")).await;
    let pending = blocking(move || run_server_suite(&url, "pending")).await;
    (active, pending)
}

/// The suite's URL for a gateway: it must name localhost for the DNS-rebinding scenario.
fn localhost_url(gw: &mcpmux::Gateway) -> String {
    format!("http://localhost:{}/mcp", gw.local_addr().port())
}

/// The target directly, then behind mcpmux as a stdio and as an HTTP upstream.
async fn conformance_of(target: Target, labels: [&'static str; 3]) -> Vec<ConformanceColumn> {
    let mut columns = Vec::new();
    let port = free_port();
    let upstream = blocking(move || target.start_http(port)).await;
    let (active, pending) = server_suites(format!("http://localhost:{port}/mcp")).await;
    columns.push(ConformanceColumn::new(labels[0], active, pending));

    // The suite is a session-era one and the Python target's tools send session-era server
    // requests, which mcp 2.3.0 cannot send once it serves 2026-07-28: pin the session era.
    let (command, args) = target.stdio_cmd();
    let stdio = format!(
        "[servers.target]\ncommand = {command:?}\nargs = {}\nnamespace = \"\"\nera = \"session\"\n",
        toml_list(&args)
    );
    let http = format!(
        "[servers.target]\nurl = \"http://127.0.0.1:{port}/mcp\"\nnamespace = \"\"\nera = \"session\"\n"
    );
    for (servers, label) in [(stdio, labels[1]), (http, labels[2])] {
        let gw = boot_gateway(&servers, "").await;
        let (active, pending) = server_suites(localhost_url(&gw)).await;
        gw.stop().await;
        columns.push(ConformanceColumn::new(label, active, pending));
    }
    drop(upstream);
    columns
}

async fn client_side() -> Vec<(String, SuiteRun)> {
    let command = client_wrapper_command(env!("CARGO_BIN_EXE_mcpmux"));
    let mut out = Vec::new();
    for scenario in CLIENT_SCENARIOS {
        let command = command.clone();
        let run = blocking(move || run_client_scenario(&command, scenario)).await;
        out.push((scenario.to_string(), run));
    }
    out
}

/// `inspector --cli URL ARGS... --format json`, parsed.
fn inspector(url: &str, args: &[&str]) -> Result<serde_json::Value, String> {
    let p = peers();
    let home = scratch_dir("inspector-home");
    let mut cmd = std::process::Command::new(&p.node22);
    cmd.arg(&p.inspector_js)
        .args(["--cli", url])
        .args(args)
        .args(["--format", "json"])
        .env("HOME", &home);
    let run = run_client(cmd, INSPECTOR_TIMEOUT);
    if !run.exited_ok() {
        return Err(format!("inspector {args:?} failed:\n{run}"));
    }
    let start = run
        .stdout
        .find('{')
        .ok_or_else(|| format!("inspector {args:?}: no JSON:\n{run}"))?;
    serde_json::from_str(&run.stdout[start..]).map_err(|e| format!("inspector {args:?}: {e}:\n{run}"))
}

/// The inspector CLI lists tools, resources and prompts and calls echo through mcpmux.
fn inspector_cell(url: &str) -> Result<(), String> {
    let tools = inspector(url, &["--method", "tools/list"])?;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    if !names.contains(&"everything__echo") {
        return Err(format!("tools/list lacks everything__echo: {names:?}"));
    }
    let call = inspector(
        url,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "everything__echo",
            "--tool-arg",
            "message=interop",
        ],
    )?;
    let text = call["result"]["content"][0]["text"].as_str().unwrap_or_default();
    if text != "Echo: interop" {
        return Err(format!("tools/call echo answered {call}"));
    }
    let resources = inspector(url, &["--method", "resources/list"])?;
    let uri = resources["result"]["resources"][0]["uri"]
        .as_str()
        .unwrap_or_default();
    if !uri.starts_with("mcpmux://everything/") {
        return Err(format!(
            "resources/list: first URI {uri:?} not under mcpmux://everything/"
        ));
    }
    let prompts = inspector(url, &["--method", "prompts/list"])?;
    let listed = prompts["result"]["prompts"].to_string();
    if !listed.contains("everything__simple-prompt") {
        return Err(format!("prompts/list lacks everything__simple-prompt: {listed}"));
    }
    Ok(())
}

/// The four clients against one gateway fronting server-everything.
async fn matrix_row(transport: &'static str, gw: &mcpmux::Gateway) -> Vec<Cell> {
    let url = gw.url();
    let everything = [
        "--prefix",
        "everything__",
        "--resource-prefix",
        "mcpmux://everything/",
        "--no-roots",
    ];
    let mut cells = Vec::new();
    for mode in ["legacy", "auto"] {
        let url = url.clone();
        let run = blocking(move || {
            let mut args = vec!["--mode", mode];
            args.extend(everything);
            run_py_client(&url, "everything", &args)
        })
        .await;
        let client = format!("Python mcp 2.3.0 ({mode} mode)");
        cells.push(Cell::new(
            client,
            transport,
            "everything",
            check_everything(&run, "everything", false),
        ));
    }
    let ts_url = url.clone();
    let run = blocking(move || run_ts_client(&ts_url, "everything", &everything)).await;
    let result = check_everything(&run, "everything", false);
    cells.push(Cell::new(
        "TypeScript SDK 1.32.2".into(),
        transport,
        "everything",
        result,
    ));
    let result = blocking(move || inspector_cell(&url)).await;
    cells.push(Cell::new(
        "MCP Inspector 2.12.0 CLI".into(),
        transport,
        "list-and-call",
        result,
    ));
    cells
}

async fn client_matrix() -> Vec<Cell> {
    let (command, args) = peers().everything_stdio_cmd();
    let stdio = format!(
        "[servers.everything]\ncommand = {command:?}\nargs = {}\n",
        toml_list(&args)
    );
    let gw = boot_gateway(&stdio, "").await;
    let mut cells = matrix_row("stdio", &gw).await;
    gw.stop().await;

    let port = free_port();
    let upstream = blocking(move || start_everything_http(port)).await;
    let servers = format!("[servers.everything]\nurl = \"http://127.0.0.1:{port}/mcp\"\n");
    let gw = boot_gateway(&servers, "").await;
    cells.extend(matrix_row("Streamable HTTP", &gw).await);
    gw.stop().await;
    drop(upstream);
    cells
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interop_report() {
    blocking(|| {
        peers();
    })
    .await;
    let mut conformance = conformance_of(
        Target::TypeScript,
        [
            "TS target directly",
            "mcpmux, TS target over stdio",
            "mcpmux, TS target over HTTP",
        ],
    )
    .await;
    let python = [
        "Python target directly",
        "mcpmux, Python target over stdio",
        "mcpmux, Python target over HTTP",
    ];
    conformance.extend(conformance_of(Target::Python, python).await);
    let report = Report {
        conformance,
        client_side: client_side().await,
        matrix: client_matrix().await,
    };
    let path = support::repo_root().join("docs/interop.md");
    let text = report.render();
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    if old != text {
        std::fs::create_dir_all(path.parent().expect("docs dir")).expect("create docs/");
        std::fs::write(&path, &text).unwrap_or_else(|e| panic!("write {}: {e}", path_str(&path)));
        eprintln!("interop: rewrote {}", path.display());
    }
    let failures = report.failures();
    assert!(
        failures.is_empty(),
        "interop failures:\n{}",
        failures.join("\n\n")
    );
}
