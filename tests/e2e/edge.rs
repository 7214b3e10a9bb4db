//! The listeners: HTTP/2 with prior knowledge (h2c) beside HTTP/1.1 on the same port, calls
//! multiplexed on one HTTP/2 connection, and `gateway.http2 = false` for HTTP/1.1 only.

use crate::support::mcp::*;
use crate::support::*;
use serde_json::Value;

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"h2","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

async fn gateway(extra: &str) -> mcpmux::Gateway {
    boot_gateway(&test_server_toml("t", &["--tools", "3"], None), extra).await
}

/// POST `body` (in `session` when given) with `client`.
async fn post(
    client: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: &str,
) -> reqwest::Result<reqwest::Response> {
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .header("mcp-protocol-version", "2025-06-18");
    if let Some(session) = session {
        req = req.header("mcp-session-id", session);
    }
    req.body(body.to_string()).send().await
}

/// Open a session with `client`: its id.
async fn open_session(client: &reqwest::Client, url: &str) -> String {
    let resp = post(client, url, None, INIT).await.expect("initialize");
    assert_eq!(resp.status(), 200);
    let session = (resp.headers().get("mcp-session-id"))
        .and_then(|v| v.to_str().ok())
        .expect("a session id")
        .to_string();
    let resp = post(client, url, Some(&session), INITIALIZED)
        .await
        .expect("initialized");
    assert_eq!(resp.status(), 202);
    session
}

/// How many tools a `tools/list` reply lists (JSON or SSE).
async fn tool_count(resp: reqwest::Response) -> usize {
    let text = resp.text().await.expect("body");
    let json = text
        .lines()
        .find_map(|line| line.strip_prefix("data: "))
        .unwrap_or(&text);
    let reply: Value = serde_json::from_str(json).unwrap_or(Value::Null);
    reply["result"]["tools"].as_array().map_or(0, Vec::len)
}

/// A session opened over HTTP/1.1 and the number of tools it lists (over HTTP/1.1).
async fn tools_over_http1(url: &str) -> usize {
    let h1 = reqwest::Client::builder().http1_only().build().expect("client");
    let session = open_session(&h1, url).await;
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let resp = post(&h1, url, Some(&session), list).await.expect("tools/list");
    assert_eq!(resp.version(), reqwest::Version::HTTP_11);
    tool_count(resp).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_with_prior_knowledge_is_served_beside_http1_and_multiplexes_calls() {
    let _suite = crate::suite::enter(module_path!());
    let gw = gateway("").await;
    let url = gw.url();
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .expect("client");
    let session = open_session(&h2, &url).await;
    // Eight requests at once on the one HTTP/2 connection, each answered.
    let lists = (0..8).map(|i| {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{},"method":"tools/list"}}"#, i + 1);
        let (h2, url, session) = (h2.clone(), url.clone(), session.clone());
        async move {
            let resp = post(&h2, &url, Some(&session), &body).await.expect("tools/list");
            assert_eq!(resp.version(), reqwest::Version::HTTP_2);
            assert_eq!(resp.status(), 200);
            tool_count(resp).await
        }
    });
    let counts = futures_util::future::join_all(lists).await;
    // The test server's own tools and the three asked for, in every answer.
    assert!(
        counts[0] >= 3 && counts.iter().all(|c| *c == counts[0]),
        "{counts:?}"
    );
    // The session's GET stream opens over HTTP/2 too.
    let stream = (h2.get(&url))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .expect("GET");
    assert_eq!(stream.version(), reqwest::Version::HTTP_2);
    assert_eq!(stream.status(), 200);
    drop(stream);
    // HTTP/1.1 on the same port.
    assert_eq!(tools_over_http1(&url).await, counts[0]);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_off_serves_http1_only() {
    let _suite = crate::suite::enter(module_path!());
    let gw = gateway("http2 = false").await;
    let url = gw.url();
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .expect("client");
    assert!(post(&h2, &url, None, INIT).await.is_err(), "HTTP/2 is off");
    assert!(tools_over_http1(&url).await >= 3);
    gw.stop().await;
}
