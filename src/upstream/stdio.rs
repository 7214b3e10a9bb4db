//! stdio upstreams: the child held with what it starts ([`super::process_tree`]: a process group
//! on Unix, a job object on Windows) with the environment of [`super::child_env`], newline
//! framing with a bounded line length, stderr into tracing (its last lines kept to say why a
//! child ended), and the staged stop (close stdin, then the tree's stop).

use super::connection::Inbound;
use super::parse_frame;
use super::process_tree::{contain, ProcessTree};
use super::startup::FirstOutput;
use crate::config::TransportConfig;
use crate::error::UpstreamError;
use crate::protocol::framing::{Frame, LineSplitter};
use parking_lot::Mutex;
use process_wrap::tokio::{TokioChildWrapper, TokioCommandWrap};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Frames waiting to be written to the child's stdin.
const WRITE_QUEUE: usize = 1024;
/// Longest stderr line kept in a log record.
const STDERR_LINE_MAX: usize = 8 * 1024;
/// The last stderr lines kept to explain a child's end, and their bound in bytes.
const STDERR_TAIL_LINES: usize = 5;
const STDERR_TAIL_BYTES: usize = 1024;
/// How long an ended child may take to be reaped and to finish writing stderr before its end
/// is described without them.
const EXIT_REPORT_WAIT: Duration = Duration::from_millis(1000);

/// A running child process speaking MCP on stdin/stdout.
pub struct StdioTransport {
    name: Arc<str>,
    writer: Option<mpsc::Sender<String>>,
    child: Box<dyn TokioChildWrapper>,
    tree: ProcessTree,
    /// The child's last stderr lines.
    stderr_tail: Arc<Mutex<StderrTail>>,
    /// The task logging stderr; it ends when the child's stderr closes.
    stderr_task: Option<tokio::task::JoinHandle<()>>,
    /// When the child first wrote on stdout (the opening's handshake timer starts there).
    first_output: FirstOutput,
}

impl StdioTransport {
    /// Spawn the configured command and start its reader, writer and stderr tasks.
    pub fn spawn(
        name: Arc<str>,
        transport: &TransportConfig,
        max_line: usize,
        inbound: mpsc::Sender<Inbound>,
    ) -> Result<Self, UpstreamError> {
        let TransportConfig::Stdio {
            command,
            args,
            env,
            cwd,
            inherit_env,
        } = transport
        else {
            return Err(UpstreamError::unavailable(name.to_string(), "not a stdio server"));
        };
        if let Some(dir) = cwd.as_deref().filter(|dir| !dir.is_dir()) {
            let reason = format!("working directory {} does not exist", dir.display());
            return Err(UpstreamError::unavailable(name.to_string(), reason));
        }
        let mut cmd = TokioCommandWrap::with_new(command, |c| {
            c.args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            if !inherit_env {
                c.env_clear().envs(super::child_env::minimal(std::env::vars_os()));
            }
            for (k, v) in env {
                c.env(k, v.expose());
            }
            if let Some(dir) = cwd {
                c.current_dir(dir);
            }
        });
        contain(&mut cmd);
        let mut child = cmd.spawn().map_err(|e| {
            UpstreamError::unavailable(name.to_string(), format!("cannot start `{command}`: {e}")).because(e)
        })?;
        let tree = ProcessTree::of(&*child);
        let pid = child.id().unwrap_or(0);
        tracing::info!(upstream = %name, command = %command, pid, "started stdio upstream");
        let closed =
            |what: &str| UpstreamError::unavailable(name.to_string(), format!("child has no {what}"));
        let stdin = child.stdin().take().ok_or_else(|| closed("stdin"))?;
        let stdout = child.stdout().take().ok_or_else(|| closed("stdout"))?;
        let stderr = child.stderr().take().ok_or_else(|| closed("stderr"))?;

        let (writer_tx, writer_rx) = mpsc::channel(WRITE_QUEUE);
        tokio::spawn(write_frames(name.clone(), stdin, writer_rx));
        let first_output = FirstOutput::default();
        let reader = read_frames(name.clone(), stdout, max_line, inbound, first_output.clone());
        tokio::spawn(reader);
        let stderr_tail = Arc::new(Mutex::new(StderrTail::default()));
        let stderr_task = tokio::spawn(log_stderr(name.clone(), stderr, stderr_tail.clone()));
        Ok(StdioTransport {
            name,
            writer: Some(writer_tx),
            child,
            tree,
            stderr_tail,
            stderr_task: Some(stderr_task),
            first_output,
        })
    }

    /// When the child first writes on stdout.
    pub fn first_output(&self) -> FirstOutput {
        self.first_output.clone()
    }

    /// Queue one frame for the child's stdin.
    pub fn send(&self, frame: String) -> Result<(), UpstreamError> {
        let Some(writer) = &self.writer else {
            return Err(UpstreamError::Closed {
                name: self.name.to_string(),
                reason: "stopping".into(),
            });
        };
        writer.try_send(frame).map_err(|err| match err {
            mpsc::error::TrySendError::Full(_) => UpstreamError::Overloaded {
                name: self.name.to_string(),
                reason: "stdin queue full".into(),
            },
            mpsc::error::TrySendError::Closed(_) => UpstreamError::Closed {
                name: self.name.to_string(),
                reason: "stdin closed".into(),
            },
        })
    }

    /// `reason` with what the child says of it: its exit status once it has exited and its last
    /// stderr lines. When `ended` (its output closed), the child gets a moment to be reaped and
    /// to finish writing stderr.
    pub async fn describe_end(&mut self, reason: String, ended: bool) -> String {
        let mut text = reason;
        let status = match self.child.try_wait() {
            Ok(Some(status)) => Some(status),
            _ if ended => {
                let wait = Box::into_pin(self.child.wait());
                tokio::time::timeout(EXIT_REPORT_WAIT, wait)
                    .await
                    .ok()
                    .and_then(Result::ok)
            }
            _ => None,
        };
        if let Some(status) = status {
            text.push_str(&format!("; process {status}"));
            if let Some(task) = self.stderr_task.as_mut() {
                if tokio::time::timeout(EXIT_REPORT_WAIT, task).await.is_ok() {
                    self.stderr_task = None;
                }
            }
        }
        if let Some(tail) = self.stderr_tail.lock().render() {
            text.push_str("; stderr: ");
            text.push_str(&tail);
        }
        text
    }

    /// Stop the child: close stdin, then the staged stop of its process tree.
    pub async fn stop(mut self) {
        self.writer.take();
        self.tree.stop(&self.name, &mut self.child).await;
    }
}

/// Frames queued together leave in one write of at most about this many bytes (one wake-up of
/// the child and one system call for what several sessions sent meanwhile).
const WRITE_BATCH_BYTES: usize = 64 * 1024;

async fn write_frames(
    name: Arc<str>,
    mut stdin: tokio::process::ChildStdin,
    mut frames: mpsc::Receiver<String>,
) {
    let mut batch = Vec::with_capacity(4096);
    while let Some(frame) = frames.recv().await {
        batch.clear();
        batch.extend_from_slice(frame.as_bytes());
        batch.push(b'\n');
        while batch.len() < WRITE_BATCH_BYTES {
            let Ok(frame) = frames.try_recv() else { break };
            batch.extend_from_slice(frame.as_bytes());
            batch.push(b'\n');
        }
        if let Err(err) = stdin.write_all(&batch).await {
            tracing::warn!(upstream = %name, %err, "writing to stdin failed");
            return;
        }
        if let Err(err) = stdin.flush().await {
            tracing::warn!(upstream = %name, %err, "flushing stdin failed");
            return;
        }
        if batch.capacity() > 4 * WRITE_BATCH_BYTES {
            // One huge frame does not keep its buffer for the connection's life.
            batch = Vec::with_capacity(4096);
        }
    }
}

async fn read_frames(
    name: Arc<str>,
    mut stdout: tokio::process::ChildStdout,
    max_line: usize,
    inbound: mpsc::Sender<Inbound>,
    first_output: FirstOutput,
) {
    let mut splitter = LineSplitter::new(max_line);
    let mut buf = vec![0u8; 64 * 1024];
    let mut frames = Vec::new();
    let reason = loop {
        let n = match stdout.read(&mut buf).await {
            Ok(0) => break "stdout closed".to_string(),
            Ok(n) => n,
            Err(err) => break format!("reading stdout failed: {err}"),
        };
        first_output.mark();
        splitter.push(&buf[..n], &mut frames);
        for frame in frames.drain(..) {
            match frame {
                Frame::Line(line) if line.iter().all(u8::is_ascii_whitespace) => {}
                Frame::Line(line) => {
                    let Ok(text) = std::str::from_utf8(&line) else {
                        tracing::warn!(upstream = %name, "skipping a stdout line that is not UTF-8");
                        continue;
                    };
                    if let Some(msg) = parse_frame(&name, text) {
                        if inbound.send(Inbound::Message { msg, via: None }).await.is_err() {
                            return;
                        }
                    }
                }
                Frame::Overlong { len, id } => {
                    tracing::warn!(upstream = %name, len, max_line, "skipping a stdout line longer than the limit");
                    // A reply too large to pass: its call fails now rather than at its timeout.
                    if let Some(upstream_id) = id {
                        let error = UpstreamError::Protocol {
                            name: name.to_string(),
                            detail: format!("its reply of {len} bytes is over max_line_bytes ({max_line})"),
                        };
                        if inbound
                            .send(Inbound::PostFailed { upstream_id, error })
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                }
            }
        }
    };
    let _ = inbound.send(Inbound::Closed(reason)).await;
}

/// The last few lines a child wrote to stderr, bounded in count and bytes.
#[derive(Debug, Default)]
struct StderrTail {
    lines: std::collections::VecDeque<String>,
}

impl StderrTail {
    fn push(&mut self, line: &str) {
        if self.lines.len() == STDERR_TAIL_LINES {
            self.lines.pop_front();
        }
        let mut end = line.len().min(STDERR_TAIL_BYTES);
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        self.lines.push_back(line[..end].to_string());
    }

    /// The lines joined with ` | `, the most recent kept whole within the byte bound.
    fn render(&self) -> Option<String> {
        let mut kept: Vec<&str> = Vec::new();
        let mut bytes = 0;
        for line in self.lines.iter().rev() {
            if bytes + line.len() > STDERR_TAIL_BYTES && !kept.is_empty() {
                break;
            }
            bytes += line.len() + 3;
            kept.push(line);
        }
        kept.reverse();
        (!kept.is_empty()).then(|| kept.join(" | "))
    }
}

async fn log_stderr(name: Arc<str>, stderr: tokio::process::ChildStderr, tail: Arc<Mutex<StderrTail>>) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(STDERR_LINE_MAX as u64)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end();
                if !text.is_empty() {
                    tracing::info!(target: "mcpmux::upstream::stderr", upstream = %name, "{text}");
                    tail.lock().push(text);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spawn_sh(script: &str) -> StdioTransport {
        let transport = TransportConfig::Stdio {
            command: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env: Vec::new(),
            cwd: None,
            inherit_env: false,
        };
        let (inbound, _) = mpsc::channel(8);
        StdioTransport::spawn("t".into(), &transport, 1024, inbound).expect("sh starts")
    }

    #[tokio::test]
    async fn a_missing_working_directory_is_named() {
        let transport = TransportConfig::Stdio {
            command: "sh".into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: Some("/nonexistent/mcpmux-test-dir".into()),
            inherit_env: false,
        };
        let (inbound, _) = mpsc::channel(8);
        let err = StdioTransport::spawn("t".into(), &transport, 1024, inbound)
            .err()
            .expect("no child without its directory");
        assert!(
            err.to_string()
                .ends_with("working directory /nonexistent/mcpmux-test-dir does not exist"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn an_ended_child_is_described_by_its_exit_status_and_last_stderr_lines() {
        let mut child = spawn_sh("for i in 1 2 3 4 5 6 7; do echo \"line $i\" >&2; done; exit 3");
        let text = child.describe_end("stdout closed".into(), true).await;
        assert_eq!(
            text,
            "stdout closed; process exit status: 3; stderr: line 3 | line 4 | line 5 | line 6 | line 7"
        );
    }

    #[test]
    fn the_stderr_tail_is_bounded_in_bytes() {
        let mut tail = StderrTail::default();
        assert_eq!(tail.render(), None);
        for _ in 0..STDERR_TAIL_LINES {
            tail.push(&"é".repeat(STDERR_TAIL_BYTES));
        }
        let text = tail.render().expect("lines");
        assert!(text.len() <= STDERR_TAIL_BYTES, "{}", text.len());
        assert!(!text.contains(" | "), "only the latest line fits");
    }
}
