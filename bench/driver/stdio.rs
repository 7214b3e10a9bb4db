//! The direct stdio path: a session is a child process spoken to in newline-delimited JSON-RPC
//! over its pipes (`stdio:COMMAND ARGS` as the driver's URL), for the baseline of a stdio upstream.

use serde_json::{json, Value};
use std::process::Stdio;
use std::time::Instant;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// One child process and its pipes.
pub struct StdioLink {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl StdioLink {
    /// Start `command` (split on whitespace; the first word is the program).
    pub fn spawn(command: &str) -> Result<Self, String> {
        let mut words = command.split_whitespace();
        let program = words.next().ok_or("stdio: no command given")?;
        let mut child = Command::new(program)
            .args(words)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("stdio: cannot start {program}: {e}"))?;
        let stdin = child.stdin.take().ok_or("stdio: no stdin pipe")?;
        let stdout = child.stdout.take().ok_or("stdio: no stdout pipe")?;
        Ok(StdioLink {
            child,
            stdin,
            stdout: BufReader::new(stdout).lines(),
        })
    }

    /// Write one message as a line.
    pub async fn send(&mut self, msg: &Value) -> Result<(), String> {
        let mut line = msg.to_string().into_bytes();
        line.push(b'\n');
        self.stdin
            .write_all(&line)
            .await
            .map_err(|e| format!("stdio: write: {e}"))
    }

    /// Send a request and read lines until the response with `id` (notifications, server
    /// requests and lines that are not JSON are skipped); the response and when its line was read.
    pub async fn request(
        &mut self,
        id: u64,
        method: &str,
        params: &Value,
    ) -> Result<(Value, Instant), String> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        loop {
            let line = self
                .stdout
                .next_line()
                .await
                .map_err(|e| format!("stdio: read: {e}"))?
                .ok_or("stdio: the server closed its stdout")?;
            let at = Instant::now();
            let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if msg.get("method").is_none() && msg.get("id").and_then(Value::as_u64) == Some(id) {
                return Ok((msg, at));
            }
        }
    }

    /// Close stdin (the server should exit), then make sure it has.
    pub async fn close(self) {
        let StdioLink { mut child, stdin, .. } = self;
        drop(stdin);
        let wait = tokio::time::timeout(std::time::Duration::from_secs(2), child.wait());
        if wait.await.is_err() {
            let _ = child.kill().await;
        }
    }
}
