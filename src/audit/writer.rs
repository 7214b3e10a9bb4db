//! The one writer of an audit log: a thread that owns the sink and the chain, fed by a bounded
//! queue. Lines are written in whole batches and flushed whenever the queue runs dry, so a reader
//! (`mcpmux audit verify` on a live file) sees only complete lines; a failed write is counted
//! and its lines leave the chain untouched (the next line links to the last one written).

use super::chain::Chain;
use super::record::Event;
use parking_lot::Mutex;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::Arc;

/// At most this many lines go out in one write.
const MAX_BATCH: usize = 256;

/// What the queue carries.
pub(super) enum Job {
    Line(Box<Event>),
    /// Answer once every line queued before this one is written (or failed).
    Flush(SyncSender<()>),
}

/// The counts `/status` reports.
#[derive(Default)]
pub(super) struct Counters {
    pub written: AtomicU64,
    pub dropped: AtomicU64,
    pub write_errors: AtomicU64,
    pub last_error: Mutex<Option<String>>,
    /// The chain's head: the last line written (its sequence number and hash).
    pub head: Mutex<Chain>,
}

impl Counters {
    pub(super) fn failed(&self, lines: u64, why: String) {
        self.write_errors.fetch_add(lines, Ordering::Relaxed);
        *self.last_error.lock() = Some(why);
    }
}

/// Start the writer thread on `sink`, continuing `chain`.
pub(super) fn spawn(
    sink: Box<dyn Write + Send>,
    chain: Chain,
    queue: usize,
    counters: Arc<Counters>,
) -> std::io::Result<SyncSender<Job>> {
    *counters.head.lock() = chain.clone();
    let (tx, rx) = std::sync::mpsc::sync_channel(queue);
    std::thread::Builder::new()
        .name("mcpmux-audit".into())
        .spawn(move || run(rx, sink, chain, &counters))?;
    Ok(tx)
}

fn run(rx: Receiver<Job>, mut sink: Box<dyn Write + Send>, mut chain: Chain, counters: &Counters) {
    let mut batch = Vec::with_capacity(64 * 1024);
    while let Ok(first) = rx.recv() {
        let mut next = chain.clone();
        let mut lines = 0u64;
        let mut acks = Vec::new();
        batch.clear();
        let mut job = Some(first);
        while let Some(current) = job.take() {
            match current {
                Job::Line(event) => match next.next_line(&event) {
                    Ok(line) => {
                        batch.extend_from_slice(line.as_bytes());
                        batch.push(b'\n');
                        lines += 1;
                    }
                    Err(err) => counters.failed(1, format!("cannot serialise an audit line: {err}")),
                },
                Job::Flush(ack) => acks.push(ack),
            }
            if lines < MAX_BATCH as u64 {
                job = rx.try_recv().ok();
            }
        }
        if lines > 0 {
            match sink.write_all(&batch).and_then(|()| sink.flush()) {
                Ok(()) => {
                    *counters.head.lock() = next.clone();
                    chain = next;
                    counters.written.fetch_add(lines, Ordering::Relaxed);
                }
                Err(err) => {
                    tracing::error!(%err, lines, "cannot write to the audit log");
                    counters.failed(lines, err.to_string());
                }
            }
        }
        for ack in acks {
            let _ = ack.send(());
        }
    }
}
