//! `[cluster] store` with three real `mcpmux serve` replicas and a real `redis-server`: a
//! `rate_limit` of 3/min lets exactly 3 of 9 calls through across the replicas (each counting
//! alone would let 9), and with Redis killed each replica counts alone again at once, warning
//! once per outage, counting the fallbacks in `/metrics` and saying so in `/status`. Grants put
//! through one process's vault are listed and removed by `mcpmux grants`/`logout --config` and a
//! running gateway alike, never in the clear in Redis, and fail closed with the store down.

use crate::support::prometheus::{samples, value};
use crate::support::redis::Redis;
use crate::support::serve::ServeProcess;
use crate::support::{free_port, run_client, scratch_dir, ClientRun};
use mcpmux::credentials::grant::{Grant, GrantKey};
use mcpmux::credentials::vault::Vault;
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
    let keys = redis.dump(None);
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

/// Run `mcpmux ARGS` off the runtime (an in-process gateway may be answering it).
async fn mcpmux(args: &[&str]) -> ClientRun {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mcpmux"));
        cmd.args(&args);
        run_client(cmd, Duration::from_secs(30))
    })
    .await
    .expect("mcpmux ran")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_live_in_the_store_for_every_process_and_fail_closed_without_it() {
    let _suite = crate::suite::enter(module_path!());
    const PASSWORD: &str = "pw-s3cret-4711";
    let mut redis = Redis::start_with(&["--requirepass", PASSWORD]);
    let port = redis.port;
    let dir = scratch_dir("shared-store-grants");
    let config_path = dir.join("mcpmux.toml");
    let text = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\n\n[cluster]\nkey = \"{CLUSTER_KEY}\"\n\
         store = \"redis://:{PASSWORD}@127.0.0.1:{port}/0\"\n"
    );
    std::fs::write(&config_path, text).expect("write config");
    let file = config_path.to_string_lossy().into_owned();
    let config = mcpmux::Config::load(&config_path).expect("config loads");
    let shown = format!("redis://:***@127.0.0.1:{port}/0");

    // A sign-in through one process (the library, as `mcpmux login` or a replica writes it).
    let vault = Vault::open(&config.vault).expect("vault opens");
    assert_eq!(vault.describe(), shown);
    let alice = GrantKey::new("alice", "github");
    let grant = Grant {
        access_token: "SECRET-alice-access".into(),
        token_type: "Bearer".into(),
        refresh_token: Some("SECRET-alice-refresh".into()),
        expires_at: Some(4_000_000_000),
        scope: Some("repo".into()),
        obtained_at: 1_700_000_000,
        token_endpoint: Some("https://as.example/token".into()),
        resource: None,
        client: None,
    };
    vault.put(&alice, &grant).await.expect("kept in the store");
    let dump = redis.dump(Some(PASSWORD));
    assert!(dump.contains("mcpmux:grant:"), "{dump}");
    assert!(!dump.contains("SECRET"), "a token in the clear in Redis:\n{dump}");

    // Another process (`grants --config`) and a running gateway (`/grants`) see it.
    let listed = mcpmux(&["grants", "--config", &file]).await;
    assert!(listed.exited_ok(), "{listed}");
    assert!(
        listed
            .stdout
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("alice")),
        "{listed}"
    );
    let gateway = mcpmux::start(config.clone()).await.expect("gateway starts");
    let url = format!("http://{}", gateway.local_addr());
    let remote = mcpmux(&["grants", "--url", &url]).await;
    assert_eq!(remote.stdout, listed.stdout, "{remote}");

    // Logout with the config removes it from the store: the gateway sees that.
    let out = mcpmux(&["logout", "github", "--principal", "alice", "--config", &file]).await;
    assert!(out.exited_ok(), "{out}");
    assert_eq!(vault.get(&alice).await.unwrap(), None);
    let empty = mcpmux(&["grants", "--url", &url]).await;
    assert!(empty.stdout.starts_with("no grants"), "{empty}");
    assert!(!config.vault.path.exists(), "no vault file was written");

    // The store down: the vault fails closed, naming the store without its password.
    vault.put(&alice, &grant).await.expect("kept again");
    redis.kill();
    let err = vault.get(&alice).await.expect_err("no fallback").to_string();
    assert!(err.contains(&format!("shared store {shown}")), "{err}");
    let down = mcpmux(&["grants", "--config", &file]).await;
    assert_eq!(down.status.code(), Some(2), "{down}");
    assert!(down.stderr.contains(&shown), "{down}");
    for run in [&listed, &remote, &out, &empty, &down] {
        let all = format!("{}{}", run.stdout, run.stderr);
        assert!(!all.contains("SECRET") && !all.contains(PASSWORD), "{run}");
    }
    assert!(!err.contains(PASSWORD), "{err}");
    gateway.stop().await;
}
