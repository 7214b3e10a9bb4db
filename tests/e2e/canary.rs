//! The canary: every credential a host sends (API key, JWT, opaque token, a bad token, a token
//! in the query string) must appear nowhere mcpmux writes: its log at the most verbose level,
//! `/status`, every answer it gives (headers and bodies, errors included), what reaches a stdio
//! upstream, the bytes it sends to an HTTP upstream (recorded by a TCP tee in front of real
//! server-everything), and the audit log.

use crate::auth::{mint, mint_at, start_idp};
use crate::support::serve::ServeProcess;
use crate::support::*;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const API_KEY: &str = "canary-api-key-7f3a9c51";
const GARBAGE: &str = "canary-garbage-token-0d41e8";
const QUERY_TOKEN: &str = "canary-query-token-93b2aa";
const ACCEPT: &str = "application/json, text/event-stream";

/// A TCP tee: connections to the returned port are relayed to `target`, and every byte sent
/// toward `target` is kept (plain HTTP/1.1, so request lines, headers and bodies all show).
async fn tee(target: u16) -> (u16, Arc<parking_lot::Mutex<Vec<u8>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let Ok(outbound) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await else {
                continue;
            };
            let (mut in_read, mut in_write) = inbound.into_split();
            let (mut out_read, mut out_write) = outbound.into_split();
            let record = record.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                while let Ok(n) = in_read.read(&mut buf).await {
                    if n == 0 || out_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    record.lock().extend_from_slice(&buf[..n]);
                }
                let _ = out_write.shutdown().await;
            });
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut out_read, &mut in_write).await;
            });
        }
    });
    (port, seen)
}

/// Every answer of the test, status line, headers and body.
#[derive(Default)]
struct Transcript(String);

impl Transcript {
    async fn keep(&mut self, response: reqwest::Response) -> (u16, String, Option<String>) {
        let status = response.status().as_u16();
        let session = (response.headers().get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let _ = writeln!(self.0, "HTTP {status}");
        for (name, value) in response.headers() {
            let _ = writeln!(self.0, "{name}: {}", String::from_utf8_lossy(value.as_bytes()));
        }
        // Streams are read for a second only (a GET stream stays open).
        let body = tokio::time::timeout(Duration::from_secs(1), response.text())
            .await
            .map(|t| t.unwrap_or_default())
            .unwrap_or_default();
        let _ = writeln!(self.0, "\n{body}\n");
        (status, body, session)
    }
}

fn request(
    method: reqwest::Method,
    url: &str,
    token: Option<&str>,
    session: Option<&str>,
    body: Option<Value>,
) -> reqwest::RequestBuilder {
    let mut req = reqwest::Client::new()
        .request(method, url)
        .header("accept", ACCEPT)
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25");
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    if let Some(session) = session {
        req = req.header("mcp-session-id", session);
    }
    if let Some(body) = body {
        req = req.body(body.to_string());
    }
    req
}

fn rpc(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn initialize() -> Value {
    rpc(
        0,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "canary", "version": "1"}}),
    )
}

/// Everything a session-era host does with `token`: open, list, call both upstreams (one of
/// them refused by step-up for a low token), read, get a prompt, a GET stream, then close.
async fn session_work(t: &mut Transcript, url: &str, token: &str) -> Option<String> {
    let (status, _, session) = t
        .keep(
            request(reqwest::Method::POST, url, Some(token), None, Some(initialize()))
                .send()
                .await
                .unwrap(),
        )
        .await;
    if status != 200 {
        return None;
    }
    let sid = session.as_deref();
    let _ = t
        .keep(
            request(
                reqwest::Method::POST,
                url,
                Some(token),
                sid,
                Some(json!({"jsonrpc":"2.0","method":"notifications/initialized"})),
            )
            .send()
            .await
            .unwrap(),
        )
        .await;
    for body in [
        rpc(1, "tools/list", json!({})),
        rpc(
            2,
            "tools/call",
            json!({"name": "h__echo", "arguments": {"message": "through http"}}),
        ),
        rpc(
            3,
            "tools/call",
            json!({"name": "t__echo", "arguments": {"message": "through stdio"}}),
        ),
        rpc(4, "tools/call", json!({"name": "t__whoami", "arguments": {}})),
        rpc(
            5,
            "tools/call",
            json!({"name": "h__no-such-tool", "arguments": {}}),
        ),
        rpc(6, "resources/read", json!({"uri": "mcpmux://t/test://static/1"})),
        rpc(7, "prompts/get", json!({"name": "h__simple-prompt"})),
    ] {
        let _ = t
            .keep(
                request(reqwest::Method::POST, url, Some(token), sid, Some(body))
                    .send()
                    .await
                    .unwrap(),
            )
            .await;
    }
    let _ = t
        .keep(
            request(reqwest::Method::GET, url, Some(token), sid, None)
                .send()
                .await
                .unwrap(),
        )
        .await;
    session
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_credential_appears_anywhere_mcpmux_writes() {
    let _suite = crate::suite::enter(module_path!());
    let (_idp, issuer) = start_idp();
    let everything_port = free_port();
    let _everything = start_everything_http(everything_port);
    let (tee_port, sent_upstream) = tee(everything_port).await;
    let dir = scratch_dir("canary");
    let stdio_log = dir.join("stdio-upstream.jsonl");
    let servers = format!(
        "[servers.h]\nurl = \"http://127.0.0.1:{tee_port}/mcp\"\n\n{}\n\
         [auth]\nissuer = \"{issuer}\"\nscopes_supported = [\"mcp:tools\", \"mcp:write\"]\n\
         introspection = {{ endpoint = \"{issuer}/introspect-opaque\", client_id = \"mcpmux\", client_secret = \"s3cret\" }}\n\
         [[auth.api_keys]]\nname = \"ci\"\nkey = \"{API_KEY}\"\ngroups = [\"ci\"]\n\
         [[auth.step_up]]\ntools = [\"t__whoami\"]\nscopes = [\"mcp:write\"]\n\
         [[policy]]\nallow = [\"*\"]\ndeny = [\"h__trigger-*\"]\naudit_arguments = true\n\
         [audit]\npath = \"audit.jsonl\"\n",
        test_server_toml("t", &[], Some(&stdio_log)),
    );
    let mut gateway = ServeProcess::start(&dir, "", &servers, &dir, &[("RUST_LOG", "trace")]);
    let url = gateway.url();
    // Ready: both upstreams listed to the API key.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(s) = crate::support::mcp::RawSession::try_open_as(&url, API_KEY).await {
            let (tools, _) = s.list_all("tools/list", "tools").await;
            let text = Value::Array(tools).to_string();
            s.delete().await;
            if text.contains("h__echo") && text.contains("t__echo") {
                break;
            }
        }
        assert!(Instant::now() < deadline, "not ready:\n{}", gateway.log());
        assert!(
            gateway.guard.try_wait().is_none(),
            "gateway exited:\n{}",
            gateway.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let jwt_low = mint(&issuer, json!({"aud": url, "sub": "alice", "scope": "mcp:tools"})).await;
    let jwt_full = mint(
        &issuer,
        json!({"aud": url, "sub": "alice", "scope": "mcp:tools mcp:write"}),
    )
    .await;
    let expired = mint(
        &issuer,
        json!({"aud": url, "scope": "mcp:tools", "expires_in": -300}),
    )
    .await;
    let wrong_aud = mint(
        &issuer,
        json!({"aud": "http://elsewhere/mcp", "scope": "mcp:tools"}),
    )
    .await;
    let opaque = mint_at(
        &issuer,
        "mint-opaque",
        json!({"aud": url, "sub": "bob", "scope": "mcp:tools mcp:write"}),
    )
    .await;
    let secrets: Vec<String> = vec![
        API_KEY.into(),
        GARBAGE.into(),
        QUERY_TOKEN.into(),
        jwt_low.clone(),
        jwt_full.clone(),
        expired.clone(),
        wrong_aud.clone(),
        opaque.clone(),
    ];

    let mut t = Transcript::default();
    let key_session = session_work(&mut t, &url, API_KEY)
        .await
        .expect("the API key opens a session");
    let low_session = session_work(&mut t, &url, &jwt_low)
        .await
        .expect("a JWT opens a session");
    let opaque_session = session_work(&mut t, &url, &opaque)
        .await
        .expect("an opaque token opens a session");
    // The full token continues the low token's session (same principal) after step-up.
    let body = rpc(9, "tools/call", json!({"name": "t__whoami", "arguments": {}}));
    let (status, _, _) = t
        .keep(
            request(
                reqwest::Method::POST,
                &url,
                Some(&jwt_full),
                Some(&low_session),
                Some(body),
            )
            .send()
            .await
            .unwrap(),
        )
        .await;
    assert_eq!(status, 200);
    // Refusals: bad tokens, another principal's session, a token in the query string.
    for bad in [GARBAGE, expired.as_str(), wrong_aud.as_str()] {
        let (status, _, _) = t
            .keep(
                request(reqwest::Method::POST, &url, Some(bad), None, Some(initialize()))
                    .send()
                    .await
                    .unwrap(),
            )
            .await;
        assert_eq!(status, 401);
    }
    let (status, _, _) = t
        .keep(
            request(
                reqwest::Method::POST,
                &url,
                Some(&jwt_low),
                Some(&key_session),
                Some(rpc(1, "tools/list", json!({}))),
            )
            .send()
            .await
            .unwrap(),
        )
        .await;
    assert_eq!(status, 404, "another principal's session");
    let in_query = format!("{url}?access_token={QUERY_TOKEN}");
    let (status, _, _) = t
        .keep(
            request(reqwest::Method::POST, &in_query, None, None, Some(initialize()))
                .send()
                .await
                .unwrap(),
        )
        .await;
    assert_eq!(status, 400);
    // The stateless era: a request carries its own envelope.
    let modern = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "h__echo", "arguments": {"message": "modern"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {},
                  "io.modelcontextprotocol/clientInfo": {"name": "canary", "version": "1"}}}});
    let req = reqwest::Client::new()
        .post(&url)
        .bearer_auth(&jwt_full)
        .header("accept", ACCEPT)
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "h__echo")
        .body(modern.to_string());
    let (status, body, _) = t.keep(req.send().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    // Legacy SSE with a token, then every session closed.
    let sse = url.trim_end_matches("/mcp").to_string() + "/sse";
    let _ = t
        .keep(
            request(reqwest::Method::GET, &sse, Some(&opaque), None, None)
                .send()
                .await
                .unwrap(),
        )
        .await;
    for (token, session) in [
        (API_KEY, &key_session),
        (jwt_full.as_str(), &low_session),
        (opaque.as_str(), &opaque_session),
    ] {
        let _ = t
            .keep(
                request(reqwest::Method::DELETE, &url, Some(token), Some(session), None)
                    .send()
                    .await
                    .unwrap(),
            )
            .await;
    }
    let status_doc = reqwest::get(format!("http://127.0.0.1:{}/status", gateway.port))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();

    gateway.signal(libc::SIGTERM);
    assert!(gateway.wait_exit(Duration::from_secs(30)).await.success());
    let log = gateway.log();
    let upstream_http = String::from_utf8_lossy(&sent_upstream.lock()).into_owned();
    let upstream_stdio = std::fs::read_to_string(&stdio_log).unwrap_or_default();
    let mut written = vec![
        ("the gateway log", log.clone()),
        ("/status", status_doc),
        ("the answers", t.0.clone()),
        ("the HTTP upstream's requests", upstream_http.clone()),
        ("the stdio upstream's messages", upstream_stdio.clone()),
    ];
    // Whatever else the gateway wrote beside its configuration (the audit log among them); the
    // configuration itself holds the API key by the operator's hand.
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let path = entry.path();
        if path != gateway.config {
            written.push((
                "a file in the gateway's directory",
                std::fs::read_to_string(&path).unwrap_or_default(),
            ));
        }
    }
    // They were all written to (a canary over empty text proves nothing).
    let audit = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap_or_default();
    assert!(
        audit.contains("\"decision\"") && audit.contains("through http") && audit.contains("\"denied\""),
        "the audit log holds decisions, arguments and refusals:\n{audit}"
    );
    assert!(
        log.contains("TRACE") && log.contains("tools/call"),
        "trace log:\n{log}"
    );
    assert!(
        upstream_http.contains("POST /mcp") && upstream_http.contains("through http"),
        "{upstream_http}"
    );
    assert!(upstream_stdio.contains("through stdio"), "{upstream_stdio}");
    for answer in [
        "through http",
        "HTTP 401",
        "HTTP 404",
        "HTTP 400",
        "insufficient_scope",
        "modern",
    ] {
        assert!(t.0.contains(answer), "no {answer:?} among the answers:\n{}", t.0);
    }
    assert!(
        upstream_http
            .to_ascii_lowercase()
            .matches("authorization:")
            .count()
            == 0,
        "a host's Authorization header reached the upstream:\n{upstream_http}"
    );
    for secret in &secrets {
        // A JWT's signature alone is enough to give it away.
        let needle = secret.rsplit('.').next().unwrap_or(secret);
        for (place, text) in &written {
            assert!(
                !text.contains(needle),
                "a credential ({}…) is in {place}:\n{text}",
                &secret[..secret.len().min(12)]
            );
        }
    }
}
