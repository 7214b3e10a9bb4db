//! The real `mcpmux serve` binary as a child process: its config file in a scratch directory,
//! its log, readiness (the wanted tools listed), signals sent to it, and its exit.

use super::mcp::RawSession;
use super::{free_port, ChildGuard};
use serde_json::json;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Upper bound for the gateway to serve with every wanted tool listed.
pub const READY_TIMEOUT: Duration = Duration::from_secs(45);

/// A running `mcpmux serve`.
pub struct ServeProcess {
    pub guard: ChildGuard,
    pub port: u16,
    pub config: PathBuf,
    log_path: PathBuf,
}

impl ServeProcess {
    /// Write `dir/mcpmux.toml` (a `[gateway]` table listening on a free port, `gateway_extra`
    /// lines in it, then `servers`) and start `mcpmux serve --config <it>` in `cwd`, with
    /// `env` added to the test's environment.
    pub fn start(dir: &Path, gateway_extra: &str, servers: &str, cwd: &Path, env: &[(&str, &str)]) -> Self {
        Self::start_on(free_port(), dir, gateway_extra, servers, cwd, env)
    }

    /// [`ServeProcess::start`] listening on `port` (for a config that names the port itself,
    /// such as a `public_url`).
    pub fn start_on(
        port: u16,
        dir: &Path,
        gateway_extra: &str,
        servers: &str,
        cwd: &Path,
        env: &[(&str, &str)],
    ) -> Self {
        let text = format!("[gateway]\nlisten = \"127.0.0.1:{port}\"\n{gateway_extra}\n\n{servers}");
        Self::start_text(port, dir, &text, cwd, env)
    }

    /// Write `text` as `dir/mcpmux.toml` as it is (it must listen on `port`) and serve it, as
    /// [`ServeProcess::start`] does.
    pub fn start_text(port: u16, dir: &Path, text: &str, cwd: &Path, env: &[(&str, &str)]) -> Self {
        let config = dir.join("mcpmux.toml");
        assert_schema_accepts(text, env);
        fs::write(&config, text).unwrap_or_else(|e| panic!("write {}: {e}", config.display()));
        let log_path = dir.join("gateway.log");
        let log = fs::File::create(&log_path).expect("create gateway log");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpmux"));
        cmd.arg("serve")
            .arg("--config")
            .arg(&config)
            .current_dir(cwd)
            .env("RUST_LOG", "info,mcpmux=debug")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup log fd"))
            .stderr(log);
        // Not a group guard: reaping it must not kill anything the gateway itself failed to stop.
        let guard = ChildGuard::new(cmd.spawn().expect("spawn mcpmux"));
        ServeProcess {
            guard,
            port,
            config,
            log_path,
        }
    }

    /// The MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// What the gateway logged so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Wait until a session sees every tool of `want` listed; returns every tool name.
    pub async fn wait_tools(&mut self, want: &[&str]) -> Vec<String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut last = String::from("not tried");
        loop {
            if let Some(status) = self.guard.try_wait() {
                panic!("gateway exited early ({status}); log:\n{}", self.log());
            }
            if Instant::now() >= deadline {
                panic!(
                    "gateway not ready within {READY_TIMEOUT:?} (last: {last}); log:\n{}",
                    self.log()
                );
            }
            let opened = tokio::time::timeout(
                Duration::from_secs(10),
                RawSession::try_open(&self.url(), json!({}), "2025-11-25"),
            )
            .await;
            match opened {
                Ok(Ok(s)) => {
                    let (tools, _) = s.list_all("tools/list", "tools").await;
                    s.delete().await;
                    let names: Vec<String> = (tools.iter())
                        .filter_map(|t| t["name"].as_str().map(str::to_string))
                        .collect();
                    if want.iter().all(|w| names.iter().any(|n| n == w)) {
                        return names;
                    }
                    last = format!("tools so far: {names:?}");
                }
                Ok(Err(e)) => last = e,
                Err(_) => last = "initialize timed out".into(),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Wait until the gateway logged a reload of its config file as the file is now, with
    /// `outcome` in the line ("configuration reloaded" or "reload refused").
    pub async fn wait_reload(&self, outcome: &str) {
        let digest = mcpmux::reload::file_digest(&self.config).expect("the config file");
        let needle = format!("config_digest={digest}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !(self.log().lines()).any(|line| line.contains(&needle) && line.contains(outcome)) {
            assert!(
                Instant::now() < deadline,
                "no {outcome:?} for {needle}; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Wait (up to `within`) until the log has a line with every one of `wanted`; that line.
    pub async fn wait_log_line(&self, wanted: &[&str], within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let log = self.log();
            if let Some(line) = log.lines().find(|l| wanted.iter().all(|w| l.contains(w))) {
                return line.to_string();
            }
            assert!(
                Instant::now() < deadline,
                "no line with {wanted:?} within {within:?}; log:\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Send `signal` to the gateway.
    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: signalling our own, still unreaped child.
        let rc = unsafe { libc::kill(self.guard.pid() as i32, signal) };
        assert_eq!(rc, 0, "kill({}, {signal}) failed", self.guard.pid());
    }

    /// Wait for the gateway to exit within `timeout` (panics with its log if it does not).
    pub async fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.guard.try_wait() {
                return status;
            }
            if Instant::now() >= deadline {
                self.guard.kill();
                panic!("gateway still running after {timeout:?}; log:\n{}", self.log());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Panics when `text` loads (its `${VAR}`s from `env`, then the test's environment) but the
/// schema of `mcpmux config schema` refuses it: every configuration the end-to-end tests serve
/// checks the schema too.
fn assert_schema_accepts(text: &str, env: &[(&str, &str)]) {
    static VALIDATOR: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    let lookup = |var: &str| {
        (env.iter().find(|(k, _)| *k == var).map(|(_, v)| v.to_string())).or_else(|| std::env::var(var).ok())
    };
    if mcpmux::Config::from_toml_str(text, "mcpmux.toml", &lookup).is_err() {
        return;
    }
    let Ok(value) = toml::from_str::<toml::Value>(text) else {
        return;
    };
    let instance = serde_json::to_value(value).expect("TOML as JSON");
    let validator = VALIDATOR.get_or_init(|| {
        jsonschema::validator_for(&mcpmux::config::schema::schema()).expect("the schema compiles")
    });
    let errors: Vec<String> = validator.iter_errors(&instance).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "the schema refuses a configuration mcpmux serves: {errors:#?}\n{text}"
    );
}
