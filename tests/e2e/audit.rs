//! The audit log (`[audit]`) of the real `mcpmux serve` in front of real server-everything, with
//! API-key principals: a line per gated decision (allowed, denied by a rule)
//! and per completed call, read or get (ok, `isError`, a JSON-RPC error), arguments only where a
//! rule asks for them, never a credential; `mcpmux audit verify` passes on the live file, finds an
//! edited, removed or reordered line, and a restart continues the chain. A sink that fails is
//! counted in `/status` while calls go on.

use crate::support::mcp::RawSession;
use crate::support::serve::ServeProcess;
use crate::support::*;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const ALICE_KEY: &str = "alice-audit-key-0123456789";
const BOT_KEY: &str = "bot-audit-key-0123456789";
/// The trace id alice's requests carry in their `traceparent`.
const ALICE_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// server-everything, two API-key principals, two rules (alice's records arguments), and
/// `[audit]` at `audit_path`.
fn servers(audit_path: &str) -> String {
    let (cmd, args) = peers().everything_stdio_cmd();
    format!(
        "[servers.everything]\ncommand = {cmd:?}\nargs = {}\n\n\
         [auth]\n\
         [[auth.api_keys]]\nname = \"alice\"\nkey = \"{ALICE_KEY}\"\ngroups = [\"eng\"]\n\
         [[auth.api_keys]]\nname = \"bot\"\nkey = \"{BOT_KEY}\"\ngroups = [\"ci\"]\n\
         \n\
         [[policy]]\ngroups = [\"eng\"]\nallow = [\"everything__*\", \"mcpmux://everything/*\"]\n\
         deny = [\"everything__echo\"]\naudit_arguments = true\n\n\
         [[policy]]\ngroups = [\"ci\"]\nallow = [\"everything__echo\"]\n\n\
         [audit]\npath = {audit_path:?}\n",
        toml_list(&args),
    )
}

/// An HTTP client whose requests carry `token` (and `extra` headers).
fn client(token: &str, extra: &[(&'static str, &str)]) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let bearer = format!("Bearer {token}");
    for (name, value) in [("authorization", bearer.as_str())]
        .into_iter()
        .chain(extra.iter().copied())
    {
        headers.insert(
            name,
            reqwest::header::HeaderValue::from_str(value).expect("a header value"),
        );
    }
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .expect("an HTTP client")
}

/// A session of `http`'s principal once the gateway lists it server-everything's `tool`.
async fn ready_session(gw: &mut ServeProcess, http: &reqwest::Client, tool: &str) -> RawSession {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = gw.guard.try_wait() {
            panic!("gateway exited early ({status}); log:\n{}", gw.log());
        }
        assert!(Instant::now() < deadline, "gateway not ready; log:\n{}", gw.log());
        let opened = RawSession::try_open_with(http.clone(), &gw.url(), json!({}), "2025-11-25").await;
        if let Ok(session) = opened {
            let (tools, _) = session.list_all("tools/list", "tools").await;
            if tools.iter().any(|t| t["name"] == tool) {
                return session;
            }
            session.delete().await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The audit file's lines, parsed, once `done` holds for them (the writer is asynchronous).
async fn lines_when(path: &Path, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if done(&lines) {
            return lines;
        }
        assert!(Instant::now() < deadline, "audit lines never got there:\n{text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The lines of `event` ("decision" or "completed") by `who` (an API key's name) about `name`.
fn find<'a>(lines: &'a [Value], event: &str, who: &str, name: &str) -> Vec<&'a Value> {
    (lines.iter())
        .filter(|l| l["event"] == event && l["principal"]["api_key"] == who && l["name"] == name)
        .collect()
}

/// `mcpmux audit verify FILE`: exit status and output.
fn verify(file: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpmux"))
        .args(["audit", "verify"])
        .arg(file)
        .output()
        .expect("run mcpmux audit verify");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_and_outcomes_are_chained_lines_that_verify_finds_tampered() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("audit");
    // Started elsewhere: the relative path follows the configuration file.
    let cwd = dir.join("elsewhere");
    std::fs::create_dir_all(&cwd).expect("cwd");
    let audit = dir.join("audit.jsonl");
    let mut gw = ServeProcess::start(&dir, "", &servers("audit.jsonl"), &cwd, &[]);
    let alice_http = client(
        ALICE_KEY,
        &[(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )],
    );
    let alice = ready_session(&mut gw, &alice_http, "everything__get-sum").await;
    let bot = RawSession::open_as(&gw.url(), BOT_KEY).await;

    let sum = alice
        .tool_text("everything__get-sum", json!({"a": 2, "b": 3}))
        .await;
    assert!(sum.contains('5'), "{sum}");
    let hidden = alice
        .call(
            "tools/call",
            json!({"name": "everything__echo", "arguments": {"message": "no"}}),
        )
        .await;
    assert!(hidden.get("error").is_some(), "{hidden}");
    let (resources, _) = alice.list_all("resources/list", "resources").await;
    let uri = resources[0]["uri"].as_str().expect("a resource uri").to_string();
    let read = alice.call("resources/read", json!({"uri": uri})).await;
    assert!(read["result"]["contents"].is_array(), "{read}");
    let bad_sum = alice
        .call(
            "tools/call",
            json!({"name": "everything__get-sum", "arguments": {"a": "x", "b": 1}}),
        )
        .await;
    assert_eq!(bad_sum["result"]["isError"], true, "{bad_sum}");
    let no_city = alice
        .call(
            "prompts/get",
            json!({"name": "everything__args-prompt", "arguments": {}}),
        )
        .await;
    assert!(no_city.get("error").is_some(), "{no_city}");
    let echoed = bot
        .tool_text("everything__echo", json!({"message": "bot-arguments-stay-out"}))
        .await;
    assert!(echoed.contains("bot-arguments-stay-out"), "{echoed}");

    let lines = lines_when(&audit, |lines| {
        !find(lines, "completed", "bot", "everything__echo").is_empty()
    })
    .await;
    let text = std::fs::read_to_string(&audit).expect("the audit file");
    for secret in [ALICE_KEY, BOT_KEY, "Bearer"] {
        assert!(!text.contains(secret), "{secret} is in the audit log:\n{text}");
    }
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["seq"], i as u64 + 1, "{line}");
        assert!(
            line["time"]
                .as_str()
                .is_some_and(|t| t.ends_with('Z') && t.contains('T')),
            "{line}"
        );
    }

    // An allowed call: who, where, which rule, its arguments (alice's rule asks), then its outcome.
    let decided = find(&lines, "decision", "alice", "everything__get-sum");
    let allowed = decided[0];
    assert_eq!(allowed["decision"], "allowed", "{allowed}");
    assert_eq!(allowed["method"], "tools/call");
    assert_eq!(
        (&allowed["upstream"], &allowed["original"]),
        (&json!("everything"), &json!("get-sum"))
    );
    assert_eq!(allowed["rule"], "policy[0]");
    assert!(allowed["rule_line"].as_u64().is_some_and(|l| l > 1), "{allowed}");
    assert_eq!(allowed["arguments"], json!({"a": 2, "b": 3}));
    assert_eq!(allowed["trace_id"], ALICE_TRACE);
    let alice_session = crate::support::session_digest(&alice.sid);
    assert_eq!(allowed["session"].as_str(), Some(alice_session.as_str()));
    let completed = find(&lines, "completed", "alice", "everything__get-sum");
    assert_eq!(completed[0]["outcome"], "ok", "{}", completed[0]);
    assert!(completed[0]["duration_ms"].as_f64().is_some(), "{}", completed[0]);
    assert!(
        completed[0].get("arguments").is_none(),
        "arguments are on the decision only"
    );
    // The bad sum: a tool result with isError.
    assert_eq!(completed[1]["outcome"], "is_error", "{}", completed[1]);
    assert_eq!(completed[1]["is_error"], true);

    // A denied call: the rule that denied it, and no completion.
    let denied = find(&lines, "decision", "alice", "everything__echo");
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!(
        (&denied[0]["decision"], &denied[0]["rule"]),
        (&json!("denied"), &json!("policy[0]"))
    );
    assert!(
        denied[0]["reason"].as_str().is_some_and(|r| r.contains("deny")),
        "{}",
        denied[0]
    );
    assert!(find(&lines, "completed", "alice", "everything__echo").is_empty());

    // A read, and an upstream's JSON-RPC error.
    let read = find(&lines, "completed", "alice", &uri);
    assert_eq!(
        (read[0]["method"].as_str(), read[0]["outcome"].as_str()),
        (Some("resources/read"), Some("ok"))
    );
    let prompt = find(&lines, "completed", "alice", "everything__args-prompt");
    assert_eq!(prompt[0]["outcome"], "error", "{}", prompt[0]);
    assert_eq!(prompt[0]["error_code"], -32602);

    // Bot's rule does not record arguments; a request without `traceparent` gets its own trace id.
    let bot_call = find(&lines, "decision", "bot", "everything__echo")[0];
    assert_eq!(
        (&bot_call["decision"], &bot_call["rule"]),
        (&json!("allowed"), &json!("policy[1]"))
    );
    assert!(bot_call.get("arguments").is_none(), "{bot_call}");
    assert!(!text.contains("bot-arguments-stay-out"));
    let bot_trace = bot_call["trace_id"].as_str().unwrap_or_default();
    assert!(bot_trace.len() == 32 && bot_trace != ALICE_TRACE, "{bot_call}");

    // The live file verifies.
    let (code, out) = verify(&audit);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("{} line(s) checked", lines.len())), "{out}");
    // /status shows the same head of the chain (to keep elsewhere: lines cut from the end show).
    let status = reqwest::get(format!("http://127.0.0.1:{}/status", gw.port))
        .await
        .expect("GET /status")
        .text()
        .await
        .unwrap_or_default();
    let status: Value = serde_json::from_str(&status).expect("a status document");
    let head = &status["audit"];
    assert_eq!(head["last_seq"], lines.len() as u64, "{head}");
    let last_hash = head["last_hash"].as_str().unwrap_or("none");
    assert!(out.contains(&format!("last hash {last_hash}")), "{out}\n{head}");
    assert_eq!(
        (&head["dropped"], &head["write_errors"]),
        (&json!(0), &json!(0)),
        "{head}"
    );

    // A restart appends to the same chain.
    gw.signal(libc::SIGTERM);
    assert!(gw.wait_exit(Duration::from_secs(30)).await.success());
    let before = std::fs::read_to_string(&audit).expect("audit").lines().count();
    let mut gw = ServeProcess::start(&dir, "", &servers("audit.jsonl"), &cwd, &[]);
    let again = ready_session(&mut gw, &client(BOT_KEY, &[]), "everything__echo").await;
    assert!(again
        .tool_text("everything__echo", json!({"message": "again"}))
        .await
        .contains("again"));
    let after = lines_when(&audit, |l| l.len() >= before + 2).await;
    assert_eq!(after[before]["seq"], before as u64 + 1, "{}", after[before]);
    gw.signal(libc::SIGTERM);
    assert!(gw.wait_exit(Duration::from_secs(30)).await.success());
    let (code, out) = verify(&audit);
    assert_eq!(code, 0, "after a restart: {out}");

    // Tampering is found and named.
    let good: Vec<String> = std::fs::read_to_string(&audit)
        .expect("audit")
        .lines()
        .map(str::to_string)
        .collect();
    let tampered = |name: &str, lines: &[String]| {
        let path = dir.join(name);
        std::fs::write(&path, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).expect("write");
        verify(&path)
    };
    let mut edited = good.clone();
    edited[2] = edited[2].replacen("\"method\":\"", "\"method\":\"x", 1);
    let (code, out) = tampered("edited.jsonl", &edited);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("line 3: edited"), "{out}");
    let mut removed = good.clone();
    removed.remove(2);
    let (code, out) = tampered("removed.jsonl", &removed);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("line 3:") && out.contains("removed"), "{out}");
    let mut reordered = good.clone();
    reordered.swap(1, 2);
    let (code, out) = tampered("reordered.jsonl", &reordered);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("line 2:") && out.contains("reordered"), "{out}");
    let mut garbage = good.clone();
    garbage[3] = "not json".into();
    let (code, out) = tampered("garbage.jsonl", &garbage);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("line 4: not JSON"), "{out}");
    let (code, out) = verify(&dir.join("no-such-file.jsonl"));
    assert_eq!(code, 2, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_sink_is_counted_in_status_and_calls_still_succeed() {
    let _suite = crate::suite::enter(module_path!());
    let gw = boot_gateway(&servers("/dev/full"), "").await;
    let alice = RawSession::open_as(&gw.url(), ALICE_KEY).await;
    for round in 0..3 {
        let sum = alice
            .tool_text("everything__get-sum", json!({"a": round, "b": 1}))
            .await;
        assert!(sum.contains(&(round + 1).to_string()), "{sum}");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let audit = loop {
        let audit = gateway_status(&gw).await["audit"].clone();
        // A decision and a completion for each call.
        if audit["write_errors"].as_u64().is_some_and(|n| n >= 6) || Instant::now() > deadline {
            break audit;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(audit["path"], "/dev/full", "{audit}");
    assert_eq!(
        (&audit["lines_written"], &audit["dropped"]),
        (&json!(0), &json!(0)),
        "{audit}"
    );
    assert!(audit["write_errors"].as_u64().is_some_and(|n| n >= 6), "{audit}");
    assert!(
        audit["last_error"].as_str().is_some_and(|e| e.contains("space")),
        "{audit}"
    );
    gw.stop().await;
}

/// The first SSE event on `rx` whose data satisfies `pred`.
async fn sse_until(
    rx: &mut tokio::sync::mpsc::Receiver<mcpmux::protocol::sse::SseEvent>,
    pred: impl Fn(&mcpmux::protocol::sse::SseEvent) -> bool,
) -> mcpmux::protocol::sse::SseEvent {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("an SSE event in time")
            .expect("the SSE stream is open");
        if pred(&event) {
            return event;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_2026_era_and_legacy_sse_go_through_the_same_audit() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("audit-eras");
    let audit = dir.join("audit.jsonl");
    let gw = boot_gateway(&servers(&path_str(&audit)), "").await;
    // The session era first, so the catalog is there for the others.
    let ready = RawSession::open_as(&gw.url(), BOT_KEY).await;
    assert!(ready
        .tool_text("everything__echo", json!({"message": "session"}))
        .await
        .contains("session"));
    let http = client(BOT_KEY, &[]);

    // 2026-07-28: every request stands alone.
    let envelope = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "everything__echo", "arguments": {"message": "modern"}, "_meta": envelope}});
    let resp = http
        .post(gw.url())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "everything__echo")
        .body(body.to_string())
        .send()
        .await
        .expect("POST");
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap_or_default();
    assert!(text.contains("modern"), "{text}");

    // Legacy HTTP+SSE: the stream, then messages posted to its endpoint.
    let base = format!("http://{}", gw.local_addr());
    let stream = http.get(format!("{base}/sse")).send().await.expect("GET /sse");
    assert_eq!(stream.status(), 200);
    let mut events = crate::support::mcp::sse_events(stream);
    let endpoint = sse_until(&mut events, |e| e.event.as_deref() == Some("endpoint"))
        .await
        .data;
    let post = |body: Value| {
        let url = format!("{base}{endpoint}");
        let http = http.clone();
        async move {
            let resp = http
                .post(url)
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await
                .expect("POST /message");
            assert_eq!(resp.status(), 202);
        }
    };
    post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}),
    )
    .await;
    sse_until(&mut events, |e| e.data.contains("\"id\":1")).await;
    post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    post(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "everything__echo", "arguments": {"message": "legacy"}}}))
    .await;
    let answer = sse_until(&mut events, |e| e.data.contains("\"id\":2")).await;
    assert!(answer.data.contains("legacy"), "{}", answer.data);

    // Three calls, each a decision and a completion, by the same principal, in three sessions.
    let lines = lines_when(&audit, |l| {
        find(l, "completed", "bot", "everything__echo").len() >= 3
    })
    .await;
    let completed = find(&lines, "completed", "bot", "everything__echo");
    assert!(completed.iter().all(|l| l["outcome"] == "ok"), "{completed:?}");
    let decided = find(&lines, "decision", "bot", "everything__echo");
    assert_eq!(decided.len(), 3, "{decided:?}");
    assert!(decided
        .iter()
        .all(|l| l["decision"] == "allowed" && l["rule"] == "policy[1]"));
    let sessions: std::collections::BTreeSet<&str> =
        decided.iter().filter_map(|l| l["session"].as_str()).collect();
    assert_eq!(sessions.len(), 3, "{decided:?}");
    let ready_session = crate::support::session_digest(&ready.sid);
    assert!(sessions.contains(ready_session.as_str()), "{decided:?}");
    gw.stop().await;
    let (code, out) = verify(&audit);
    assert_eq!(code, 0, "{out}");
}
