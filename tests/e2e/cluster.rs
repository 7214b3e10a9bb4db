//! `[cluster]` sealing across replicas: two gateways in front of the same catalog (the test
//! server) started with the same `[cluster] key` page each other's cursors; a gateway with
//! another key, a forged or truncated cursor, a cursor of another list or another principal are
//! refused (-32602); a gateway with a new key and the old one in `previous_keys` opens cursors
//! sealed under the old one. mcpmux's `requestState` opens on any replica with the key, and is
//! refused when replayed by another principal, altered, truncated or taken to another key's
//! replica, and a retry reaching another replica is forwarded to the one holding its call.
//! `mcpmux keygen` prints a key `[cluster] key` accepts. A session-era session opened on one
//! gateway is served through another with the key (forwarded to its home) or taken over by a
//! replica whose key the home does not have yet, for its principal only.

use crate::support::mcp::RawSession;
use crate::support::*;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

const KEY_A: &str = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
const KEY_B: &str = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=";
/// Tools of the test server (22 fixed, 25 generated) in pages of this many.
const PAGE_SIZE: usize = 7;

/// A gateway in front of the test server with `[cluster]` as given (none for "").
async fn replica(cluster: &str) -> mcpmux::Gateway {
    let servers = format!("{}\n{cluster}", test_server_toml("t", &[], None));
    // In-process replicas with no balancer in front: nothing to wait for at stop.
    let gateway = format!("page_size = {PAGE_SIZE}\nshutdown_delay_secs = 0");
    boot_gateway(&servers, &gateway).await
}

fn cluster(key: &str, previous: &[&str]) -> String {
    let previous: Vec<String> = previous.iter().map(|k| k.to_string()).collect();
    format!(
        "[cluster]\nkey = {key:?}\nprevious_keys = {}\n",
        toml_list(&previous)
    )
}

/// One page of `method`: its items' names and its next cursor, or the whole reply when it is an
/// error.
async fn page(
    s: &RawSession,
    method: &str,
    field: &str,
    cursor: Option<&str>,
) -> Result<(Vec<String>, Option<String>), Value> {
    let params = match cursor {
        Some(c) => json!({ "cursor": c }),
        None => json!({}),
    };
    let reply = s.call(method, params).await;
    let Some(items) = reply["result"][field].as_array() else {
        return Err(reply);
    };
    let names = items
        .iter()
        .filter_map(|i| i["name"].as_str().map(str::to_string))
        .collect();
    Ok((names, reply["result"]["nextCursor"].as_str().map(str::to_string)))
}

/// The reply is the answer to a cursor this gateway did not issue: invalid params.
fn assert_invalid_cursor(reply: Result<(Vec<String>, Option<String>), Value>, what: &str) {
    match reply {
        Err(reply) => assert_eq!(reply["error"]["code"], -32602, "{what}: {reply}"),
        Ok((names, _)) => panic!("{what}: a page was served: {names:?}"),
    }
}

async fn tools_cursor(s: &RawSession) -> String {
    let (_, next) = page(s, "tools/list", "tools", None).await.expect("a first page");
    next.expect("more than one page")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_from_one_replica_pages_on_another_with_the_same_key() {
    let _suite = crate::suite::enter(module_path!());
    let (one, two) = (
        replica(&cluster(KEY_A, &[])).await,
        replica(&cluster(KEY_A, &[])).await,
    );
    let a = RawSession::open(&one.url(), json!({})).await;
    let b = RawSession::open(&two.url(), json!({})).await;
    let (everything, pages) = a.list_all("tools/list", "tools").await;
    let everything: Vec<String> = everything
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!((everything.len(), pages), (47, 47usize.div_ceil(PAGE_SIZE)));
    // Walk the list asking the two replicas in turn, each with the other's cursor.
    let mut walked = Vec::new();
    let mut cursor: Option<String> = None;
    for turn in 0.. {
        let on = if turn % 2 == 0 { &a } else { &b };
        let (names, next) = page(on, "tools/list", "tools", cursor.as_deref())
            .await
            .unwrap_or_else(|reply| panic!("page {turn}: {reply}"));
        walked.extend(names);
        match next {
            Some(next) => cursor = Some(next),
            None => break,
        }
        assert!(turn < 20, "too many pages");
    }
    assert_eq!(
        walked, everything,
        "the same list, in order, without gaps or repeats"
    );
    // A tools cursor does not page the prompts, on either replica.
    let cursor = tools_cursor(&a).await;
    assert_invalid_cursor(
        page(&b, "prompts/list", "prompts", Some(&cursor)).await,
        "tools cursor on prompts/list",
    );
    assert_invalid_cursor(
        page(&a, "prompts/list", "prompts", Some(&cursor)).await,
        "tools cursor on prompts/list",
    );
    one.stop().await;
    two.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_from_a_gateway_with_another_key_or_none_is_refused() {
    let _suite = crate::suite::enter(module_path!());
    let (one, other, alone) = (
        replica(&cluster(KEY_A, &[])).await,
        replica(&cluster(KEY_B, &[])).await,
        replica("").await,
    );
    let a = RawSession::open(&one.url(), json!({})).await;
    let b = RawSession::open(&other.url(), json!({})).await;
    let c = RawSession::open(&alone.url(), json!({})).await;
    let from_a = tools_cursor(&a).await;
    assert_invalid_cursor(
        page(&b, "tools/list", "tools", Some(&from_a)).await,
        "another key",
    );
    assert_invalid_cursor(
        page(&c, "tools/list", "tools", Some(&from_a)).await,
        "no [cluster]",
    );
    // Without [cluster] a gateway's cursors are its own: they page there and nowhere else.
    let from_c = tools_cursor(&c).await;
    assert!(page(&c, "tools/list", "tools", Some(&from_c)).await.is_ok());
    assert_invalid_cursor(
        page(&a, "tools/list", "tools", Some(&from_c)).await,
        "a lone gateway's cursor",
    );
    one.stop().await;
    other.stop().await;
    alone.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_truncated_and_plain_cursors_are_refused() {
    let _suite = crate::suite::enter(module_path!());
    let gw = replica(&cluster(KEY_A, &[])).await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    let cursor = tools_cursor(&s).await;
    assert!(page(&s, "tools/list", "tools", Some(&cursor)).await.is_ok());
    let bytes = URL_SAFE_NO_PAD.decode(&cursor).expect("a cursor is base64url");
    for at in [0, 5, 20, bytes.len() - 1] {
        let mut forged = bytes.clone();
        forged[at] ^= 0x04;
        let forged = URL_SAFE_NO_PAD.encode(forged);
        assert_invalid_cursor(
            page(&s, "tools/list", "tools", Some(&forged)).await,
            &format!("byte {at} flipped"),
        );
    }
    for cut in [1, 3, 16] {
        let truncated = URL_SAFE_NO_PAD.encode(&bytes[..bytes.len() - cut]);
        assert_invalid_cursor(
            page(&s, "tools/list", "tools", Some(&truncated)).await,
            &format!("{cut} bytes cut"),
        );
    }
    // The cursors of before sealing (a plain base64 offset) mean nothing now.
    let plain = URL_SAFE_NO_PAD.encode("mcpmux-page:7");
    assert_invalid_cursor(
        page(&s, "tools/list", "tools", Some(&plain)).await,
        "a plain offset",
    );
    assert_invalid_cursor(page(&s, "tools/list", "tools", Some("")).await, "empty");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_replica_opens_cursors_sealed_under_its_previous_key() {
    let _suite = crate::suite::enter(module_path!());
    let (old, rotated, new_only) = (
        replica(&cluster(KEY_A, &[])).await,
        replica(&cluster(KEY_B, &[KEY_A])).await,
        replica(&cluster(KEY_B, &[])).await,
    );
    let o = RawSession::open(&old.url(), json!({})).await;
    let r = RawSession::open(&rotated.url(), json!({})).await;
    let n = RawSession::open(&new_only.url(), json!({})).await;
    let from_old = tools_cursor(&o).await;
    let expected = page(&o, "tools/list", "tools", Some(&from_old))
        .await
        .expect("old pages its own");
    let (names, _) = page(&r, "tools/list", "tools", Some(&from_old))
        .await
        .expect("the rotated replica opens the old key's cursor");
    assert_eq!(names, expected.0);
    // The rotated replica seals with the new key only: a replica with just the new key pages
    // it, one with just the old key does not.
    let from_rotated = tools_cursor(&r).await;
    assert!(page(&n, "tools/list", "tools", Some(&from_rotated)).await.is_ok());
    assert_invalid_cursor(
        page(&o, "tools/list", "tools", Some(&from_rotated)).await,
        "new key on the old replica",
    );
    assert_invalid_cursor(
        page(&n, "tools/list", "tools", Some(&from_old)).await,
        "old key, dropped from previous_keys",
    );
    old.stop().await;
    rotated.stop().await;
    new_only.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principals_cursor_pages_only_its_own_list_on_any_replica() {
    let _suite = crate::suite::enter(module_path!());
    let auth = "[auth]\n\
        [[auth.api_keys]]\nname = \"alice\"\nkey = \"alice-key-0123456789\"\n\
        [[auth.api_keys]]\nname = \"bob\"\nkey = \"bob-key-0123456789\"\n\n\
        [[policy]]\nprincipals = [\"alice\", \"bob\"]\nallow = [\"t__*\"]\ndeny = [\"t__echo\"]\n";
    let with_policy = format!("{}{auth}", cluster(KEY_A, &[]));
    let (one, two) = (replica(&with_policy).await, replica(&with_policy).await);
    let alice_one = RawSession::open_as(&one.url(), "alice-key-0123456789").await;
    let alice_two = RawSession::open_as(&two.url(), "alice-key-0123456789").await;
    let bob_two = RawSession::open_as(&two.url(), "bob-key-0123456789").await;
    let cursor = tools_cursor(&alice_one).await;
    let (names, _) = page(&alice_two, "tools/list", "tools", Some(&cursor))
        .await
        .expect("alice's cursor on the other replica");
    assert_eq!(names.len(), PAGE_SIZE);
    assert_invalid_cursor(
        page(&bob_two, "tools/list", "tools", Some(&cursor)).await,
        "alice's cursor for bob",
    );
    one.stop().await;
    two.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keygen_prints_a_key_cluster_key_accepts() {
    let _suite = crate::suite::enter(module_path!());
    let keygen = || {
        let out = Command::new(env!("CARGO_BIN_EXE_mcpmux"))
            .arg("keygen")
            .output()
            .expect("mcpmux keygen runs");
        assert!(out.status.success(), "exit {:?}", out.status);
        String::from_utf8(out.stdout).expect("ASCII")
    };
    let (first, second) = (keygen(), keygen());
    assert!(first.ends_with('\n') && first.trim_end().len() == 44, "{first:?}");
    assert_ne!(first, second, "every key is new");
    let key = first.trim_end();
    let dir = scratch_dir("cluster-keygen");
    let check = |text: &str| {
        let path = dir.join("mcpmux.toml");
        std::fs::write(&path, text).expect("write the config");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpmux"));
        cmd.arg("check-config").arg("--config").arg(&path);
        run_client(cmd, Duration::from_secs(20))
    };
    let servers = test_server_toml("t", &[], None);
    let ok = check(&format!(
        "[cluster]\nkey = {key:?}\nprevious_keys = [{:?}]\n\n{servers}",
        second.trim_end()
    ));
    assert!(ok.exited_ok(), "check-config refuses a keygen key: {}", ok.stderr);
    // And a gateway started with it seals with it: its cursors page on another with the same key.
    let (one, two) = (
        replica(&cluster(key, &[])).await,
        replica(&cluster(key, &[])).await,
    );
    let cursor = tools_cursor(&RawSession::open(&one.url(), json!({})).await).await;
    let b = RawSession::open(&two.url(), json!({})).await;
    assert!(page(&b, "tools/list", "tools", Some(&cursor)).await.is_ok());
    one.stop().await;
    two.stop().await;
    // Anything else is refused at its line, without echoing it.
    let bad = check("[cluster]\nkey = \"not-a-key-but-a-secret\"\n");
    assert!(!bad.exited_ok());
    assert!(
        bad.stderr.contains("mcpmux.toml:2: cluster.key is not base64"),
        "{}",
        bad.stderr
    );
    assert!(!bad.stderr.contains("not-a-key-but-a-secret"), "{}", bad.stderr);
}

const MODERN: &str = "2026-07-28";

/// One modern (2026-07-28) `tools/call` of `tool` as the holder of `token`, declaring elicitation:
/// the HTTP status and the JSON-RPC reply.
async fn modern_call(url: &str, token: &str, tool: &str, extra: Value) -> (u16, Value) {
    let mut params = json!({
        "name": tool,
        "arguments": {"message": "who are you?"},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}
        }
    });
    if let (Some(params), Value::Object(extra)) = (params.as_object_mut(), extra) {
        params.extend(extra);
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    let resp = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(body.to_string())
        .send()
        .await
        .expect("POST");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    let reply = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .chain(std::iter::once(text.as_str()))
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .unwrap_or(Value::Null);
    (status, reply)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_state_opens_only_under_the_cluster_key_for_its_caller_unaltered() {
    let _suite = crate::suite::enter(module_path!());
    let auth = "[auth]\n\
        [[auth.api_keys]]\nname = \"alice\"\nkey = \"alice-key-0123456789\"\n\
        [[auth.api_keys]]\nname = \"bob\"\nkey = \"bob-key-0123456789\"\n";
    let (home, same_key, other_key) = (
        replica(&format!("{}{auth}", cluster(KEY_A, &[]))).await,
        replica(&format!("{}{auth}", cluster(KEY_A, &[]))).await,
        replica(&format!("{}{auth}", cluster(KEY_B, &[]))).await,
    );
    let alice = "alice-key-0123456789";
    let (status, asked) = modern_call(&home.url(), alice, "t__elicit", json!({})).await;
    assert_eq!(status, 200, "{asked}");
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"]
        .as_str()
        .expect("a requestState")
        .to_string();
    assert!(state.starts_with("mcpmux2."), "{state}");
    let key = (asked["result"]["inputRequests"].as_object())
        .and_then(|r| r.keys().next().cloned())
        .expect("an input request");
    let answer = json!({ key: {"action": "accept", "content": {"name": "alice"}} });
    let retry = |state: &str| json!({"requestState": state, "inputResponses": answer.clone()});
    let refused = |(status, reply): (u16, Value), what: &str| {
        assert_eq!(
            (status, reply["error"]["code"].clone()),
            (400, json!(-32602)),
            "{what}: {reply}"
        );
        reply["error"]["message"].as_str().unwrap_or_default().to_string()
    };
    // Replayed by another principal, altered, truncated, or on a replica with another key.
    let why = refused(
        modern_call(&home.url(), "bob-key-0123456789", "t__elicit", retry(&state)).await,
        "bob",
    );
    assert!(why.contains("another caller"), "{why}");
    let token = URL_SAFE_NO_PAD
        .decode(&state["mcpmux2.".len()..])
        .expect("base64url");
    let mut forged = token.clone();
    forged[30] ^= 1;
    let forged = format!("mcpmux2.{}", URL_SAFE_NO_PAD.encode(forged));
    refused(
        modern_call(&home.url(), alice, "t__elicit", retry(&forged)).await,
        "forged",
    );
    let truncated = format!("mcpmux2.{}", URL_SAFE_NO_PAD.encode(&token[..token.len() - 5]));
    refused(
        modern_call(&home.url(), alice, "t__elicit", retry(&truncated)).await,
        "truncated",
    );
    let why = refused(
        modern_call(&other_key.url(), alice, "t__elicit", retry(&state)).await,
        "other key",
    );
    assert!(why.contains("key this gateway does not hold"), "{why}");
    // A replica with the same key forwards the retry to the home, where the call is parked: it
    // completes there, whichever replica the retry reached.
    let (status, done) = modern_call(&same_key.url(), alice, "t__elicit", retry(&state)).await;
    assert_eq!(status, 200, "{done}");
    let text = done["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("alice"), "{done}");
    // Spent: the same state again, on its home, names a call that has finished.
    let why = refused(
        modern_call(&home.url(), alice, "t__elicit", retry(&state)).await,
        "spent",
    );
    assert!(why.contains("finished or expired"), "{why}");
    // A call parked on a replica that is gone is gone with it.
    let (_, asked) = modern_call(&home.url(), alice, "t__elicit", json!({})).await;
    let state = asked["result"]["requestState"]
        .as_str()
        .expect("a requestState")
        .to_string();
    let key = (asked["result"]["inputRequests"].as_object())
        .and_then(|r| r.keys().next().cloned())
        .expect("an input request");
    let answer = json!({ key: {"action": "accept", "content": {"name": "alice"}} });
    home.stop().await;
    let why = refused(
        modern_call(
            &same_key.url(),
            alice,
            "t__elicit",
            json!({"requestState": state, "inputResponses": answer}),
        )
        .await,
        "home gone",
    );
    assert!(why.contains("finished or expired"), "{why}");
    same_key.stop().await;
    other_key.stop().await;
}

/// A POST of `tools/call t__echo` on `s`'s session, sent as the holder of `token`: the HTTP
/// status.
async fn echo_status_as(s: &RawSession, token: &str) -> u16 {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "t__echo", "arguments": {"message": "theft"}}});
    reqwest::Client::new()
        .post(&s.url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-session-id", &s.sid)
        .header("mcp-protocol-version", &s.version)
        .body(body.to_string())
        .send()
        .await
        .expect("POST")
        .status()
        .as_u16()
}

/// A session opened on one gateway continues on another with the same key (its calls, its pages,
/// its GET stream; no new `initialize`), and a session ended stays gone; a gateway with another key, another principal, and a forged or truncated id get
/// 404, as for any unknown session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_continues_on_another_replica_with_the_key_for_its_principal_only() {
    let _suite = crate::suite::enter(module_path!());
    let auth = "[auth]\n\
        [[auth.api_keys]]\nname = \"alice\"\nkey = \"alice-key-0123456789\"\n\
        [[auth.api_keys]]\nname = \"bob\"\nkey = \"bob-key-0123456789\"\n";
    let (home, same_key, other_key, rotated) = (
        replica(&format!("{}{auth}", cluster(KEY_A, &[]))).await,
        replica(&format!("{}{auth}", cluster(KEY_A, &[]))).await,
        replica(&format!("{}{auth}", cluster(KEY_B, &[]))).await,
        replica(&format!("{}{auth}", cluster(KEY_B, &[KEY_A]))).await,
    );
    let (alice, bob) = ("alice-key-0123456789", "bob-key-0123456789");
    let session = RawSession::open_as(&home.url(), alice).await;
    assert!(
        session.sid.bytes().all(|b| (0x21..=0x7e).contains(&b)),
        "{}",
        session.sid
    );
    assert_eq!(
        session.tool_text("t__echo", json!({"message": "home"})).await,
        "echo: home"
    );
    let cursor = tools_cursor(&session).await;

    // Another replica with the key serves it (forwarded to its live home: `forwarding.rs`):
    // calls, a page from the home's cursor, and the standalone GET stream, all without a new
    // initialize.
    let moved = session.at(&same_key.url());
    assert_eq!(
        moved.tool_text("t__echo", json!({"message": "moved"})).await,
        "echo: moved"
    );
    let (names, _) = page(&moved, "tools/list", "tools", Some(&cursor))
        .await
        .expect("the home's cursor pages through the other replica");
    assert_eq!(names.len(), PAGE_SIZE);
    let stream = moved.get(None).await;
    assert_eq!(stream.status(), 200, "GET stream on the replica that took over");
    drop(stream);

    // Another principal with alice's session id: unknown, on the home and elsewhere.
    assert_eq!(echo_status_as(&session, bob).await, 404, "bob on the home");
    assert_eq!(echo_status_as(&moved, bob).await, 404, "bob on the other replica");
    let fresh = RawSession::open_as(&home.url(), alice).await.at(&same_key.url());
    assert_eq!(
        echo_status_as(&fresh, bob).await,
        404,
        "bob taking alice's session over"
    );
    // A gateway with another key: unknown.
    let elsewhere = session.at(&other_key.url());
    assert_eq!(echo_status_as(&elsewhere, alice).await, 404, "another key");
    // A forged or truncated id: unknown.
    let bytes = URL_SAFE_NO_PAD.decode(&session.sid).expect("base64url");
    let mut forged = bytes.clone();
    forged[24] ^= 1;
    let mut tampered = session.at(&same_key.url());
    tampered.sid = URL_SAFE_NO_PAD.encode(forged);
    assert_eq!(echo_status_as(&tampered, alice).await, 404, "forged");
    tampered.sid = URL_SAFE_NO_PAD.encode(&bytes[..bytes.len() - 4]);
    assert_eq!(echo_status_as(&tampered, alice).await, 404, "truncated");

    // A replica with a new key and the old one in previous_keys opens it too (the home, with
    // only the old key, cannot open its passport, so it serves the session itself).
    let rotated_view = session.at(&rotated.url());
    assert_eq!(
        rotated_view
            .tool_text("t__echo", json!({"message": "rotated"}))
            .await,
        "echo: rotated"
    );

    // Ended on the replica that took it over: gone there for good (not taken over again).
    assert_eq!(rotated_view.delete().await, 200);
    assert_eq!(echo_status_as(&rotated_view, alice).await, 404, "after DELETE");
    // Ended on its home, through another replica: gone everywhere.
    assert_eq!(moved.delete().await, 200);
    assert_eq!(echo_status_as(&session, alice).await, 404, "after DELETE at home");
    assert_eq!(
        echo_status_as(&moved, alice).await,
        404,
        "after DELETE, elsewhere"
    );
    home.stop().await;
    same_key.stop().await;
    other_key.stop().await;
    rotated.stop().await;
}
