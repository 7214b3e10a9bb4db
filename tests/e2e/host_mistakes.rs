//! What a host gets wrong, and what mcpmux answers itself, with real upstreams: a null id, params
//! of the wrong shape (refused before server-everything sees them), a bare upstream URI (resolved
//! when one upstream owns it, the working `mcpmux://` forms named when several do), a huge method
//! name (clipped in the answer), a tool of a server that is down, and an upstream's own JSON-RPC
//! error code (kept, not turned into a gateway code).

use crate::support::mcp::*;
use crate::support::*;
use serde_json::{json, Value};

/// A `[servers.NAME]` table running server-everything over stdio.
fn everything_toml(name: &str) -> String {
    let (command, args) = peers().everything_stdio_cmd();
    format!(
        "[servers.{name}]\ncommand = {command:?}\nargs = {}\n",
        toml_list(&args)
    )
}

async fn body_json(resp: reqwest::Response) -> Value {
    serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_null_id_is_an_invalid_request_and_is_not_run() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("null-id");
    let log = dir.join("t.jsonl");
    let gw = boot_gateway(&test_server_toml("t", &[], Some(&log)), "").await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    let call = json!({"jsonrpc":"2.0","id":null,"method":"tools/call",
        "params":{"name":"t__echo","arguments":{"message":"null-id"}}});
    let resp = s.post(call).await;
    assert_eq!(resp.status(), 400, "not a 202: it is no notification");
    let body = body_json(resp).await;
    assert_eq!(body["error"]["code"], -32600, "{body}");
    assert!(body.get("id").is_some_and(Value::is_null), "{body}");
    // The upstream saw no such call (a later call proves its log is written).
    assert_eq!(
        s.tool_text("t__echo", json!({"message": "after"})).await,
        "echo: after"
    );
    let seen = upstream_log(&log);
    assert!(
        !seen.iter().any(|m| m.to_string().contains("null-id")),
        "{seen:?}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn params_of_the_wrong_shape_never_reach_server_everything() {
    let _suite = crate::suite::enter(module_path!());
    let gw = boot_gateway(&everything_toml("everything"), "").await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    for arguments in [json!("message=hi"), json!(["hi"]), json!(null)] {
        let resp = s
            .call(
                "tools/call",
                json!({"name": "everything__echo", "arguments": arguments}),
            )
            .await;
        assert_eq!(resp["error"]["code"], -32602, "{resp}");
        assert_eq!(
            resp["error"]["message"], "params.arguments must be an object",
            "{resp}"
        );
    }
    let prompt = s
        .call(
            "prompts/get",
            json!({"name": "everything__args-prompt", "arguments": {"city": 7}}),
        )
        .await;
    assert_eq!(
        prompt["error"]["message"],
        "params.arguments must be an object of strings"
    );
    let read = s.call("resources/read", json!({"uri": ["demo://x"]})).await;
    assert_eq!(read["error"]["message"], "params.uri must be a string", "{read}");
    let name = s.call("tools/call", json!({"name": {"n": "echo"}})).await;
    assert_eq!(name["error"]["message"], "params.name must be a string", "{name}");
    // The shared upstream is unharmed and a good call goes through.
    assert_eq!(
        s.tool_text("everything__echo", json!({"message": "still here"}))
            .await,
        "Echo: still here"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_uris_that_tools_hand_out_resolve_to_their_one_owner() {
    let _suite = crate::suite::enter(module_path!());
    let bare = "demo://resource/dynamic/text/4";
    let gw = boot_gateway(&everything_toml("everything"), "").await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    let read = s.call("resources/read", json!({"uri": bare})).await;
    let contents = &read["result"]["contents"][0];
    assert!(contents["text"].is_string(), "{read}");
    assert_eq!(contents["uri"], format!("mcpmux://everything/{bare}"), "{read}");
    let sub = s.call("resources/subscribe", json!({"uri": bare})).await;
    assert_eq!(sub["result"], json!({}), "{sub}");
    let unsub = s.call("resources/unsubscribe", json!({"uri": bare})).await;
    assert_eq!(unsub["result"], json!({}), "{unsub}");
    let unknown = s.call("resources/read", json!({"uri": "nowhere://x"})).await;
    assert_eq!(unknown["error"]["code"], -32002, "{unknown}");
    assert!(
        (unknown["error"]["message"].as_str()).is_some_and(|m| m.contains("mcpmux://")),
        "{unknown}"
    );
    gw.stop().await;

    // Two upstreams that both serve it: the answer names the forms that work, and they do.
    let servers = format!("{}\n{}", everything_toml("one"), everything_toml("two"));
    let gw = boot_gateway(&servers, "").await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    let ambiguous = s.call("resources/read", json!({"uri": bare})).await;
    assert_eq!(ambiguous["error"]["code"], -32602, "{ambiguous}");
    let forms = [format!("mcpmux://one/{bare}"), format!("mcpmux://two/{bare}")];
    assert_eq!(
        ambiguous["error"]["data"]["candidates"],
        json!(forms),
        "{ambiguous}"
    );
    let message = ambiguous["error"]["message"].as_str().unwrap_or_default();
    assert!(forms.iter().all(|f| message.contains(f.as_str())), "{message}");
    for form in forms {
        let read = s.call("resources/read", json!({"uri": form})).await;
        assert!(read["result"]["contents"][0]["text"].is_string(), "{read}");
    }
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_say_what_happened() {
    let _suite = crate::suite::enter(module_path!());
    let servers = format!(
        "{}\n{}",
        test_server_toml("t", &[], None),
        test_server_toml("down", &["--crash-on-start"], None)
    );
    let gw = boot_gateway(&servers, "").await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    // A 1 MiB method name is not echoed back whole.
    let method = "m".repeat(1 << 20);
    let resp = s
        .post(json!({"jsonrpc":"2.0","id":1,"method":method,"params":{}}))
        .await;
    let body = body_json(resp).await;
    assert_eq!(body["error"]["code"], -32601);
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.len() < 300 && message.ends_with("m…"),
        "{} bytes",
        message.len()
    );
    // A tool of a server that is down: that server is named, retryable, not "Unknown tool".
    let down = s
        .call("tools/call", json!({"name": "down__echo", "arguments": {}}))
        .await;
    assert_eq!(down["error"]["code"], -32000, "{down}");
    assert_eq!(down["error"]["data"]["upstream"], "down", "{down}");
    let message = down["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("down__echo") && !message.contains("Unknown tool"),
        "{message}"
    );
    let uri = "mcpmux://down/test://static/1";
    let read = s.call("resources/read", json!({"uri": uri})).await;
    assert_eq!(read["error"]["code"], -32000, "{read}");
    let message = read["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(uri) && message.contains("once it is ready"),
        "{message}"
    );
    let unknown = s.call("tools/call", json!({"name": "t__nope"})).await;
    assert_eq!(unknown["error"]["message"], "Unknown tool: t__nope");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_own_error_code_reaches_the_host_as_it_is() {
    let _suite = crate::suite::enter(module_path!());
    let port = free_port();
    let _server = tokio::task::spawn_blocking(move || start_everything_http(port))
        .await
        .expect("server-everything over HTTP");
    let servers = format!("[servers.web]\nurl = \"http://127.0.0.1:{port}/mcp\"\n");
    let gw = boot_gateway(&servers, "").await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    // The TypeScript SDK refuses a message its schema rejects with HTTP 400 and -32700 (id null).
    let params = json!({"name": "web__echo", "arguments": {"message": "x"},
        "_meta": {"io.modelcontextprotocol/related-task": 5}});
    let refused = s.call("tools/call", params).await;
    assert_eq!(refused["error"]["code"], -32700, "{refused}");
    assert_eq!(
        s.tool_text("web__echo", json!({"message": "fine"})).await,
        "Echo: fine"
    );
    gw.stop().await;
}
