//! Streamable HTTP upstreams: each POST in its own task (JSON or SSE replies, priming events
//! skipped), the session id and protocol version headers, the GET stream for server-initiated
//! messages, session-expiry detection for a transparent re-initialize, and DELETE on stop.

use super::connection::Inbound;
use super::handshake::{initialize_request, initialized_notification, read_initialize_result};
use super::{parse_frame, ServerFacts};
use crate::config::Secret;
use crate::error::UpstreamError;
use crate::protocol::sse::SseDecoder;
use crate::protocol::{parse_body, Body, Message, ParseError, ResponsePayload};
use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::StatusCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const GET_RETRY_MAX: Duration = Duration::from_secs(30);
const DELETE_TIMEOUT: Duration = Duration::from_secs(2);
/// Bound on each step of opening a session (initialize, GET stream, initialized).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// A Streamable HTTP client for one upstream.
pub struct HttpTransport {
    name: Arc<str>,
    client: reqwest::Client,
    url: reqwest::Url,
    headers: HeaderMap,
    session_id: Option<String>,
    /// Bumps each time a new upstream session is opened.
    generation: u64,
    protocol_version: Option<String>,
    inbound: mpsc::Sender<Inbound>,
    max_event_bytes: usize,
    get_stream: Option<CancellationToken>,
    stop: CancellationToken,
}

impl HttpTransport {
    pub fn new(
        name: Arc<str>,
        url: &str,
        configured: &[(String, Secret)],
        max_event_bytes: usize,
        inbound: mpsc::Sender<Inbound>,
    ) -> Result<Self, UpstreamError> {
        let bad = |reason: String| UpstreamError::Unavailable {
            name: name.to_string(),
            reason,
        };
        let url = reqwest::Url::parse(url).map_err(|e| bad(format!("bad url: {e}")))?;
        let mut headers = HeaderMap::new();
        for (k, v) in configured {
            let key = HeaderName::from_bytes(k.as_bytes()).map_err(|e| bad(format!("header {k}: {e}")))?;
            let mut value =
                HeaderValue::from_str(v.expose()).map_err(|_| bad(format!("header {k}: invalid value")))?;
            value.set_sensitive(true);
            headers.insert(key, value);
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| bad(format!("http client: {e}")))?;
        Ok(HttpTransport {
            name,
            client,
            url,
            headers,
            session_id: None,
            generation: 0,
            protocol_version: None,
            inbound,
            max_event_bytes,
            get_stream: None,
            stop: CancellationToken::new(),
        })
    }

    /// Which upstream session requests are being sent in.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Open a session, in order: `initialize` (its answer and session id), the GET stream, then
    /// `initialized` acknowledged by the server. Only then may requests follow, so a server that
    /// registers tools when it sees `initialized` lists them all, and any list_changed it sends
    /// has a stream to arrive on.
    pub async fn establish_session(&mut self, id: u64) -> Result<ServerFacts, String> {
        self.session_id = None;
        if let Some(old) = self.get_stream.take() {
            old.cancel();
        }
        let resp = self.post_now(initialize_request(id).to_json()).await?;
        let sid = resp
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let payload = tokio::time::timeout(
            HANDSHAKE_TIMEOUT,
            read_reply(&self.name, resp, id, self.max_event_bytes),
        )
        .await
        .map_err(|_| "no answer to initialize in time".to_string())??;
        let facts = read_initialize_result(payload)?;
        self.session_id = sid;
        self.protocol_version = Some(facts.protocol_version.clone());
        self.generation += 1;
        self.open_get_stream().await;
        self.post_now(initialized_notification().to_json()).await?;
        Ok(facts)
    }

    /// POST one frame and wait for the response head; non-2xx is an error.
    async fn post_now(&self, frame: String) -> Result<reqwest::Response, String> {
        let req = self
            .request(reqwest::Method::POST)
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(frame);
        let resp = tokio::time::timeout(HANDSHAKE_TIMEOUT, req.send())
            .await
            .map_err(|_| "no HTTP answer in time".to_string())?
            .map_err(|e| format!("request failed: {}", error_chain(&e)))?;
        if !resp.status().is_success() {
            let status = resp.status();
            let body = read_limited(resp, 500).await;
            return Err(format!("HTTP {status}: {}", String::from_utf8_lossy(&body)));
        }
        Ok(resp)
    }

    fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        let mut req = self
            .client
            .request(method, self.url.clone())
            .headers(self.headers.clone());
        if let Some(sid) = &self.session_id {
            req = req.header(SESSION_HEADER, sid);
        }
        if let Some(v) = &self.protocol_version {
            req = req.header(VERSION_HEADER, v);
        }
        req
    }

    /// POST one frame; replies flow back to the actor as [`Inbound`] items.
    pub fn send(&mut self, frame: String, upstream_id: Option<u64>) -> Result<(), UpstreamError> {
        let req = self
            .request(reqwest::Method::POST)
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(frame.clone());
        let post = Post {
            name: self.name.clone(),
            inbound: self.inbound.clone(),
            upstream_id,
            generation: self.generation,
            max_event_bytes: self.max_event_bytes,
            stop: self.stop.clone(),
        };
        tokio::spawn(post.run(req, frame));
        Ok(())
    }

    /// Open the standalone GET stream for server-initiated messages; returns once the server
    /// has answered it (or refused it), so nothing sent afterwards can overtake it.
    async fn open_get_stream(&mut self) {
        let token = self.stop.child_token();
        self.get_stream = Some(token.clone());
        let req = self
            .request(reqwest::Method::GET)
            .header(ACCEPT, "text/event-stream");
        let getter = GetStream {
            name: self.name.clone(),
            inbound: self.inbound.clone(),
            max_event_bytes: self.max_event_bytes,
        };
        let first = match req.try_clone() {
            Some(first) => tokio::time::timeout(HANDSHAKE_TIMEOUT, first.send()).await.ok(),
            None => None,
        };
        let first = match first {
            Some(Ok(resp)) if resp.status().is_success() => Some(resp),
            Some(Ok(resp)) => {
                tracing::debug!(upstream = %self.name, status = %resp.status(), "upstream offers no GET stream");
                return;
            }
            _ => None,
        };
        tokio::spawn(async move {
            tokio::select! {
                _ = getter.run(req, first) => {}
                _ = token.cancelled() => {}
            }
        });
    }

    /// Stop every stream and end the upstream session with DELETE.
    pub async fn stop(self) {
        self.stop.cancel();
        if self.session_id.is_some() {
            let req = self.request(reqwest::Method::DELETE).timeout(DELETE_TIMEOUT);
            match req.send().await {
                Ok(resp) => {
                    tracing::debug!(upstream = %self.name, status = %resp.status(), "upstream session deleted")
                }
                Err(err) => {
                    tracing::debug!(upstream = %self.name, %err, "DELETE of the upstream session failed")
                }
            }
        }
    }
}

struct Post {
    name: Arc<str>,
    inbound: mpsc::Sender<Inbound>,
    upstream_id: Option<u64>,
    generation: u64,
    max_event_bytes: usize,
    stop: CancellationToken,
}

impl Post {
    async fn run(self, req: reqwest::RequestBuilder, frame: String) {
        tokio::select! {
            _ = self.stop.cancelled() => {}
            _ = self.exchange(req, frame) => {}
        }
    }

    fn fail(&self, error: UpstreamError) -> Option<Inbound> {
        match self.upstream_id {
            Some(upstream_id) => Some(Inbound::PostFailed { upstream_id, error }),
            None => {
                tracing::warn!(upstream = %self.name, %error, "upstream refused a notification or response");
                None
            }
        }
    }

    async fn emit(&self, item: Option<Inbound>) -> bool {
        match item {
            Some(item) => self.inbound.send(item).await.is_ok(),
            None => true,
        }
    }

    async fn exchange(&self, req: reqwest::RequestBuilder, frame: String) {
        let resp = match req.send().await {
            Ok(resp) => resp,
            Err(err) => {
                let reason = format!("request failed: {}", error_chain(&err));
                let error = UpstreamError::Unavailable {
                    name: self.name.to_string(),
                    reason,
                };
                self.emit(self.fail(error)).await;
                return;
            }
        };
        let status = resp.status();
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        if !status.is_success() {
            let body = read_limited(resp, 4096).await;
            if session_expired(status, &body) {
                let item = Inbound::SessionExpired {
                    frame,
                    upstream_id: self.upstream_id,
                    generation: self.generation,
                };
                self.emit(Some(item)).await;
                return;
            }
            let detail: String = String::from_utf8_lossy(&body).chars().take(500).collect();
            let error = UpstreamError::Http {
                name: self.name.to_string(),
                status: status.as_u16(),
                detail,
            };
            self.emit(self.fail(error)).await;
            return;
        }
        if content_type.starts_with("text/event-stream") {
            self.read_sse(resp).await;
        } else if content_type.starts_with("application/json") {
            match json_messages(resp, self.max_event_bytes).await {
                Ok(messages) => {
                    for msg in messages {
                        let via = self.upstream_id;
                        if !self.emit(Some(Inbound::Message { msg, via })).await {
                            return;
                        }
                    }
                }
                Err(err) => {
                    let detail = format!("unreadable JSON reply: {err}");
                    let error = UpstreamError::Protocol {
                        name: self.name.to_string(),
                        detail,
                    };
                    self.emit(self.fail(error)).await;
                }
            }
        } else if self.upstream_id.is_some() && status != StatusCode::ACCEPTED {
            let detail = format!("reply with unexpected content type {content_type:?}");
            self.emit(self.fail(UpstreamError::Protocol {
                name: self.name.to_string(),
                detail,
            }))
            .await;
        }
    }

    async fn read_sse(&self, resp: reqwest::Response) {
        let messages = sse_messages(self.name.clone(), resp, self.max_event_bytes);
        futures_util::pin_mut!(messages);
        let mut answered = self.upstream_id.is_none();
        while let Some(msg) = messages.next().await {
            if let Message::Response { id: Some(id), .. } = &msg {
                answered |= id.as_u64() == self.upstream_id;
            }
            let via = self.upstream_id;
            if !self.emit(Some(Inbound::Message { msg, via })).await {
                return;
            }
            if answered && self.upstream_id.is_some() {
                return;
            }
        }
        if !answered {
            let reason = "the reply stream ended before the response".to_string();
            self.emit(self.fail(UpstreamError::Unavailable {
                name: self.name.to_string(),
                reason,
            }))
            .await;
        }
    }
}

struct GetStream {
    name: Arc<str>,
    inbound: mpsc::Sender<Inbound>,
    max_event_bytes: usize,
}

impl GetStream {
    async fn run(self, req: reqwest::RequestBuilder, first: Option<reqwest::Response>) {
        let mut backoff = Duration::from_millis(500);
        if let Some(resp) = first {
            if !self.read(resp).await {
                return;
            }
        }
        loop {
            let Some(attempt) = req.try_clone() else { return };
            match attempt.send().await {
                Ok(resp) if resp.status().is_success() => {
                    backoff = Duration::from_millis(500);
                    if !self.read(resp).await {
                        return;
                    }
                }
                Ok(resp) => {
                    tracing::debug!(upstream = %self.name, status = %resp.status(), "upstream offers no GET stream");
                    return;
                }
                Err(err) => {
                    tracing::debug!(upstream = %self.name, err = %error_chain(&err), "GET stream failed")
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(GET_RETRY_MAX);
        }
    }

    /// Read one GET stream; false when the actor is gone.
    async fn read(&self, resp: reqwest::Response) -> bool {
        let messages = sse_messages(self.name.clone(), resp, self.max_event_bytes);
        futures_util::pin_mut!(messages);
        while let Some(msg) = messages.next().await {
            if self
                .inbound
                .send(Inbound::Message { msg, via: None })
                .await
                .is_err()
            {
                return false;
            }
        }
        true
    }
}

/// Read the response to request `id` from a JSON or SSE reply.
async fn read_reply(
    name: &Arc<str>,
    resp: reqwest::Response,
    id: u64,
    max_event_bytes: usize,
) -> Result<ResponsePayload, String> {
    let is_sse = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("text/event-stream"));
    let answer = |msg: Message| match msg {
        Message::Response {
            id: Some(rid),
            payload,
        } if rid.as_u64() == Some(id) => Some(payload),
        _ => None,
    };
    if !is_sse {
        let messages = json_messages(resp, max_event_bytes)
            .await
            .map_err(|e| format!("unreadable reply: {e}"))?;
        return messages
            .into_iter()
            .find_map(answer)
            .ok_or_else(|| "reply lacks the response".into());
    }
    let messages = sse_messages(name.clone(), resp, max_event_bytes);
    futures_util::pin_mut!(messages);
    while let Some(msg) = messages.next().await {
        if let Some(payload) = answer(msg) {
            return Ok(payload);
        }
    }
    Err("reply stream ended before the response".into())
}

/// The JSON-RPC messages of an SSE body as they arrive. Priming events (empty data) and frames
/// that are not messages are skipped; a broken stream or an oversized event ends it (logged).
fn sse_messages(
    name: Arc<str>,
    resp: reqwest::Response,
    max_event_bytes: usize,
) -> impl futures_util::Stream<Item = Message> + Send {
    async_stream::stream! {
        let mut decoder = SseDecoder::new(max_event_bytes);
        let mut events = Vec::new();
        let mut body = resp.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = match chunk {
                Ok(c) => c,
                Err(err) => {
                    tracing::debug!(upstream = %name, err = %error_chain(&err), "SSE stream broke");
                    break;
                }
            };
            if let Err(err) = decoder.push(&chunk, &mut events) {
                tracing::warn!(upstream = %name, %err, "dropping an SSE stream");
                break;
            }
            for event in events.drain(..) {
                if event.data.trim().is_empty() {
                    continue;
                }
                if let Some(msg) = parse_frame(&name, &event.data) {
                    yield msg;
                }
            }
        }
    }
}

/// The JSON-RPC messages of a JSON body: one message, or the valid entries of a batch.
async fn json_messages(resp: reqwest::Response, limit: usize) -> Result<Vec<Message>, ParseError> {
    let body = read_limited(resp, limit).await;
    Ok(match parse_body(&String::from_utf8_lossy(&body))? {
        Body::Single(msg) => vec![msg],
        Body::Batch(items) => items.into_iter().flatten().collect(),
    })
}

fn session_expired(status: StatusCode, body: &[u8]) -> bool {
    status == StatusCode::NOT_FOUND
        || (status == StatusCode::BAD_REQUEST
            && String::from_utf8_lossy(body)
                .to_ascii_lowercase()
                .contains("session"))
}

async fn read_limited(resp: reqwest::Response, limit: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut body = resp.bytes_stream();
    while let Some(Ok(chunk)) = body.next().await {
        let room = limit.saturating_sub(out.len());
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if out.len() >= limit {
            break;
        }
    }
    out
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
