//! `[cluster] store` with three real `mcpmux serve` replicas and a real `redis-server`: a
//! `rate_limit` of 3/min lets exactly 3 of 9 calls through across the replicas (each counting
//! alone would let 9), and with Redis killed each replica counts alone again at once, warning
//! once per outage, counting the fallbacks in `/metrics` and saying so in `/status`.

use crate::support::prometheus::{samples, value};
use crate::support::redis::Redis;
use crate::support::serve::ServeProcess;
use crate::support::{free_port, scratch_dir};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const MODERN: &str = "2026-07-28";
const REPLICAS: usize = 3;
const KEY: &str = "alice-key-0123456789";
/// Base64 of 32 bytes: the one `[cluster] key` of every replica.
const CLUSTER_KEY: &str = "AwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwM=";

struct Replica {
    process: ServeProcess,
    admin_port: u16,
}

impl Replica {
    fn admin(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.admin_port)
    }
}

async fn start(redis: &Redis) -> Vec<Replica> {
    let servers = crate::replicas::everything_servers().await;
    let mut replicas = Vec::new();
    for i in 0..REPLICAS {
        let (port, admin_port) = (free_port(), free_port());
        let dir = scratch_dir(&format!("shared-store-{i}"));
        let text = format!(
            "[gateway]\nlisten = \"127.0.0.1:{port}\"\nadmin_listen = \"127.0.0.1:{admin_port}\"\n\n\
             {servers}\n\
             [cluster]\nkey = \"{CLUSTER_KEY}\"\nadvertise = \"http://127.0.0.1:{port}\"\n\
             store = \"{}\"\n\n\
             [auth]\n[[auth.api_keys]]\nname = \"alice\"\nkey = \"{KEY}\"\n\n\
             [[policy]]\nprincipals = [\"alice\"]\nallow = [\"everything__*\"]\nrate_limit = \"3/min\"\n",
            redis.url()
        );
        let process = ServeProcess::start_text(port, &dir, &text, &dir, &[]);
        replicas.push(Replica { process, admin_port });
    }
    for r in &replicas {
        wait_ready(r).await;
    }
    replicas
}

/// Until the replica's `/readyz` says its upstream is ready (bounded).
async fn wait_ready(r: &Replica) {
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        let ok = reqwest::get(r.admin("/readyz"))
            .await
            .is_ok_and(|resp| resp.status() == 200);
        if ok {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "replica not ready; log:\n{}",
            r.process.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One 2026-07-28 `tools/call` of `everything__echo` as alice: its HTTP status.
async fn echo(url: &str, id: usize) -> u16 {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "everything__echo", "arguments": {"message": "hi"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                  "io.modelcontextprotocol/clientCapabilities": {},
                  "io.modelcontextprotocol/clientInfo": {"name": "store-test", "version": "0"}}}});
    let resp = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "everything__echo")
        .bearer_auth(KEY)
        .body(body.to_string())
        .send()
        .await
        .expect("POST");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    if status == 200 {
        assert!(text.contains("Echo: hi"), "{text}");
    }
    status
}

/// `n` calls round-robin over the replicas: how many passed, how many were refused with 429.
async fn round_robin(replicas: &[Replica], n: usize, first_id: usize) -> (usize, usize) {
    let (mut passed, mut limited) = (0, 0);
    for i in 0..n {
        match echo(&replicas[i % replicas.len()].process.url(), first_id + i).await {
            200 => passed += 1,
            429 => limited += 1,
            other => panic!("call {i}: HTTP {other}"),
        }
    }
    (passed, limited)
}

async fn status(r: &Replica) -> Value {
    let text = reqwest::get(r.admin("/status"))
        .await
        .expect("GET /status")
        .text()
        .await
        .unwrap_or_default();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

async fn fallbacks(r: &Replica) -> f64 {
    let text = reqwest::get(r.admin("/metrics"))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .unwrap_or_default();
    let name = "mcpmux_shared_store_fallbacks_total";
    value(&samples(&text), name, &[("use", "rate_limit")], &[]).unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_share_one_rate_limit_and_count_alone_while_the_store_is_down() {
    let _suite = crate::suite::enter(module_path!());
    let mut redis = Redis::start();
    let replicas = start(&redis).await;

    // One bucket for all three: 3 of 9 pass (each replica counting alone let all 9 through).
    assert_eq!(round_robin(&replicas, 9, 1).await, (3, 6));
    for r in &replicas {
        let doc = status(r).await;
        assert_eq!(doc["shared_store"]["state"], "up", "{doc}");
        assert_eq!(doc["shared_store"]["url"], redis.url(), "{doc}");
        assert_eq!(fallbacks(r).await, 0.0);
    }
    let keys = redis.dump();
    assert!(keys.contains("mcpmux:rl:") && !keys.contains("alice"), "{keys}");

    // The store down: each replica's own buckets decide at once, 3 each.
    redis.kill();
    assert_eq!(round_robin(&replicas, 12, 100).await, (9, 3));
    for r in &replicas {
        let doc = status(r).await;
        assert_eq!(doc["shared_store"]["state"], "down", "{doc}");
        assert_eq!(fallbacks(r).await, 4.0, "every admission fell back");
        let log = r.process.log();
        let warnings = (log.lines())
            .filter(|l| l.contains("WARN") && l.contains("the shared store is down"))
            .count();
        assert_eq!(warnings, 1, "one warning per outage:\n{log}");
    }
}
