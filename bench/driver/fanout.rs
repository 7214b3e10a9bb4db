//! The `fanout` mode: K sessions each hold the standalone GET stream open; one more session calls
//! a trigger tool that makes an upstream change its tool list, and the driver times how long each
//! listener takes to receive `notifications/tools/list_changed` (first, median and last).

use crate::client::{self, Endpoint, Session};
use crate::stats::{self, Tally};
use crate::Opts;
use futures_util::{stream, StreamExt};
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

const LIST_CHANGED: &str = "notifications/tools/list_changed";
/// Quiet time before each round, so a late duplicate is not taken for the next round.
const QUIET: Duration = Duration::from_millis(300);

/// Read one GET stream and report every `list_changed` on it as (listener, when).
async fn read_stream(index: usize, resp: reqwest::Response, seen: mpsc::UnboundedSender<(usize, Instant)>) {
    let mut body = resp.bytes_stream();
    let mut decoder = client::stream_decoder();
    let mut events = Vec::new();
    while let Some(Ok(chunk)) = body.next().await {
        if decoder.push(&chunk, &mut events).is_err() {
            return;
        }
        let at = Instant::now();
        for msg in client::messages_in(&events) {
            if msg.get("method").and_then(Value::as_str) == Some(LIST_CHANGED)
                && seen.send((index, at)).is_err()
            {
                return;
            }
        }
        events.clear();
    }
}

/// One listener: a session with its GET stream open.
async fn open_listener(endpoint: Endpoint) -> Result<(Session, reqwest::Response), String> {
    let session = endpoint.open("mcpmux-bench-listener").await?;
    let resp = session.listen().await?;
    Ok((session, resp))
}

pub async fn run(opts: &Opts, endpoint: Endpoint) -> Result<(Map<String, Value>, Tally), String> {
    let work = crate::calls::Work::from_opts(opts, false)?;
    let crate::calls::Work::Call {
        tool,
        template,
        unique,
        ..
    } = work
    else {
        return Err("fanout needs a trigger tool".into());
    };
    let trigger = endpoint
        .open_when_up("mcpmux-bench-trigger", Duration::from_secs(opts.wait_secs))
        .await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut readers = JoinSet::new();
    let mut sessions = Vec::new();
    let mut tally = Tally::default();
    let opened: Vec<_> = stream::iter(0..opts.sessions)
        .map(|_| open_listener(endpoint.clone()))
        .buffer_unordered(opts.concurrency.max(1))
        .collect()
        .await;
    for (index, opened) in opened.into_iter().enumerate() {
        match opened {
            Ok((session, resp)) => {
                readers.spawn(read_stream(index, resp, tx.clone()));
                sessions.push(session);
            }
            Err(e) => tally.error(format!("listener {index}: {e}")),
        }
    }
    let listeners = sessions.len();
    let timeout = Duration::from_secs(opts.timeout_secs);
    let mut rounds = Vec::new();
    let mut lasts = Vec::new();
    for round in 0..opts.rounds.max(1) {
        tokio::time::sleep(QUIET).await;
        while rx.try_recv().is_ok() {}
        let mut args = template.clone();
        if !unique.is_empty() {
            let base = args.get(&unique).and_then(Value::as_str).unwrap_or("bench");
            let name = format!("{base}_{}_{round}", std::process::id());
            args.insert(unique.clone(), Value::String(name));
        }
        let params = json!({"name": tool, "arguments": args});
        let t0 = Instant::now();
        if let Err(e) = trigger.request(round as u64 + 1, "tools/call", &params).await {
            tally.error(format!("round {round}: trigger: {e}"));
            continue;
        }
        let trigger_ms = stats::ms(t0.elapsed());
        let mut got: Vec<Option<Instant>> = vec![None; opts.sessions];
        let mut received = 0;
        let deadline = tokio::time::Instant::now() + timeout;
        while received < listeners {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some((index, at))) => {
                    if let Some(slot @ None) = got.get_mut(index) {
                        *slot = Some(at);
                        received += 1;
                    }
                }
                Ok(None) | Err(_) => break,
            }
        }
        if received < listeners {
            tally.error(format!(
                "round {round}: {} of {listeners} listeners not notified within {timeout:?}",
                listeners - received
            ));
        }
        let delays: Vec<Duration> = got
            .iter()
            .flatten()
            .map(|at| at.saturating_duration_since(t0))
            .collect();
        let s = stats::summarize(&delays);
        tally.samples.extend(&delays);
        if s.n > 0 {
            lasts.push(s.max);
        }
        let first = delays.iter().min().map_or(f64::NAN, |d| stats::ms(*d));
        rounds.push(json!({
            "round": round, "notified": s.n, "trigger_ms": stats::num(trigger_ms),
            "first_ms": stats::num(first), "p50_ms": stats::num(s.p50), "last_ms": stats::num(s.max),
        }));
    }
    drop(tx);
    let closed: Vec<Result<(), String>> = stream::iter(sessions)
        .map(Session::close)
        .buffer_unordered(opts.concurrency.max(1))
        .collect()
        .await;
    for e in closed.into_iter().filter_map(Result::err) {
        tally.error(e);
    }
    let _ = trigger.close().await;
    readers.abort_all();
    let mut report = Map::new();
    report.insert("listeners".into(), json!(listeners));
    lasts.sort_by(f64::total_cmp);
    let median_last = lasts.get(lasts.len() / 2).copied().unwrap_or(f64::NAN);
    report.insert("last_ms_median".into(), stats::num(median_last));
    report.insert("rounds".into(), Value::Array(rounds));
    Ok((report, tally))
}
