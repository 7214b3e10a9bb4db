//! Running the official MCP conformance suite (`@modelcontextprotocol/conformance`, node 22)
//! and the project's conformance target (`tests/conformance/target.mjs`), and reading results:
//! per scenario, the checks that passed, failed and warned (from the suite's `checks.json`).

use super::{path_str, peers, repo_root, run_client, scratch_dir, spawn_server, ChildGuard, ClientRun};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Hard limit for one suite run (a full server suite takes a few seconds).
pub const SUITE_TIMEOUT: Duration = Duration::from_secs(300);

/// One scenario's outcome: counts of SUCCESS, FAILURE and WARNING checks, and the failure texts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scenario {
    pub passed: usize,
    pub failed: usize,
    pub warnings: usize,
    pub problems: Vec<String>,
}

/// One run of the suite: its exit status, each scenario it reported, and its output.
#[derive(Debug)]
pub struct SuiteRun {
    pub run: ClientRun,
    pub scenarios: BTreeMap<String, Scenario>,
}

impl SuiteRun {
    /// The suite exited 0 and every scenario has at least one check and no failure.
    pub fn all_passed(&self) -> bool {
        self.run.exited_ok() && !self.scenarios.is_empty() && self.scenarios.values().all(|s| s.failed == 0)
    }

    pub fn totals(&self) -> (usize, usize, usize) {
        self.scenarios.values().fold((0, 0, 0), |(p, f, w), s| {
            (p + s.passed, f + s.failed, w + s.warnings)
        })
    }

    /// A one-line summary plus the problems, for assertion messages.
    pub fn describe(&self) -> String {
        let (p, f, w) = self.totals();
        let mut out = format!(
            "{} scenarios, {p} passed, {f} failed, {w} warnings, exit {}",
            self.scenarios.len(),
            self.run.status
        );
        for (name, s) in &self.scenarios {
            for problem in &s.problems {
                out.push_str(&format!("\n  {name}: {problem}"));
            }
        }
        if !self.all_passed() {
            let tail: String = self
                .run
                .stdout
                .chars()
                .rev()
                .take(6000)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            out.push_str(&format!(
                "\n--- suite output (tail) ---\n{tail}\n--- stderr ---\n{}",
                self.run.stderr
            ));
        }
        out
    }
}

/// Run the suite with `args`, its results saved to a scratch directory (`-o`) and read back;
/// `kind` is `server` or `client` (the results' directory prefix).
fn run_suite(kind: &str, args: &[&str]) -> SuiteRun {
    let p = peers();
    let out = scratch_dir(&format!("conformance-{kind}"));
    let mut cmd = Command::new(&p.node22);
    cmd.arg(&p.conformance_js)
        .arg(kind)
        .args(args)
        .arg("-o")
        .arg(&out);
    let run = run_client(cmd, SUITE_TIMEOUT);
    let prefix = if kind == "server" { "server-" } else { "" };
    SuiteRun {
        scenarios: read_results(&out, prefix),
        run,
    }
}

/// `conformance server --url URL --suite SUITE` (`active`, `all` or `pending`).
pub fn run_server_suite(url: &str, suite: &str) -> SuiteRun {
    run_suite("server", &["--url", url, "--suite", suite])
}

/// `conformance client --command COMMAND --scenario SCENARIO`: the suite starts its test server
/// and runs the command with the server's URL appended.
pub fn run_client_scenario(command: &str, scenario: &str) -> SuiteRun {
    run_suite("client", &["--command", command, "--scenario", scenario])
}

/// [`run_client_scenario`] giving the client `timeout` (the suite's default is 30 s; a sign-in
/// starts mcpmux and a Python host, on 2 shared cores).
pub fn run_client_scenario_within(command: &str, scenario: &str, timeout: Duration) -> SuiteRun {
    let ms = timeout.as_millis().to_string();
    run_suite(
        "client",
        &["--command", command, "--scenario", scenario, "--timeout", &ms],
    )
}

/// The suite writes `DIR/<prefix><scenario>-<timestamp>/checks.json` per scenario (a scenario
/// named `auth/x` in a subdirectory: `DIR/auth/x-<timestamp>`).
fn read_results(dir: &Path, prefix: &str) -> BTreeMap<String, Scenario> {
    let mut out = BTreeMap::new();
    read_results_into(dir, prefix, "", &mut out);
    out
}

fn read_results_into(dir: &Path, prefix: &str, group: &str, out: &mut BTreeMap<String, Scenario>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(scenario) = name.strip_prefix(prefix).and_then(strip_timestamp) else {
            if group.is_empty() && entry.path().is_dir() {
                read_results_into(&entry.path(), prefix, &format!("{name}/"), out);
            }
            continue;
        };
        let scenario = format!("{group}{scenario}");
        let checks = std::fs::read_to_string(entry.path().join("checks.json")).unwrap_or_default();
        let checks: Vec<serde_json::Value> = serde_json::from_str(&checks).unwrap_or_default();
        let mut result = Scenario::default();
        for check in &checks {
            let detail = || {
                let what = check["description"].as_str().unwrap_or("?");
                match check["errorMessage"].as_str() {
                    Some(msg) => format!("{what}: {msg}"),
                    None => what.to_string(),
                }
            };
            match check["status"].as_str() {
                Some("SUCCESS") => result.passed += 1,
                Some("FAILURE") => {
                    result.failed += 1;
                    result.problems.push(format!("FAILURE {}", detail()));
                }
                Some("WARNING") => {
                    result.warnings += 1;
                    result.problems.push(format!("WARNING {}", detail()));
                }
                _ => {}
            }
        }
        out.insert(scenario, result);
    }
}

/// `tools-list-2026-11-22T01-54-33-636Z` → `tools-list`.
fn strip_timestamp(name: &str) -> Option<&str> {
    let bytes = name.as_bytes();
    (0..name.len()).find_map(|i| {
        let rest = &bytes[i..];
        let is_stamp = rest.len() > 12
            && rest[0] == b'-'
            && rest[1..5].iter().all(u8::is_ascii_digit)
            && rest[5] == b'-'
            && rest.get(11) == Some(&b'T');
        is_stamp.then(|| &name[..i])
    })
}

/// The project's conformance targets: the same names and behaviours on two SDKs.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// `tests/conformance/target.mjs` on the TypeScript SDK (node 22).
    TypeScript,
    /// `tests/conformance/py_target.py` on the Python SDK (`mcp` 2.3.0).
    Python,
}

impl Target {
    fn command(self) -> (String, Vec<String>) {
        let p = peers();
        match self {
            Target::TypeScript => (
                path_str(&p.node22),
                vec![path_str(&repo_root().join("tests/conformance/target.mjs"))],
            ),
            Target::Python => (
                path_str(&p.python),
                vec![path_str(&repo_root().join("tests/conformance/py_target.py"))],
            ),
        }
    }

    /// `(program, args)` that serves the target over stdio.
    pub fn stdio_cmd(self) -> (String, Vec<String>) {
        let (program, mut args) = self.command();
        args.push("stdio".into());
        (program, args)
    }

    /// The target over Streamable HTTP at `http://127.0.0.1:PORT/mcp`.
    pub fn start_http(self, port: u16) -> ChildGuard {
        let (program, args) = self.command();
        let mut cmd = Command::new(program);
        cmd.args(args)
            .args(["http", &port.to_string()])
            .env("MCPMUX_PEERS_NPM", &peers().npm_modules);
        let log = scratch_dir("conformance-target").join("target.log");
        spawn_server(cmd, port, &log, "conformance target")
    }
}

/// The command the suite's client mode runs (the server URL is appended): the wrapper that
/// starts the mcpmux binary with that URL as its only upstream and drives it.
pub fn client_wrapper_command(mcpmux_bin: &str) -> String {
    script_command("client_wrapper.py", mcpmux_bin, &[])
}

/// How the auth harness has the user sign in: through the in-band flow (URL elicitation from
/// the gateway's authorize tool) or with `mcpmux login` before the gateway runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignIn {
    InBand,
    Cli,
}

/// The command for the suite's auth scenarios: `tests/conformance/auth_client.py`, which
/// configures mcpmux's `auth` for the scenario and signs in as `sign_in` says.
pub fn auth_client_command(mcpmux_bin: &str, sign_in: SignIn) -> String {
    let how = match sign_in {
        SignIn::InBand => "inband",
        SignIn::Cli => "cli",
    };
    script_command("auth_client.py", mcpmux_bin, &["--sign-in", how])
}

/// `python tests/conformance/SCRIPT --mcpmux BIN EXTRA...`, checked for spaces.
fn script_command(script: &str, mcpmux_bin: &str, extra: &[&str]) -> String {
    let p = peers();
    let wrapper = repo_root().join("tests/conformance").join(script);
    let mut parts = vec![
        path_str(&p.python),
        path_str(&wrapper),
        "--mcpmux".into(),
        mcpmux_bin.into(),
    ];
    parts.extend(extra.iter().map(|s| s.to_string()));
    assert!(
        parts.iter().all(|part| !part.contains(' ')),
        "the suite splits --command on spaces; these paths must not contain any: {parts:?}"
    );
    parts.join(" ")
}
