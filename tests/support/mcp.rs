//! A raw Streamable HTTP MCP client for tests: it shows every message on the wire, so tests can
//! check ids, streams and status codes exactly (the SDK clients hide those).
#![allow(dead_code)]

use futures_util::StreamExt;
use mcpmux::protocol::sse::{SseDecoder, SseEvent};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";
pub const WAIT: Duration = Duration::from_secs(20);

/// A session opened with `initialize`.
pub struct RawSession {
    pub http: reqwest::Client,
    pub url: String,
    pub sid: String,
    pub version: String,
    next_id: AtomicI64,
}

/// Read an HTTP response (JSON or SSE) into a channel of messages, as they arrive.
pub fn messages(resp: reqwest::Response) -> mpsc::Receiver<Value> {
    let (tx, rx) = mpsc::channel(256);
    let is_sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_sse {
        tokio::spawn(async move {
            let text = resp.text().await.unwrap_or_default();
            if let Ok(v) = serde_json::from_str::<Value>(&text) {
                let _ = tx.send(v).await;
            }
        });
        return rx;
    }
    let mut events = sse_events(resp);
    tokio::spawn(async move {
        while let Some(ev) = events.recv().await {
            if ev.data.trim().is_empty() {
                continue;
            }
            let Ok(v) = serde_json::from_str::<Value>(&ev.data) else {
                continue;
            };
            if tx.send(v).await.is_err() {
                return;
            }
        }
    });
    rx
}

/// Every SSE event of a response as sent (id, retry, data; priming events included); the
/// channel closes when the response ends. Dropping the receiver drops the connection.
pub fn sse_events(resp: reqwest::Response) -> mpsc::Receiver<SseEvent> {
    let (tx, rx) = mpsc::channel(256);
    tokio::spawn(async move {
        let mut dec = SseDecoder::new(64 << 20);
        let mut events = Vec::new();
        let mut body = resp.bytes_stream();
        while let Some(Ok(chunk)) = body.next().await {
            if dec.push(&chunk, &mut events).is_err() {
                return;
            }
            for ev in events.drain(..) {
                if tx.send(ev).await.is_err() {
                    return;
                }
            }
        }
    });
    rx
}

pub async fn recv(rx: &mut mpsc::Receiver<Value>) -> Option<Value> {
    tokio::time::timeout(WAIT, rx.recv()).await.ok().flatten()
}

impl RawSession {
    /// `initialize` + `notifications/initialized` with the given client capabilities.
    pub async fn open(url: &str, caps: Value) -> RawSession {
        Self::open_version(url, caps, "2025-11-25").await
    }

    pub async fn open_version(url: &str, caps: Value, version: &str) -> RawSession {
        Self::try_open(url, caps, version)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// `initialize` + `notifications/initialized`, reporting failure instead of panicking (for
    /// polling a gateway that is still starting).
    pub async fn try_open(url: &str, caps: Value, version: &str) -> Result<RawSession, String> {
        Self::try_open_with(reqwest::Client::new(), url, caps, version).await
    }

    /// A session whose every request carries `Authorization: Bearer <token>`.
    pub async fn open_as(url: &str, token: &str) -> RawSession {
        Self::try_open_as(url, token)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`RawSession::open_as`], or why it could not open.
    pub async fn try_open_as(url: &str, token: &str) -> Result<RawSession, String> {
        let mut headers = reqwest::header::HeaderMap::new();
        let value =
            reqwest::header::HeaderValue::from_str(&format!("Bearer {token}")).expect("a header value");
        headers.insert(reqwest::header::AUTHORIZATION, value);
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .expect("an HTTP client");
        Self::try_open_with(http, url, json!({}), "2025-11-25").await
    }

    /// [`RawSession::try_open`] with a given HTTP client.
    pub async fn try_open_with(
        http: reqwest::Client,
        url: &str,
        caps: Value,
        version: &str,
    ) -> Result<RawSession, String> {
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion": version, "capabilities": caps,
            "clientInfo": {"name":"raw-test","version":"0"}}});
        let resp = http
            .post(url)
            .header("accept", ACCEPT_BOTH)
            .header("content-type", "application/json")
            .body(init.to_string())
            .send()
            .await
            .map_err(|e| format!("initialize POST: {e}"))?;
        if resp.status() != 200 {
            return Err(format!("initialize status {}", resp.status()));
        }
        let sid = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .ok_or("initialize: no session id header")?
            .to_string();
        let text = resp.text().await.map_err(|e| format!("initialize body: {e}"))?;
        let body: Value = serde_json::from_str(&text).map_err(|e| format!("initialize JSON: {e}: {text}"))?;
        let negotiated = body["result"]["protocolVersion"]
            .as_str()
            .ok_or_else(|| format!("initialize: no protocolVersion in {body}"))?
            .to_string();
        let s = RawSession {
            http,
            url: url.to_string(),
            sid,
            version: negotiated,
            next_id: AtomicI64::new(1),
        };
        let status = s
            .post(json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
            .await
            .status();
        if status != 202 {
            return Err(format!("notifications/initialized status {status}"));
        }
        Ok(s)
    }

    /// The same session (its id and version) addressed at another endpoint (another replica).
    pub fn at(&self, url: &str) -> RawSession {
        RawSession {
            http: self.http.clone(),
            url: url.to_string(),
            sid: self.sid.clone(),
            version: self.version.clone(),
            next_id: AtomicI64::new(self.next_id.load(Ordering::Relaxed) + 1000),
        }
    }

    pub fn next_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// POST a raw JSON body with this session's headers.
    pub async fn post(&self, body: Value) -> reqwest::Response {
        self.http
            .post(&self.url)
            .header("accept", ACCEPT_BOTH)
            .header("content-type", "application/json")
            .header("mcp-session-id", &self.sid)
            .header("mcp-protocol-version", &self.version)
            .body(body.to_string())
            .send()
            .await
            .expect("POST")
    }

    /// Send a request and stream every message of its response.
    pub async fn stream(&self, id: Value, method: &str, params: Value) -> mpsc::Receiver<Value> {
        let resp = self
            .post(json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}))
            .await;
        assert!(resp.status().is_success(), "{method}: HTTP {}", resp.status());
        messages(resp)
    }

    /// Send a request; return (the response, the messages before it).
    pub async fn call_with(&self, id: Value, method: &str, params: Value) -> (Value, Vec<Value>) {
        let mut rx = self.stream(id.clone(), method, params).await;
        let mut before = Vec::new();
        while let Some(msg) = recv(&mut rx).await {
            if msg.get("id") == Some(&id) && (msg.get("result").is_some() || msg.get("error").is_some()) {
                return (msg, before);
            }
            before.push(msg);
        }
        panic!("no response to {method} (id {id}); got {before:?}");
    }

    /// Send a request with a fresh id and return its response.
    pub async fn call(&self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id());
        self.call_with(id, method, params).await.0
    }

    /// Call a tool and return the text of its first content block (panics on an error).
    pub async fn tool_text(&self, name: &str, args: Value) -> String {
        let resp = self
            .call("tools/call", json!({"name": name, "arguments": args}))
            .await;
        resp["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: unexpected response {resp}"))
            .to_string()
    }

    pub async fn notify(&self, method: &str, params: Value) -> u16 {
        self.post(json!({"jsonrpc":"2.0","method":method,"params":params}))
            .await
            .status()
            .as_u16()
    }

    /// Open the standalone GET stream.
    pub async fn get_stream(&self) -> mpsc::Receiver<Value> {
        let resp = self.get(None).await;
        assert_eq!(resp.status(), 200, "GET stream status");
        messages(resp)
    }

    /// A GET with this session's headers, resuming after `last_event_id` if given.
    pub async fn get(&self, last_event_id: Option<&str>) -> reqwest::Response {
        let mut req = self
            .http
            .get(&self.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &self.sid)
            .header("mcp-protocol-version", &self.version);
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        req.send().await.expect("GET")
    }

    /// Walk every page of a list and return the items.
    pub async fn list_all(&self, method: &str, field: &str) -> (Vec<Value>, usize) {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let resp = self.call(method, params).await;
            pages += 1;
            let result = &resp["result"];
            items.extend(
                result[field]
                    .as_array()
                    .unwrap_or_else(|| panic!("{method}: {resp}"))
                    .iter()
                    .cloned(),
            );
            match result["nextCursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => return (items, pages),
            }
            assert!(pages < 1000, "{method}: too many pages");
        }
    }

    pub async fn delete(&self) -> u16 {
        let resp = self
            .http
            .delete(&self.url)
            .header("mcp-session-id", &self.sid)
            .send()
            .await
            .expect("DELETE");
        resp.status().as_u16()
    }
}

/// Wait for a message matching `pred` on a stream, bounded.
pub async fn wait_for(rx: &mut mpsc::Receiver<Value>, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(v)) if pred(&v) => return v,
            Ok(Some(_)) => continue,
            _ => panic!("expected message never arrived"),
        }
    }
}

/// The message with `id` on a stream, waiting up to `within`: `Err` when it did not come in
/// time, `Ok(None)` when the stream ended without it.
pub async fn message_with_id(
    rx: &mut mpsc::Receiver<Value>,
    id: &Value,
    within: Duration,
) -> Result<Option<Value>, tokio::time::error::Elapsed> {
    tokio::time::timeout(within, async {
        while let Some(msg) = rx.recv().await {
            if msg["id"] == *id {
                return Some(msg);
            }
        }
        None
    })
    .await
}

/// Whether no message matching `pred` arrives within `window` (for "must not receive" checks).
pub async fn none_within(
    rx: &mut mpsc::Receiver<Value>,
    window: Duration,
    pred: impl Fn(&Value) -> bool,
) -> bool {
    let deadline = tokio::time::Instant::now() + window;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(v)) if pred(&v) => return false,
            Ok(Some(_)) => continue,
            _ => return true,
        }
    }
}
