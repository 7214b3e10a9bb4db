//! A minimal MCP client for the load driver: open a session (initialize and
//! `notifications/initialized`), sequential requests answered as JSON or SSE, the GET stream,
//! DELETE; or, for a `stdio:COMMAND` endpoint, the same over a child process's pipes.

use crate::stdio::StdioLink;
use futures_util::StreamExt;
use http::{header, StatusCode};
use mcpmux::protocol::sse::{SseDecoder, SseEvent};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The protocol revision the driver negotiates (the session era).
pub const PROTOCOL: &str = "2025-11-25";
const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
/// Largest SSE event the driver accepts (a 10,000-tool list is a few MiB).
const MAX_EVENT_BYTES: usize = 64 << 20;

/// Where the sessions go: one shared HTTP client (keep-alive pool) and the endpoint URL, or the
/// command that starts a stdio server (one child per session).
#[derive(Clone)]
pub struct Endpoint {
    http: reqwest::Client,
    url: Arc<str>,
    /// Where sessions are opened, when not at `url` (`--open-at`).
    open_url: Option<Arc<str>>,
    stdio: Option<Arc<str>>,
    timeout: Duration,
}

/// A response picked out of a reply, and when it had been read.
pub struct Reply {
    pub msg: Value,
    pub at: Instant,
}

/// An open MCP session (or a session-less exchange, when the server gave no session id).
pub struct Session {
    endpoint: Endpoint,
    id: Option<String>,
    /// The child process of a stdio session.
    stdio: Option<tokio::sync::Mutex<StdioLink>>,
}

fn short(text: &str) -> String {
    const MAX: usize = 300;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

impl Endpoint {
    /// `timeout` bounds every exchange (a request and its reply). A `stdio:` URL names a command.
    /// With `bearer`, every request carries it as `Authorization: Bearer`.
    pub fn new(url: &str, timeout: Duration, bearer: Option<&str>) -> Result<Self, String> {
        let mut headers = header::HeaderMap::new();
        if let Some(token) = bearer {
            let value = header::HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| "--bearer must be printable ASCII".to_string())?;
            headers.insert(header::AUTHORIZATION, value);
        }
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .no_proxy()
            .http1_only()
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(600))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Endpoint {
            http,
            url: url.into(),
            open_url: None,
            stdio: url.strip_prefix("stdio:").map(Into::into),
            timeout,
        })
    }

    /// Sessions opened at `url` (when given) rather than at the endpoint.
    pub fn opening_at(mut self, url: Option<&str>) -> Self {
        self.open_url = url.map(Into::into);
        self
    }

    fn post(&self, session: Option<&str>, body: String) -> reqwest::RequestBuilder {
        let url = match (session, &self.open_url) {
            (None, Some(open_url)) => open_url,
            _ => &self.url,
        };
        let mut req = self
            .http
            .post(&**url)
            .header(header::ACCEPT, "application/json, text/event-stream")
            .header(header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(sid) = session {
            req = req.header(SESSION_HEADER, sid).header(VERSION_HEADER, PROTOCOL);
        }
        req
    }

    /// initialize, keep the session id, then `notifications/initialized`.
    pub async fn open(&self, client_name: &str) -> Result<Session, String> {
        let params = json!({
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": client_name, "version": env!("CARGO_PKG_VERSION")},
        });
        if let Some(command) = &self.stdio {
            return self.open_stdio(command, &params).await;
        }
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params});
        let exchange = async {
            let resp = self
                .post(None, body.to_string())
                .send()
                .await
                .map_err(|e| format!("initialize: {e}"))?;
            let sid = resp
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let reply = read_reply(resp, 0)
                .await
                .map_err(|e| format!("initialize: {e}"))?;
            Ok::<_, String>((sid, reply))
        };
        let (sid, reply) = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| format!("initialize: no reply within {:?}", self.timeout))??;
        if reply.msg.get("result").is_none() {
            return Err(format!("initialize failed: {}", short(&reply.msg.to_string())));
        }
        let session = Session {
            endpoint: self.clone(),
            id: sid,
            stdio: None,
        };
        session.notify("notifications/initialized").await?;
        Ok(session)
    }

    async fn open_stdio(&self, command: &str, params: &Value) -> Result<Session, String> {
        let mut link = StdioLink::spawn(command)?;
        let (init, _) = tokio::time::timeout(self.timeout, link.request(0, "initialize", params))
            .await
            .map_err(|_| format!("initialize: no reply within {:?}", self.timeout))??;
        if init.get("result").is_none() {
            return Err(format!("initialize failed: {}", short(&init.to_string())));
        }
        link.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(Session {
            endpoint: self.clone(),
            id: None,
            stdio: Some(tokio::sync::Mutex::new(link)),
        })
    }

    /// Keep trying to open a session until one opens or `wait` has passed (a server starting).
    pub async fn open_when_up(&self, client_name: &str, wait: Duration) -> Result<Session, String> {
        let deadline = Instant::now() + wait;
        loop {
            match self.open(client_name).await {
                Ok(s) => return Ok(s),
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }
}

impl Session {
    /// The session id the server gave, if any.
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// Send a request and return the response with the same `id` (checked), from JSON or SSE.
    /// A JSON-RPC error response is an `Err`.
    pub async fn request(&self, id: u64, method: &str, params: &Value) -> Result<Reply, String> {
        if let Some(link) = &self.stdio {
            let mut link = link.lock().await;
            let (msg, at) = tokio::time::timeout(self.endpoint.timeout, link.request(id, method, params))
                .await
                .map_err(|_| format!("{method} id {id}: no reply within {:?}", self.endpoint.timeout))??;
            if let Some(err) = msg.get("error") {
                return Err(format!("{method} id {id}: error {}", short(&err.to_string())));
            }
            return Ok(Reply { msg, at });
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let exchange = async {
            let resp = self
                .endpoint
                .post(self.id(), body.to_string())
                .send()
                .await
                .map_err(|e| format!("POST {method}: {e}"))?;
            read_reply(resp, id).await
        };
        let reply = tokio::time::timeout(self.endpoint.timeout, exchange)
            .await
            .map_err(|_| format!("{method} id {id}: no reply within {:?}", self.endpoint.timeout))??;
        if let Some(err) = reply.msg.get("error") {
            return Err(format!("{method} id {id}: error {}", short(&err.to_string())));
        }
        Ok(reply)
    }

    /// Send a notification; the server must answer 202 (or another 2xx).
    pub async fn notify(&self, method: &str) -> Result<(), String> {
        if let Some(link) = &self.stdio {
            return link
                .lock()
                .await
                .send(&json!({"jsonrpc": "2.0", "method": method}))
                .await;
        }
        let body = json!({"jsonrpc": "2.0", "method": method}).to_string();
        let send = self.endpoint.post(self.id(), body).send();
        let resp = tokio::time::timeout(self.endpoint.timeout, send)
            .await
            .map_err(|_| format!("{method}: no answer"))?
            .map_err(|e| format!("{method}: {e}"))?;
        let status = resp.status();
        // Read the (empty) body so the connection goes back to the pool.
        let _ = resp.bytes().await;
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("{method}: HTTP {status}"))
        }
    }

    /// Open the standalone GET stream; resolves once the server answered with an event stream.
    pub async fn listen(&self) -> Result<reqwest::Response, String> {
        if self.stdio.is_some() {
            return Err("a stdio server has no GET stream".into());
        }
        let mut req = self
            .endpoint
            .http
            .get(&*self.endpoint.url)
            .header(header::ACCEPT, "text/event-stream");
        if let Some(sid) = self.id() {
            req = req.header(SESSION_HEADER, sid).header(VERSION_HEADER, PROTOCOL);
        }
        let resp = tokio::time::timeout(self.endpoint.timeout, req.send())
            .await
            .map_err(|_| "GET stream: no answer".to_string())?
            .map_err(|e| format!("GET stream: {e}"))?;
        if resp.status() != StatusCode::OK {
            return Err(format!("GET stream: HTTP {}", resp.status()));
        }
        Ok(resp)
    }

    /// End the session with DELETE (a server without sessions, or one that refuses DELETE with
    /// 405 as the spec allows, is fine).
    pub async fn close(self) -> Result<(), String> {
        if let Some(link) = self.stdio {
            link.into_inner().close().await;
            return Ok(());
        }
        let Some(sid) = self.id.as_deref() else {
            return Ok(());
        };
        let send = self
            .endpoint
            .http
            .delete(&*self.endpoint.url)
            .header(SESSION_HEADER, sid)
            .header(VERSION_HEADER, PROTOCOL)
            .send();
        let resp = tokio::time::timeout(self.endpoint.timeout, send)
            .await
            .map_err(|_| "DELETE: no answer".to_string())?
            .map_err(|e| format!("DELETE: {e}"))?;
        let status = resp.status();
        let _ = resp.bytes().await;
        if status.is_success() || status == StatusCode::METHOD_NOT_ALLOWED {
            Ok(())
        } else {
            Err(format!("DELETE: HTTP {status}"))
        }
    }
}

/// The JSON-RPC response to `id` in a POST reply: a JSON body, or the first SSE event holding it
/// (priming events with empty data, notifications and server requests are skipped). Its time is
/// when its bytes arrived, before decoding. The rest of an SSE stream is read to its end so the
/// connection can be reused.
async fn read_reply(resp: reqwest::Response, id: u64) -> Result<Reply, String> {
    let status = resp.status();
    let content_type = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    if !status.is_success() {
        let text = resp.text().await.unwrap_or_default();
        return Err(format!("HTTP {status}: {}", short(&text)));
    }
    if content_type.starts_with("text/event-stream") {
        return read_sse_reply(resp, id).await;
    }
    if !content_type.starts_with("application/json") {
        return Err(format!("HTTP {status} with content type {content_type:?}"));
    }
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| format!("reading the reply: {e}"))?;
    let at = Instant::now();
    let msg: Value = serde_json::from_slice(&bytes).map_err(|e| {
        format!(
            "reply is not JSON ({e}): {}",
            short(&String::from_utf8_lossy(&bytes))
        )
    })?;
    check_id(&msg, id)?;
    Ok(Reply { msg, at })
}

async fn read_sse_reply(resp: reqwest::Response, id: u64) -> Result<Reply, String> {
    let mut stream = resp.bytes_stream();
    let mut decoder = SseDecoder::new(MAX_EVENT_BYTES);
    let mut events = Vec::new();
    let mut found = None;
    while found.is_none() {
        let Some(chunk) = stream.next().await else {
            return Err(format!("SSE reply ended without a response to id {id}"));
        };
        let chunk = chunk.map_err(|e| format!("SSE reply broke: {e}"))?;
        let arrived = Instant::now();
        decoder
            .push(&chunk, &mut events)
            .map_err(|e| format!("SSE reply: {e}"))?;
        for event in events.drain(..) {
            if found.is_none() {
                found = response_in(&event, id)?.map(|msg| (msg, arrived));
            }
        }
    }
    // The stream should end right after the response; a broken tail does not undo the answer.
    while let Some(Ok(_)) = stream.next().await {}
    let (msg, at) = found.ok_or_else(|| format!("no response to id {id}"))?;
    Ok(Reply { msg, at })
}

/// The event's message when it is the response to `id`; `None` for anything to skip.
fn response_in(event: &SseEvent, id: u64) -> Result<Option<Value>, String> {
    if event.data.trim().is_empty() {
        return Ok(None);
    }
    let msg: Value = serde_json::from_str(&event.data)
        .map_err(|e| format!("SSE event is not JSON ({e}): {}", short(&event.data)))?;
    if msg.get("method").is_some() {
        return Ok(None);
    }
    check_id(&msg, id)?;
    Ok(Some(msg))
}

fn check_id(msg: &Value, id: u64) -> Result<(), String> {
    match msg.get("id").and_then(Value::as_u64) {
        Some(got) if got == id => Ok(()),
        _ => Err(format!(
            "reply id {} instead of {id}",
            msg.get("id").unwrap_or(&Value::Null)
        )),
    }
}

/// Decode a stream's events as JSON-RPC messages, skipping priming events and bad data.
pub fn messages_in(events: &[SseEvent]) -> impl Iterator<Item = Value> + '_ {
    events
        .iter()
        .filter(|e| !e.data.trim().is_empty())
        .filter_map(|e| serde_json::from_str(&e.data).ok())
}

/// A fresh decoder for a GET stream.
pub fn stream_decoder() -> SseDecoder {
    SseDecoder::new(MAX_EVENT_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(data: &str) -> SseEvent {
        SseEvent {
            data: data.into(),
            ..SseEvent::default()
        }
    }

    #[test]
    fn priming_events_and_notifications_are_skipped_and_ids_checked() {
        assert!(matches!(response_in(&event(""), 5), Ok(None)));
        let note = event(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#);
        assert!(matches!(response_in(&note, 5), Ok(None)));
        let ping = event(r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#);
        assert!(
            matches!(response_in(&ping, 5), Ok(None)),
            "a server request is not the response"
        );
        let ok = event(r#"{"jsonrpc":"2.0","id":5,"result":{}}"#);
        assert!(matches!(response_in(&ok, 5), Ok(Some(_))));
        assert!(response_in(&ok, 6).is_err(), "another id is an error");
        assert!(response_in(&event("{not json"), 5).is_err());
        assert!(
            check_id(&serde_json::json!({"id": "5"}), 5).is_err(),
            "a string id is not the number sent"
        );
    }
}
