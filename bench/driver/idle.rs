//! The `idle` mode: open K sessions (initialize and `notifications/initialized`, no stream kept
//! open), hold them, and read the server's resident memory before and after from `/proc`.

use crate::client::{Endpoint, Session};
use crate::stats::{self, Tally};
use crate::Opts;
use futures_util::{stream, StreamExt};
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};

/// Resident set size of a process in bytes, from `/proc/PID/status` (`VmRSS`, in kB).
pub fn rss_bytes(pid: u32) -> Result<u64, String> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| format!("{path} has no VmRSS line"))
}

pub async fn run(opts: &Opts, endpoint: Endpoint) -> Result<(Map<String, Value>, Tally), String> {
    let mut report = Map::new();
    let mut tally = Tally::default();
    // One session first, waiting for the server if asked; it is part of the K.
    let t0 = Instant::now();
    let first = endpoint
        .open_when_up("mcpmux-bench-idle", Duration::from_secs(opts.wait_secs))
        .await?;
    tally.samples.push(t0.elapsed());
    let before = opts.rss_pid.map(rss_bytes).transpose()?;
    let started = Instant::now();
    let opened: Vec<(Result<Session, String>, Duration)> = stream::iter(1..opts.sessions)
        .map(|_| {
            let endpoint = endpoint.clone();
            async move {
                let t0 = Instant::now();
                let session = endpoint.open("mcpmux-bench-idle").await;
                (session, t0.elapsed())
            }
        })
        .buffer_unordered(opts.concurrency.max(1))
        .collect()
        .await;
    let open_wall = started.elapsed();
    let mut sessions = vec![first];
    for (i, (session, took)) in opened.into_iter().enumerate() {
        match session {
            Ok(s) => {
                tally.samples.push(took);
                sessions.push(s);
            }
            Err(e) => tally.error(format!("session {}: {e}", i + 1)),
        }
    }
    tokio::time::sleep(Duration::from_millis(opts.settle_ms)).await;
    report.insert("open_wall_s".into(), stats::num(open_wall.as_secs_f64()));
    report.insert("open_sessions".into(), json!(sessions.len()));
    if let (Some(pid), Some(before)) = (opts.rss_pid, before) {
        let after = rss_bytes(pid)?;
        // The first session was open before the baseline was read.
        let added = sessions.len().saturating_sub(1).max(1) as f64;
        let per = (after as f64 - before as f64) / added;
        report.insert("rss_before_bytes".into(), json!(before));
        report.insert("rss_after_bytes".into(), json!(after));
        report.insert("bytes_per_session".into(), json!(per.round()));
    }
    tokio::time::sleep(Duration::from_secs(opts.hold_secs)).await;
    let closed: Vec<Result<(), String>> = stream::iter(sessions)
        .map(Session::close)
        .buffer_unordered(opts.concurrency.max(1))
        .collect()
        .await;
    for e in closed.into_iter().filter_map(Result::err) {
        tally.error(e);
    }
    Ok((report, tally))
}
