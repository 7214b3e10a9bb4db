//! A real `redis-server` (Debian's package, installed once per process by
//! `scripts/install-debian.sh`) for the shared store tests: its own port and folder, nothing
//! persisted (`--save ''`, `--appendonly no`), killed on drop or on demand (the store going down).

use super::{free_port, log_dir, scratch_dir, spawn_server, ChildGuard};
use std::process::Command;

/// A running `redis-server`.
pub struct Redis {
    pub port: u16,
    guard: Option<ChildGuard>,
}

/// Install redis-server and redis-cli (once per process).
pub fn install() {
    super::debian::packages(&["redis-server=redis-server,redis-cli"]);
}

impl Redis {
    /// Start one on a free port and wait until it listens.
    pub fn start() -> Redis {
        Redis::start_with(&[])
    }

    /// [`Redis::start`] with `args` added (`--requirepass PW`).
    pub fn start_with(args: &[&str]) -> Redis {
        install();
        let port = free_port();
        let dir = scratch_dir("redis");
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(args)
            .current_dir(&dir);
        let log = log_dir().join(format!("redis-{port}.log"));
        let guard = spawn_server(cmd, port, &log, "redis-server");
        Redis {
            port,
            guard: Some(guard),
        }
    }

    /// The URL `[cluster] store` names it by.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Kill it now: the store is down from here on.
    pub fn kill(&mut self) {
        if let Some(mut guard) = self.guard.take() {
            guard.kill();
        }
    }

    /// Every key with its value (strings; hashes' fields and values; sets' members), through
    /// `redis-cli` (with `password` when the server requires one).
    pub fn dump(&self, password: Option<&str>) -> String {
        let cli = |args: &[&str]| {
            let mut cmd = Command::new("redis-cli");
            if let Some(password) = password {
                cmd.env("REDISCLI_AUTH", password);
            }
            let out = cmd
                .args(["-p", &self.port.to_string(), "--raw"])
                .args(args)
                .output()
                .expect("run redis-cli");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let mut all = String::new();
        for key in cli(&["--scan"]).lines().filter(|k| !k.is_empty()) {
            let value = match cli(&["TYPE", key]).trim() {
                "hash" => cli(&["HGETALL", key]),
                "set" => cli(&["SMEMBERS", key]),
                _ => cli(&["GET", key]),
            };
            all.push_str(&format!("{key}\n{value}\n"));
        }
        all
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}
