//! The audit log (`[audit]`): one JSON line per gated decision and per completed call, get or
//! read, hash-chained so that an edited, removed or reordered line is found by
//! `mcpmux audit verify`. Anything may record; one writer thread owns the file. Recording never
//! blocks a call: a full queue or a failing write is counted and shown in `/status`.

pub mod chain;
pub mod record;
pub mod trace_id;
pub mod verify;
mod writer;

use crate::config::{AuditConfig, AuditSink};
use crate::status_doc::AuditStatus;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;
use writer::{Counters, Job};

pub use record::{Event, Kind, Principal};

/// A running audit log.
pub struct AuditLog {
    /// What `/status` names it by: the file's path, or `-` for stdout.
    path: String,
    queue: SyncSender<Job>,
    counters: Arc<Counters>,
}

impl AuditLog {
    /// Open the sink of `config` (a file is created, or appended to from its last line's chain)
    /// and start its writer.
    pub fn open(config: &AuditConfig) -> Result<Arc<AuditLog>, String> {
        let (path, sink, chain): (String, Box<dyn std::io::Write + Send>, _) = match &config.sink {
            AuditSink::Stdout => ("-".into(), Box::new(std::io::stdout()), chain::Chain::default()),
            AuditSink::File(path) => {
                let chain = chain::Chain::resume(path)?;
                let file =
                    open_append(path).map_err(|err| format!("cannot open {}: {err}", path.display()))?;
                (path.display().to_string(), Box::new(file), chain)
            }
        };
        Self::start(path, sink, chain, config.queue_size)
    }

    fn start(
        path: String,
        sink: Box<dyn std::io::Write + Send>,
        chain: chain::Chain,
        queue: usize,
    ) -> Result<Arc<AuditLog>, String> {
        let counters = Arc::new(Counters::default());
        let queue = writer::spawn(sink, chain, queue, counters.clone())
            .map_err(|err| format!("cannot start the audit writer: {err}"))?;
        Ok(Arc::new(AuditLog {
            path,
            queue,
            counters,
        }))
    }

    /// Queue one line; never waits. A full queue drops the line and counts it.
    pub fn record(&self, event: Event) {
        match self.queue.try_send(Job::Line(Box::new(event))) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                let dropped = self.counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                crate::telemetry::record::audit_dropped();
                if dropped.is_power_of_two() {
                    tracing::error!(dropped, "the audit queue is full: audit lines are being dropped");
                }
            }
            Err(TrySendError::Disconnected(_)) => {
                self.counters.failed(1, "the audit writer has stopped".into());
            }
        }
    }

    /// Wait (at most `timeout`, even when the writer is stuck in a write) until every line
    /// queued so far is written.
    pub async fn flush(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let (ack, done) = std::sync::mpsc::sync_channel(1);
        let mut job = Job::Flush(ack);
        loop {
            match self.queue.try_send(job) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) if std::time::Instant::now() < deadline => {
                    job = back;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(_) => return false,
            }
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let waited = tokio::task::spawn_blocking(move || done.recv_timeout(left).is_ok());
        waited.await.unwrap_or(false)
    }

    /// What `/status` reports of it.
    pub fn status(&self) -> AuditStatus {
        let head = self.counters.head.lock().clone();
        AuditStatus {
            last_seq: head.seq,
            last_hash: (head.seq > 0).then_some(head.prev),
            path: self.path.clone(),
            lines_written: self.counters.written.load(Ordering::Relaxed),
            dropped: self.counters.dropped.load(Ordering::Relaxed),
            write_errors: self.counters.write_errors.load(Ordering::Relaxed),
            last_error: self.counters.last_error.lock().clone(),
        }
    }
}

/// The file opened for appending; created readable by its owner only (it may hold arguments).
fn open_append(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    crate::util::private_files::owner_only(std::fs::OpenOptions::new().create(true).append(true)).open(path)
}

#[cfg(test)]
mod tests;
