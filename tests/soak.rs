//! Soak: 20 host sessions × 1,000 calls across three upstreams while one of them is killed
//! (SIGKILL) again and again. Invariants: every request gets exactly one response (a result or
//! an error) on its own stream, no reply is ever another request's, and afterwards the upstream
//! process count and the gateway's sessions are back to their baseline, with memory growth
//! printed and bounded.

// The tests' support drives processes the Unix way (signals, process groups, waitid): on
// Windows this test crate is empty (docs/development.md, "Windows").
#![cfg(unix)]

mod support;

use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::mcp::{recv, RawSession};
use support::*;

const SESSIONS: usize = 20;
const CALLS_PER_SESSION: usize = 1000;
const UPSTREAMS: [&str; 3] = ["steady", "calm", "victim"];
const KILL_EVERY: Duration = Duration::from_millis(700);

/// The test servers this process runs (the gateway runs in-process, so they are our children).
fn upstream_processes() -> Vec<u32> {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let Some((comm, rest)) = stat.split_once(") ") else {
                return false;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            comm.contains("mcpmux-test-se")
                && fields.first() != Some(&"Z")
                && fields.get(1) == Some(&me.as_str())
        })
        .collect()
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// One call; panics unless exactly one response for `id` arrives and it is this call's.
async fn checked_call(s: &RawSession, id: Value, upstream: &str, tag: &str) -> bool {
    let params = json!({"name": format!("{upstream}__echo"), "arguments": {"message": tag}});
    let mut rx = s.stream(id.clone(), "tools/call", params).await;
    let mut answers = Vec::new();
    while let Some(msg) = recv(&mut rx).await {
        if msg.get("result").is_some() || msg.get("error").is_some() {
            answers.push(msg);
        }
    }
    assert_eq!(answers.len(), 1, "{tag}: responses {answers:?}");
    let answer = &answers[0];
    assert_eq!(answer["id"], id, "{tag}: misrouted {answer}");
    if let Some(text) = answer["result"]["content"][0]["text"].as_str() {
        assert_eq!(text, format!("echo: {tag}"), "{tag}: someone else's reply");
        return true;
    }
    assert!(answer["error"]["code"].is_i64(), "{tag}: {answer}");
    assert_ne!(upstream, "steady", "{tag}: a healthy upstream failed: {answer}");
    assert_ne!(upstream, "calm", "{tag}: a healthy upstream failed: {answer}");
    false
}

async fn victim_pid(s: &RawSession) -> Option<i32> {
    let reply = s
        .call("tools/call", json!({"name": "victim__whoami", "arguments": {}}))
        .await;
    let text = reply["result"]["content"][0]["text"].as_str()?;
    serde_json::from_str::<Value>(text).ok()?["pid"]
        .as_i64()?
        .try_into()
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_sessions_thousand_calls_while_an_upstream_is_killed_again_and_again() {
    let servers: Vec<String> = UPSTREAMS.iter().map(|n| test_server_toml(n, &[], None)).collect();
    let gw = boot_gateway(&servers.join("\n"), "").await;
    let url = gw.url();

    // Warm up (every upstream answering, allocator, connection pools), then take the baselines.
    let warm = RawSession::open(&url, json!({})).await;
    for i in 0..201 {
        assert!(checked_call(&warm, json!(i), UPSTREAMS[i % 3], &format!("warm-{i}")).await);
    }
    let baseline_processes = upstream_processes().len();
    assert_eq!(baseline_processes, 3, "{:?}", upstream_processes());
    let rss_before = rss_kib();

    let stop_killing = Arc::new(AtomicBool::new(false));
    let kills = Arc::new(AtomicUsize::new(0));
    let killer = {
        let (stop, kills, url) = (stop_killing.clone(), kills.clone(), url.clone());
        tokio::spawn(async move {
            let s = RawSession::open(&url, json!({})).await;
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(KILL_EVERY).await;
                if let Some(pid) = victim_pid(&s).await {
                    // SAFETY: kill(2) on a pid we just read; no memory is involved.
                    if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
                        kills.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            s.delete().await;
        })
    };

    let started = Instant::now();
    let workers: Vec<_> = (0..SESSIONS)
        .map(|n| {
            let url = url.clone();
            tokio::spawn(async move {
                let s = RawSession::open(&url, json!({})).await;
                let mut ok = [0usize; 3];
                let mut failed = [0usize; 3];
                for i in 0..CALLS_PER_SESSION {
                    let which = (i + n) % 3;
                    // Ids repeat across sessions on purpose: each session's own space.
                    let id = if i % 2 == 0 {
                        json!(i)
                    } else {
                        json!(format!("r{i}"))
                    };
                    match checked_call(&s, id, UPSTREAMS[which], &format!("s{n}-{i}")).await {
                        true => ok[which] += 1,
                        false => failed[which] += 1,
                    }
                }
                assert_eq!(s.delete().await, 200);
                (ok, failed)
            })
        })
        .collect();
    let mut ok = [0usize; 3];
    let mut failed = [0usize; 3];
    for worker in workers {
        let (o, f) = worker.await.expect("a session task failed");
        for k in 0..3 {
            ok[k] += o[k];
            failed[k] += f[k];
        }
    }
    let elapsed = started.elapsed();
    stop_killing.store(true, Ordering::Relaxed);
    killer.await.expect("killer task");
    warm.delete().await;

    let total = SESSIONS * CALLS_PER_SESSION;
    assert_eq!(ok.iter().sum::<usize>() + failed.iter().sum::<usize>(), total);
    assert!(
        kills.load(Ordering::Relaxed) >= 3,
        "the victim was not killed often enough"
    );
    assert!(ok[2] > 0, "the victim never served between kills");

    // Back to baseline: the victim restarted, three upstream processes, no session left.
    let settled = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let text = reqwest::get(format!("http://{}/status", gw.local_addr()))
                .await
                .expect("status")
                .text()
                .await
                .unwrap_or_default();
            let status: Value = serde_json::from_str(&text).expect("status JSON");
            let ready = status["upstreams"]
                .as_array()
                .is_some_and(|u| u.iter().all(|u| u["phase"] == "ready"));
            if ready && status["sessions"] == 0 && upstream_processes().len() == baseline_processes {
                break status;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await;
    let status =
        settled.unwrap_or_else(|_| panic!("not back to baseline: processes {:?}", upstream_processes()));
    let rss_after = rss_kib();
    let growth_mib = rss_after.saturating_sub(rss_before) as f64 / 1024.0;
    println!(
        "soak: {total} calls in {:.1} s ({:.0} calls/s); ok {ok:?}, errors {failed:?} (steady, calm, victim); \
         {} kills; RSS {} -> {} KiB (+{growth_mib:.1} MiB); victim restarts {}",
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64(),
        kills.load(Ordering::Relaxed),
        rss_before,
        rss_after,
        status["upstreams"][2]["restarts"],
    );
    // Generous: a leak of even 1 KiB per call would be 20 MiB.
    assert!(growth_mib < 64.0, "memory grew by {growth_mib:.1} MiB");
    gw.stop().await;
}
