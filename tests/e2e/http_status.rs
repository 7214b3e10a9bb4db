//! The status codes and headers of the Streamable HTTP endpoint (2025-11-25 transport rules).

use crate::support::mcp::*;
use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

async fn gateway(extra: &str) -> mcpmux::Gateway {
    boot_gateway(&test_server_toml("t", &["--tools", "2"], None), extra).await
}

fn post(url: &str) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
}

/// POST `body` with JSON content type, `Accept` for both media types and extra headers.
async fn send(url: &str, headers: &[(&str, &str)], body: &str) -> reqwest::Response {
    let mut req = post(url).header("accept", ACCEPT_BOTH);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.body(body.to_string()).send().await.expect("POST")
}

/// GET the endpoint with the given headers.
async fn get(url: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut req = reqwest::Client::new().get(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.expect("GET")
}

async fn body_json(resp: reqwest::Response) -> Value {
    serde_json::from_str(&resp.text().await.unwrap()).unwrap_or(Value::Null)
}

const PING: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_statuses() {
    let _suite = crate::suite::enter(module_path!());
    let gw = gateway("").await;
    let url = gw.url();
    // Accept must list both media types.
    let r = post(&url)
        .header("accept", "application/json")
        .body(PING)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 406);
    let r = post(&url)
        .header("accept", "text/html")
        .body(PING)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 406);
    // Content-Type must be JSON.
    let r = reqwest::Client::new()
        .post(&url)
        .header("accept", ACCEPT_BOTH)
        .header("content-type", "text/plain")
        .body(PING)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    // Malformed JSON: 400 with a -32700 error.
    let r = send(&url, &[], "{nope").await;
    assert_eq!(r.status(), 400);
    assert_eq!(body_json(r).await["error"]["code"], -32700);
    // Missing session id: 400; unknown session: 404.
    let r = send(&url, &[], PING).await;
    assert_eq!(r.status(), 400);
    let r = send(&url, &[("mcp-session-id", "nope")], PING).await;
    assert_eq!(r.status(), 404);
    // initialize: JSON with a session id; the version is echoed when supported.
    let r = send(&url, &[], INIT).await;
    assert_eq!(r.status(), 200);
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
    assert!(sid.len() >= 32 && sid.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    let init = body_json(r).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-03-26");
    assert_eq!(init["result"]["serverInfo"]["name"], "mcpmux");
    assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true);
    // No MCP-Protocol-Version header means 2025-03-26: accepted.
    let r = send(&url, &[("mcp-session-id", &sid)], PING).await;
    assert_eq!(r.status(), 200);
    assert_eq!(body_json(r).await["result"], json!({}));
    // An unsupported version: 400.
    let r = send(
        &url,
        &[("mcp-session-id", &sid), ("mcp-protocol-version", "1999-01-01")],
        PING,
    )
    .await;
    assert_eq!(r.status(), 400);
    // Notifications and responses: 202 with an empty body.
    let r = send(
        &url,
        &[("mcp-session-id", &sid)],
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!(r.status(), 202);
    assert!(r.text().await.unwrap().is_empty());
    // A response to a request mcpmux never sent this session (its ids are sealed for it): 400,
    // with a JSON-RPC error that has no id.
    let r = send(
        &url,
        &[("mcp-session-id", &sid)],
        r#"{"jsonrpc":"2.0","id":99,"result":{}}"#,
    )
    .await;
    assert_eq!(r.status(), 400);
    let body: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(body["id"], Value::Null, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("99"),
        "{body}"
    );
    // Unknown method: -32601.
    let r = send(
        &url,
        &[("mcp-session-id", &sid)],
        r#"{"jsonrpc":"2.0","id":2,"method":"no/such"}"#,
    )
    .await;
    assert_eq!(body_json(r).await["error"]["code"], -32601);
    // Other HTTP methods: 405.
    let r = reqwest::Client::new().put(&url).body("{}").send().await.unwrap();
    assert_eq!(r.status(), 405);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_origin_or_host_is_forbidden() {
    let _suite = crate::suite::enter(module_path!());
    let gw = gateway("").await;
    let url = gw.url();
    let r = send(&url, &[("origin", "http://evil.example.com")], INIT).await;
    assert_eq!(r.status(), 403);
    let r = send(&url, &[("host", "evil.example.com")], INIT).await;
    assert_eq!(r.status(), 403);
    let r = send(&url, &[("origin", "http://localhost:6274")], INIT).await;
    assert_eq!(r.status(), 200);
    let port = gw.local_addr().port();
    let r = send(&url, &[("host", &format!("localhost:{port}"))], INIT).await;
    assert_eq!(r.status(), 200);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_and_delete() {
    let _suite = crate::suite::enter(module_path!());
    let gw = gateway("").await;
    let url = gw.url();
    let s = RawSession::open(&url, json!({})).await;
    let r = get(&url, &[("accept", "text/event-stream")]).await;
    assert_eq!(r.status(), 400);
    let r = get(
        &url,
        &[("accept", "application/json"), ("mcp-session-id", &s.sid)],
    )
    .await;
    assert_eq!(r.status(), 406);
    let first = get(
        &url,
        &[("accept", "text/event-stream"), ("mcp-session-id", &s.sid)],
    )
    .await;
    assert_eq!(first.status(), 200);
    assert!(first.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let second = get(
        &url,
        &[("accept", "text/event-stream"), ("mcp-session-id", &s.sid)],
    )
    .await;
    assert_eq!(second.status(), 409);
    assert_eq!(s.delete().await, 200);
    // The ended session's GET stream finishes, and every later use is 404.
    let ended = tokio::time::timeout(Duration::from_secs(5), first.text()).await;
    assert!(ended.is_ok(), "GET stream must end with its session");
    assert_eq!(
        s.post(json!({"jsonrpc":"2.0","id":1,"method":"ping"}))
            .await
            .status(),
        404
    );
    assert_eq!(s.delete().await, 404);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_from_2025_03_26_clients_are_served() {
    let _suite = crate::suite::enter(module_path!());
    let gw = gateway("").await;
    let old = RawSession::open_version(&gw.url(), json!({}), "2025-03-26").await;
    assert_eq!(old.version, "2025-03-26");
    let batch = json!([
        {"jsonrpc":"2.0","id":"a","method":"ping"},
        {"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"t__echo","arguments":{"message":"in a batch"}}},
        {"jsonrpc":"2.0","method":"notifications/initialized"},
        7
    ]);
    let resp = old.post(batch.clone()).await;
    assert_eq!(resp.status(), 200);
    let mut rx = messages(resp);
    let mut got = Vec::new();
    while let Some(m) = recv(&mut rx).await {
        got.push(m);
    }
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(got.iter().any(|m| m["id"] == "a" && m["result"] == json!({})));
    assert!(got
        .iter()
        .any(|m| m["id"] == "b" && m["result"]["content"][0]["text"] == "echo: in a batch"));
    assert!(got.iter().any(|m| m["error"]["code"] == -32600));
    let new = RawSession::open(&gw.url(), json!({})).await;
    assert_eq!(new.post(batch).await.status(), 400);
    // A batch over the length limit is refused whole, naming the limit.
    let pings: Vec<Value> = (0..=mcpmux::http::streamable::MAX_BATCH_LEN)
        .map(|i| json!({"jsonrpc":"2.0","id":i,"method":"ping"}))
        .collect();
    let resp = old.post(Value::Array(pings)).await;
    assert_eq!(resp.status(), 400);
    let body = body_json(resp).await;
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("limit")),
        "{body}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_probe_is_refused_so_clients_fall_back() {
    let _suite = crate::suite::enter(module_path!());
    let gw = gateway("").await;
    let r = post(&gw.url())
        .header("accept", ACCEPT_BOTH)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "server/discover")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(body_json(r).await["error"]["code"].is_i64());
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_and_idle_reaping() {
    let _suite = crate::suite::enter(module_path!());
    let gw = gateway("max_body_bytes = 4096\nsession_idle_timeout_secs = 1").await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    let big = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t__echo","arguments":{"message":"x".repeat(8000)}}});
    let too_large = s.post(big).await;
    assert_eq!(too_large.status(), 413);
    assert_eq!(too_large.headers()["content-type"], "application/json");
    let body = body_json(too_large).await;
    assert_eq!(
        body["error"]["code"], -32600,
        "a JSON-RPC refusal like the others: {body}"
    );
    assert_eq!(body["id"], Value::Null, "{body}");
    assert_eq!(
        s.post(json!({"jsonrpc":"2.0","id":2,"method":"ping"}))
            .await
            .status(),
        200
    );
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        s.post(json!({"jsonrpc":"2.0","id":3,"method":"ping"}))
            .await
            .status(),
        404,
        "idle session must be reaped"
    );
    gw.stop().await;
}

/// A call answered at once, alone, gets a JSON response; one with messages before its response,
/// or one slower than the reply window, gets an SSE stream (primed for a 2025-11-25 host).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_calls_get_json_and_the_rest_a_stream() {
    let _suite = crate::suite::enter(module_path!());
    let gw = gateway("").await;
    let host = RawSession::open_version(&gw.url(), json!({}), "2025-11-25").await;
    let call = |id: u64, name: &str, args: Value| json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":args,"_meta":{"progressToken":id}}});
    let media = |r: &reqwest::Response| {
        r.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };

    let r = host.post(call(1, "t__echo", json!({"message": "hi"}))).await;
    assert_eq!(media(&r), "application/json");
    let body = body_json(r).await;
    assert_eq!(body["id"], 1);
    assert_eq!(body["result"]["content"][0]["text"], "echo: hi");

    let r = host
        .post(call(2, "t__progress", json!({"steps": 2, "delay_ms": 1})))
        .await;
    assert_eq!(media(&r), "text/event-stream");
    let text = r.text().await.unwrap();
    assert!(text.contains("notifications/progress"), "{text}");
    assert!(text.contains("done 2"), "{text}");

    let r = host.post(call(3, "t__slow", json!({"ms": 400}))).await;
    assert_eq!(media(&r), "text/event-stream");
    let text = r.text().await.unwrap();
    let first = text.lines().find(|l| !l.is_empty()).unwrap_or_default();
    assert!(first.starts_with("id: "), "a priming event comes first: {text}");
    assert!(text.contains("slept 400"), "{text}");
    gw.stop().await;
}

/// Each value of a JSON document replaced by the name of its type, keys kept in order.
fn shape(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
        Value::Array(items) => Value::Array(items.iter().map(shape).collect()),
        Value::Number(n) if n.is_u64() => "u64".into(),
        Value::Number(_) => "number".into(),
        Value::String(_) => "string".into(),
        Value::Bool(_) => "bool".into(),
        Value::Null => "null".into(),
    }
}

/// `GET /status` keeps its keys, their order and the types of their values (external checks
/// and `mcpmux status` read it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_document_keeps_its_shape() {
    let gw = gateway("").await;
    let _host = RawSession::open(&gw.url(), json!({})).await;
    let r = get(&format!("http://{}/status", gw.local_addr()), &[]).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/json");
    let doc = body_json(r).await;
    // Compared as text: the order of keys counts.
    let expected = json!({
        "server": {"name": "string", "version": "string"},
        "uptime_secs": "u64", "sessions": "u64", "listen_streams": "u64",
        "calls_waiting_for_input": "u64", "calls_in_flight": "u64", "relayed_in_flight": "u64",
        "upstreams": [{
            "name": "string", "namespace": "string", "transport": "string",
            "isolation": "string", "phase": "string", "for_secs": "u64", "restarts": "u64",
            "last_error": "null", "protocol_version": "string", "era": "string",
            "tools": "u64", "prompts": "u64", "resources": "u64", "resourceTemplates": "u64",
            "shadowed": "u64"
        }],
        "session_list": [{
            "id_prefix": "string", "protocol_version": "string", "client": "string",
            "age_secs": "u64", "idle_secs": "u64", "in_flight": "u64", "get_stream": "bool"
        }],
        "config": {"loaded_at_unix": "u64", "digest": "null", "last_reload": "null"}
    });
    assert_eq!(shape(&doc).to_string(), expected.to_string(), "{doc}");
    assert_eq!(doc["server"]["name"], "mcpmux");
    assert_eq!(doc["sessions"], 1);
    let upstream = &doc["upstreams"][0];
    assert_eq!(upstream["name"], "t");
    assert_eq!(upstream["phase"], "ready");
    assert_eq!(upstream["transport"], "stdio");
    assert_eq!(upstream["isolation"], "shared");
    assert!(upstream["tools"].as_u64() > Some(0), "{doc}");
    let session = &doc["session_list"][0];
    assert_eq!(session["client"], "raw-test 0", "{doc}");
    assert_eq!(session["id_prefix"].as_str().map(str::len), Some(16), "{doc}");
    gw.stop().await;
}

/// A server whose tools are all hidden by an earlier server's says so in `/status`, and
/// `/readyz` follows `gateway.ready_when`: "all" (the default) is not ready while one upstream
/// is down, "any" is, "attempted" is once each had its first attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_its_rule_and_shadowed_tools_are_counted() {
    let _suite = crate::suite::enter(module_path!());
    let servers = |extra: &str| {
        format!(
            "{}namespace = \"\"\n\n{}namespace = \"\"\n\n[servers.down]\ncommand = \"/nonexistent/mcpmux-no-such-server\"\n{extra}",
            test_server_toml("first", &["--tools", "2", "--only-generated"], None),
            test_server_toml("second", &["--tools", "2", "--only-generated"], None),
        )
    };
    for (rule, expect) in [
        ("", 503),
        ("ready_when = \"all\"", 503),
        ("ready_when = \"any\"", 200),
        ("ready_when = \"attempted\"", 200),
    ] {
        let gw = boot_gateway(&servers(""), rule).await;
        let base = format!("http://{}", gw.local_addr());
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let doc = loop {
            let doc = body_json(get(&format!("{base}/status"), &[]).await).await;
            let phases: Vec<&str> = (doc["upstreams"].as_array().into_iter().flatten())
                .filter_map(|u| u["phase"].as_str())
                .collect();
            if phases[..2] == ["ready", "ready"] && phases[2] != "starting" {
                break doc;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "upstreams did not settle: {doc}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let r = get(&format!("{base}/readyz"), &[]).await;
        assert_eq!(r.status(), expect, "{rule}");
        let text = r.text().await.unwrap_or_default();
        assert!(text.contains("2 of 3 upstream(s) ready"), "{rule}: {text}");
        // Same names and URIs with no namespace: everything the second server offers is hidden.
        let (first, second) = (&doc["upstreams"][0], &doc["upstreams"][1]);
        let offered = ["tools", "prompts", "resources", "resourceTemplates"]
            .iter()
            .map(|k| first[k].as_u64().unwrap_or(0))
            .sum::<u64>();
        assert_eq!(
            (second["tools"].as_u64(), second["shadowed"].as_u64()),
            (Some(0), Some(offered)),
            "{doc}"
        );
        assert_eq!(doc["upstreams"][0]["shadowed"], 0, "{doc}");
        gw.stop().await;
    }
}

/// `gateway.admin_listen`: `/status`, `/healthz` and `/readyz` move to a listener of their own
/// (404 on the main one, where the MCP endpoint stays), `mcpmux status --config` finds them
/// there, and the listener stops with the gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_listen_moves_the_operator_endpoints_to_their_own_listener() {
    let _suite = crate::suite::enter(module_path!());
    let port = free_port();
    let gw = gateway(&format!("admin_listen = \"127.0.0.1:{port}\"")).await;
    let admin = gw.admin_addr().expect("an admin listener");
    assert_eq!(admin.port(), port);
    let (main, ops) = (format!("http://{}", gw.local_addr()), format!("http://{admin}"));
    for path in ["/status", "/healthz", "/readyz"] {
        let r = get(&format!("{main}{path}"), &[]).await;
        assert_eq!(r.status(), 404, "{path} on the main listener");
    }
    assert_eq!(get(&format!("{ops}/healthz"), &[]).await.status(), 200);
    let ready = get(&format!("{ops}/readyz"), &[]).await.status();
    assert!(ready == 200 || ready == 503, "{ready}");
    let doc = body_json(get(&format!("{ops}/status"), &[]).await).await;
    assert_eq!(doc["upstreams"][0]["name"], "t", "{doc}");
    // The MCP endpoint stays on the main listener only.
    assert_eq!(send(&format!("{ops}/mcp"), &[], INIT).await.status(), 404);
    assert_eq!(send(&gw.url(), &[], INIT).await.status(), 200);
    // Bound to loopback, the admin listener refuses a foreign Host (DNS rebinding).
    let foreign = get(&format!("{ops}/status"), &[("host", "evil.example")]).await;
    assert_eq!(foreign.status(), 403);

    // `mcpmux status --config` reads the admin listener from the configuration.
    let dir = scratch_dir("admin-listen");
    let config = dir.join("mcpmux.toml");
    let text = format!("[gateway]\nlisten = \"127.0.0.1:1\"\nadmin_listen = \"127.0.0.1:{port}\"\n");
    std::fs::write(&config, text).expect("write the config");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mcpmux"));
    cmd.arg("status").arg("--config").arg(&config).arg("--json");
    let run = tokio::task::spawn_blocking(move || run_client(cmd, Duration::from_secs(20)))
        .await
        .expect("mcpmux status");
    assert!(!run.timed_out && run.status.code() != Some(2), "{run}");
    let printed: Value = serde_json::from_str(&run.stdout).unwrap_or(Value::Null);
    assert_eq!(printed["upstreams"][0]["name"], "t", "{run}");

    gw.stop().await;
    let after = reqwest::get(format!("{ops}/healthz")).await;
    assert!(
        after.is_err(),
        "the admin listener outlived the gateway: {after:?}"
    );

    // With [auth]: the admin listener needs no credentials, and the main one still says 404
    // (not 401) for the endpoints that moved.
    let servers = format!(
        "{}\n[auth]\n[[auth.api_keys]]\nname = \"k\"\nkey = \"k-0123456789\"\n",
        test_server_toml("t", &["--tools", "2"], None)
    );
    let gw = boot_gateway(&servers, "admin_listen = \"127.0.0.1:0\"").await;
    let (main, ops) = (
        format!("http://{}", gw.local_addr()),
        format!("http://{}", gw.admin_addr().expect("an admin listener")),
    );
    for path in ["/status", "/healthz", "/readyz"] {
        assert_eq!(get(&format!("{main}{path}"), &[]).await.status(), 404, "{path}");
    }
    assert_eq!(get(&format!("{ops}/healthz"), &[]).await.status(), 200);
    assert_eq!(send(&gw.url(), &[], INIT).await.status(), 401);
    gw.stop().await;
}
