//! `rate_limit` of `[[policy]]` rules for API-key principals in front of real server-everything:
//! each JSON-RPC request a principal sends takes a token (2026-07-28 requests, session-era
//! requests including `initialize`, each request of a batch, legacy `/message`); over the limit
//! it is 429 with `Retry-After` and a JSON-RPC error for the request's id; another principal
//! is not affected; notifications, responses to server requests, GET streams and DELETE are
//! never refused.

use crate::support::mcp::{messages, recv, sse_events, wait_for, RawSession, ACCEPT_BOTH, WAIT};
use crate::support::*;
use serde_json::{json, Value};

const MODERN: &str = "2026-07-28";

fn servers() -> String {
    let (cmd, args) = peers().everything_stdio_cmd();
    format!(
        "[servers.everything]\ncommand = {cmd:?}\nargs = {}\n\n\
         [auth]\n\
         [[auth.api_keys]]\nname = \"alice\"\nkey = \"alice-key-0123456789\"\n\
         [[auth.api_keys]]\nname = \"bob\"\nkey = \"bob-key-0123456789\"\n\
         [[auth.api_keys]]\nname = \"carol\"\nkey = \"carol-key-0123456789\"\n\
         [[auth.api_keys]]\nname = \"dave\"\nkey = \"dave-key-0123456789\"\n\
         [[auth.api_keys]]\nname = \"erin\"\nkey = \"erin-key-0123456789\"\n\n\
         [[policy]]\nprincipals = [\"alice\", \"bob\"]\nallow = [\"everything__*\"]\nrate_limit = \"3/min\"\n\n\
         [[policy]]\nprincipals = [\"carol\"]\nallow = [\"everything__*\"]\nrate_limit = \"1/min\"\n\n\
         [[policy]]\nprincipals = [\"dave\"]\nallow = [\"everything__*\"]\nrate_limit = \"2/min\"\n\n\
         [[policy]]\nprincipals = [\"erin\"]\nallow = [\"everything__*\"]\n",
        toml_list(&args),
    )
}

/// A 2026-07-28 `tools/call` of `everything__echo` with request id `id`, sent with `key`.
async fn modern_echo(url: &str, key: &str, id: i64) -> reqwest::Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "everything__echo", "arguments": {"message": "hi"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                  "io.modelcontextprotocol/clientCapabilities": {},
                  "io.modelcontextprotocol/clientInfo": {"name": "rate-test", "version": "0"}}}});
    reqwest::Client::new()
        .post(url)
        .header("accept", ACCEPT_BOTH)
        .header("content-type", "application/json")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "everything__echo")
        .bearer_auth(key)
        .body(body.to_string())
        .send()
        .await
        .expect("modern POST")
}

/// The one JSON-RPC message of a response (JSON or SSE).
async fn answer(resp: reqwest::Response) -> Value {
    let mut rx = messages(resp);
    recv(&mut rx).await.expect("an answer")
}

/// A 429's `Retry-After` (whole seconds) and its body, checked against the limit it names.
async fn refused(resp: reqwest::Response, id: i64, limit: &str, rule: usize) -> u64 {
    assert_eq!(resp.status(), 429);
    let retry_after: u64 = resp.headers()["retry-after"]
        .to_str()
        .ok()
        .and_then(|v| v.parse().ok())
        .expect("Retry-After in whole seconds");
    let text = resp.text().await.unwrap_or_default();
    let body: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(body["id"], id, "{body}");
    assert_eq!(body["error"]["code"], -32004, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("rate limit {limit} of policy[{rule}] exceeded")),
        "{body}"
    );
    assert_eq!(body["error"]["data"]["retryAfter"], retry_after, "{body}");
    retry_after
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_per_minute_lets_three_requests_through_and_refuses_the_fourth() {
    let _suite = crate::suite::enter(module_path!());
    let gw = boot_gateway(&servers(), "").await;
    let url = gw.url();
    let (alice, bob) = ("alice-key-0123456789", "bob-key-0123456789");

    // 2026-07-28: three calls pass, the fourth is 429 with the request's id.
    for id in 1..=3 {
        let resp = modern_echo(&url, alice, id).await;
        assert_eq!(resp.status(), 200, "call {id}");
        let reply = answer(resp).await;
        assert_eq!(reply["id"], id, "{reply}");
        assert!(reply.to_string().contains("Echo: hi"), "{reply}");
    }
    let wait = refused(modern_echo(&url, alice, 4).await, 4, "3/min", 0).await;
    assert!(
        (1..=20).contains(&wait),
        "a 3/min bucket refills a token every 20 s: {wait}"
    );

    // Bob matches the same rule and has a bucket of his own.
    let resp = modern_echo(&url, bob, 1).await;
    assert_eq!(resp.status(), 200);
    assert!(answer(resp).await.to_string().contains("Echo: hi"));

    // Session era: initialize counts (bob's second request), notifications/initialized does not.
    let session = RawSession::open_as(&url, bob).await;
    let echoed = session
        .call(
            "tools/call",
            json!({"name": "everything__echo", "arguments": {"message": "s"}}),
        )
        .await;
    assert!(echoed.to_string().contains("Echo: s"), "{echoed}");
    let over = session
        .post(json!({"jsonrpc": "2.0", "id": 40, "method": "tools/list", "params": {}}))
        .await;
    refused(over, 40, "3/min", 0).await;

    // Over the limit, what is not a request is never refused: a notification, an answer to a
    // server request, the GET stream.
    assert_eq!(
        session
            .notify("notifications/roots/list_changed", json!({}))
            .await,
        202
    );
    // (An answer under an id mcpmux never sent the session is refused as that, 400, not as over
    // the limit; a real answer passing an empty bucket is checked below.)
    let answer_to_server = json!({"jsonrpc": "2.0", "id": 777, "result": {"action": "decline"}});
    assert_eq!(session.post(answer_to_server).await.status(), 400);
    let stream = session.get(None).await;
    assert_eq!(stream.status(), 200);
    drop(stream);

    // A batch counts each request: the refused one is its JSON-RPC error among the replies.
    let batch = json!([
        {"jsonrpc": "2.0", "id": 50, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
    ]);
    let resp = session
        .http
        .post(&session.url)
        .header("accept", ACCEPT_BOTH)
        .header("content-type", "application/json")
        .header("mcp-session-id", &session.sid)
        .header("mcp-protocol-version", "2025-03-26")
        .body(batch.to_string())
        .send()
        .await
        .expect("batch POST");
    let reply = answer(resp).await;
    assert_eq!(reply["id"], 50, "{reply}");
    assert_eq!(reply["error"]["code"], -32004, "{reply}");

    // DELETE is not counted either.
    assert_eq!(session.delete().await, 200);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_sse_host_over_its_limit_gets_429_on_its_message_post() {
    let _suite = crate::suite::enter(module_path!());
    let gw = boot_gateway(&servers(), "").await;
    let base = format!("http://{}", gw.local_addr());
    let http = reqwest::Client::new();
    let key = "carol-key-0123456789";
    let stream = http
        .get(format!("{base}/sse"))
        .header("accept", "text/event-stream")
        .bearer_auth(key)
        .send()
        .await
        .expect("GET /sse");
    assert_eq!(stream.status(), 200);
    let mut events = sse_events(stream);
    let first = tokio::time::timeout(WAIT, events.recv())
        .await
        .ok()
        .flatten()
        .expect("the endpoint event");
    let endpoint = format!("{base}{}", first.data);
    let post = |body: Value| {
        http.post(&endpoint)
            .header("content-type", "application/json")
            .bearer_auth(key)
            .body(body.to_string())
            .send()
    };
    // 1/min: initialize is the one request; the next is refused with the POST's status.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {},
        "clientInfo": {"name": "legacy-rate-test", "version": "0"}}});
    assert_eq!(post(init).await.expect("POST").status(), 202);
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(initialized).await.expect("POST").status(), 202);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let wait = refused(post(list).await.expect("POST"), 2, "1/min", 1).await;
    assert!((1..=60).contains(&wait), "{wait}");
    // Notifications still pass.
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"});
    assert_eq!(post(changed).await.expect("POST").status(), 202);
    gw.stop().await;
}

/// An elicitation answered while the principal's bucket is empty still reaches the upstream
/// and the call in flight completes: answers to server requests are never refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_to_a_server_request_passes_with_an_empty_bucket() {
    let _suite = crate::suite::enter(module_path!());
    let gw = boot_gateway(&servers(), "").await;
    let url = gw.url();
    // Erin has no limit: she waits for server-everything's elicitation tool to be listed.
    let tool = "everything__trigger-elicitation-request";
    let erin = RawSession::open_as(&url, "erin-key-0123456789").await;
    let deadline = std::time::Instant::now() + WAIT;
    while !erin
        .call("tools/list", json!({}))
        .await
        .to_string()
        .contains(tool)
    {
        assert!(std::time::Instant::now() < deadline, "{tool} never listed");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // Dave (2/min): initialize and the call take both tokens.
    let mut headers = reqwest::header::HeaderMap::new();
    let bearer = reqwest::header::HeaderValue::from_static("Bearer dave-key-0123456789");
    headers.insert(reqwest::header::AUTHORIZATION, bearer);
    let http = reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .expect("an HTTP client");
    let caps = json!({"elicitation": {}});
    let dave = RawSession::try_open_with(http, &url, caps, "2025-11-25")
        .await
        .expect("dave's session");
    let mut call = dave
        .stream(json!(5), "tools/call", json!({"name": tool, "arguments": {}}))
        .await;
    let request = wait_for(&mut call, |m| m["method"] == "elicitation/create").await;
    let ping = dave
        .post(json!({"jsonrpc": "2.0", "id": 6, "method": "ping"}))
        .await;
    refused(ping, 6, "2/min", 2).await;
    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "decline"}});
    assert_eq!(dave.post(answer).await.status(), 202);
    let done = wait_for(&mut call, |m| m["id"] == json!(5)).await;
    assert!(done.get("result").is_some(), "{done}");
    gw.stop().await;
}
