//! A team behind `[auth]` signing in to an `oauth` upstream (issue 26): each principal gets its
//! own grant and its own upstream connection, sees its own upstream tools, and acts at the
//! upstream as itself (the fixture's resource server answers `whoami` with the `sub` of the token
//! it was sent). The real `mcpmux serve` binary, oidc-provider as the upstream's AS and the TS SDK
//! resource server (`tests/fixtures/upstream_idp.mjs`, `upstream_rs.mjs`), and as the members real
//! Python SDK hosts (`tests/conformance/auth_host.py`) presenting their API keys to mcpmux and
//! signing in at the upstream's AS in the test browser, one in each era.

use crate::support::mcp::RawSession;
use crate::support::serve::ServeProcess;
use crate::support::upstream_idp::{run_host_as, UpstreamIdp};
use crate::support::{path_str, scratch_dir, ClientRun};
use serde_json::Value;
use std::time::Duration;

const LONG_TTL: Duration = Duration::from_secs(600);
const WHOAMI: &str = "up__whoami";
const AUTHORIZE: &str = "up__authorize";
const ALICE_KEY: &str = "alice-key-0123456789abcdef";
const BOB_KEY: &str = "bob-key-0123456789abcdef0";
const CAROL_KEY: &str = "carol-key-0123456789abcdef";

fn links(run: &ClientRun) -> usize {
    run.json["links"].as_array().map_or(0, Vec::len)
}

fn whoami(run: &ClientRun) -> Option<&str> {
    run.json["texts"][WHOAMI].as_str()
}

/// A host presenting `key` calls `whoami` at `url` (in `mode`, signing in as `login` when
/// asked): it acted as `sub`, and was asked to sign in `asked` times.
async fn calls_as(
    url: &str,
    (mode, key, login): (&str, &str, &str),
    (sub, asked): (&str, usize),
    diag: &dyn Fn(&ClientRun) -> String,
) -> ClientRun {
    let run = run_host_as(url, (mode, Some(key)), login, &[(WHOAMI, "{}")]).await;
    assert!(run.exited_ok() && run.json["ok"] == true, "{}", diag(&run));
    assert_eq!(
        whoami(&run),
        Some(format!("sub={sub}").as_str()),
        "{}",
        diag(&run)
    );
    assert_eq!(
        links(&run),
        asked,
        "asked to sign in {} times: {}",
        links(&run),
        diag(&run)
    );
    run
}

/// The grant ids the audit log names for `whoami` calls of each of `names` (waiting, bounded,
/// for the asynchronous writer); one id per member, the same on all of that member's calls.
async fn grants_in_audit(path: &std::path::Path, names: &[&str]) -> Vec<String> {
    for _ in 0..100 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let of = |name: &str| -> Vec<String> {
            (lines.iter())
                .filter(|l| l["name"] == WHOAMI && l["principal"]["api_key"] == name)
                .filter_map(|l| l["grant"].as_str().map(str::to_string))
                .collect()
        };
        let found: Vec<Vec<String>> = names.iter().map(|n| of(n)).collect();
        if found.iter().all(|ids| !ids.is_empty()) {
            for ids in &found {
                assert!(
                    ids.iter().all(|id| *id == ids[0]),
                    "one member, several grants: {ids:?}"
                );
            }
            return found.into_iter().map(|ids| ids[0].clone()).collect();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "no audit line names the grant of each of {names:?}:\n{}",
        std::fs::read_to_string(path).unwrap_or_default()
    );
}

async fn status(gw: &ServeProcess, key: &str) -> Value {
    let url = format!("http://127.0.0.1:{}/status", gw.port);
    let response = reqwest::Client::new()
        .get(url)
        .bearer_auth(key)
        .send()
        .await
        .expect("GET /status");
    let body = response.text().await.expect("/status body");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("/status is not JSON ({e}): {body}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn each_member_signs_in_as_themselves_and_sees_only_their_own_upstream_identity() {
    let _suite = crate::suite::enter(module_path!());
    let idp = UpstreamIdp::start(LONG_TTL);
    let dir = scratch_dir("upstream-auth-team");
    let text = format!(
        "[auth]\n\
         [[auth.api_keys]]\nname = \"alice\"\nkey = \"{ALICE_KEY}\"\n\
         [[auth.api_keys]]\nname = \"bob\"\nkey = \"{BOB_KEY}\"\n\
         [[auth.api_keys]]\nname = \"carol\"\nkey = \"{CAROL_KEY}\"\n\n\
         [servers.up]\nurl = {:?}\nauth = {{ mode = \"oauth\" }}\n\n[vault]\npath = {:?}\n\n\
         [audit]\npath = {:?}\n",
        idp.resource,
        path_str(&dir.join("vault")),
        path_str(&dir.join("audit.jsonl")),
    );
    let gw = ServeProcess::start(&dir, "", &text, &dir, &[]);
    let diag = |run: &ClientRun| {
        format!(
            "{run}\n--- fixture ---\n{}\n--- gateway ---\n{}",
            idp.log(),
            gw.log()
        )
    };

    // Alice (session era) signs in in-band and calls as herself.
    let url = gw.url();
    let alice = calls_as(&url, ("legacy", ALICE_KEY, "alice"), ("alice", 1), &diag).await;
    // Bob (2026-07-28) does not inherit Alice's grant: he is asked, and acts as himself.
    let bob = calls_as(&url, ("2026-07-28", BOB_KEY, "bob"), ("bob", 1), &diag).await;
    // Each sees what the upstream lists to them (a tool of their own), never the other's.
    let tools = |run: &ClientRun| run.json["tools"].to_string();
    assert!(
        tools(&alice).contains("up__own_alice") && !tools(&alice).contains("own_bob"),
        "{}",
        diag(&alice)
    );
    assert!(
        tools(&bob).contains("up__own_bob") && !tools(&bob).contains("own_alice"),
        "{}",
        diag(&bob)
    );
    // Each grant outlives its host, and stays its principal's.
    calls_as(&url, ("2026-07-28", ALICE_KEY, "nobody"), ("alice", 0), &diag).await;

    // Carol has no grant: she sees only the authorize tool, never the others' tools.
    let carol = RawSession::open_as(&gw.url(), CAROL_KEY).await;
    let (tools, _) = carol.list_all("tools/list", "tools").await;
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, [AUTHORIZE], "{}", gw.log());

    let status = status(&gw, ALICE_KEY).await;
    let up = (status["upstreams"].as_array().into_iter().flatten())
        .find(|u| u["name"] == "up")
        .cloned()
        .unwrap_or_default();
    assert_eq!(up["grants"], 2, "{status:#}");
    assert_eq!(up["phase"], "ready", "{status:#}");
    // One connection of her or his own for Alice and for Bob; none for Carol, who has no grant.
    assert_eq!(up["isolation"], "per-principal", "{status:#}");
    assert_eq!(up["connections"], 2, "{status:#}");
    // The audit lines name the grant each call went with: each member's own (never a token).
    let grants = grants_in_audit(&dir.join("audit.jsonl"), &["alice", "bob"]).await;
    assert!(
        grants[0] != grants[1],
        "the same grant for two members: {grants:?}"
    );
}

/// Base64 of 32 bytes: the one `[cluster] key` of both replicas.
const CLUSTER_KEY: &str = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=";

/// Two replicas sharing a `[cluster] store`; the public origin (where the AS sends the browser
/// back, as a balancer would) is the second one's. Alice's host uses the first: the callback
/// lands on the second, which finds the sign-in the first started; then a host of hers on the
/// second calls as her without being asked.
#[tokio::test(flavor = "multi_thread")]
async fn a_member_signed_in_through_one_replica_calls_as_themselves_through_another() {
    let _suite = crate::suite::enter(module_path!());
    let redis = crate::support::redis::Redis::start();
    let idp = UpstreamIdp::start(LONG_TTL);
    let ports = [crate::support::free_port(), crate::support::free_port()];
    let replica = |i: usize| {
        let port = ports[i];
        let dir = scratch_dir(&format!("upstream-auth-replica-{i}"));
        let text = format!(
            "[gateway]\nlisten = \"127.0.0.1:{port}\"\npublic_url = \"http://127.0.0.1:{}/mcp\"\n\n\
             [cluster]\nkey = \"{CLUSTER_KEY}\"\nadvertise = \"http://127.0.0.1:{port}\"\nstore = \"{}\"\n\n\
             [auth]\n[[auth.api_keys]]\nname = \"alice\"\nkey = \"{ALICE_KEY}\"\n\n\
             [servers.up]\nurl = {:?}\nauth = {{ mode = \"oauth\" }}\n",
            ports[1],
            redis.url(),
            idp.resource,
        );
        ServeProcess::start_text(port, &dir, &text, &dir, &[])
    };
    let (a, b) = (replica(0), replica(1));
    let diag = |run: &ClientRun| {
        format!(
            "{run}\n--- A ---\n{}\n--- B ---\n{}\n--- fixture ---\n{}",
            a.log(),
            b.log(),
            idp.log()
        )
    };
    let first = calls_as(&a.url(), ("legacy", ALICE_KEY, "alice"), ("alice", 1), &diag).await;
    let landed = first.json["landed"].to_string();
    let callback = format!("200 http://127.0.0.1:{}/oauth/callback", ports[1]);
    assert!(landed.contains(&callback), "{landed}\n{}", diag(&first));
    // Replica B has never seen Alice: her grant is in the shared store, so she is not asked.
    calls_as(&b.url(), ("2026-07-28", ALICE_KEY, "nobody"), ("alice", 0), &diag).await;
    let dump = redis.dump(None);
    let tokens = idp.tokens().await;
    assert!(!tokens.is_empty() && dump.contains("mcpmux:grant:"), "{dump}");
    for token in &tokens {
        let secret = token.rsplit('.').next().unwrap_or(token);
        assert!(
            !dump.contains(secret),
            "a token the AS issued is in Redis in the clear"
        );
    }
}
