//! Streamable HTTP upstreams: each POST in its own task (JSON or SSE replies, priming events
//! skipped), the session id and protocol version headers, the GET stream for server-initiated
//! messages, session-expiry detection for a transparent re-initialize, and DELETE on stop.

use super::connection::Inbound;
use super::parse_frame;
use crate::config::Secret;
use crate::error::UpstreamError;
use crate::protocol::sse::SseDecoder;
use crate::protocol::{parse_body, Body, Message};
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

/// A Streamable HTTP client for one upstream.
pub struct HttpTransport {
    name: Arc<str>,
    client: reqwest::Client,
    url: reqwest::Url,
    headers: HeaderMap,
    session_id: Option<String>,
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
            protocol_version: None,
            inbound,
            max_event_bytes,
            get_stream: None,
            stop: CancellationToken::new(),
        })
    }

    pub fn set_session_id(&mut self, sid: Option<String>) {
        self.session_id = sid;
    }

    pub fn set_protocol_version(&mut self, version: &str) {
        self.protocol_version = Some(version.to_string());
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
            had_session: self.session_id.is_some(),
            max_event_bytes: self.max_event_bytes,
            stop: self.stop.clone(),
        };
        tokio::spawn(post.run(req, frame));
        Ok(())
    }

    /// (Re)open the standalone GET stream for server-initiated messages.
    pub fn open_get_stream(&mut self) {
        if let Some(old) = self.get_stream.take() {
            old.cancel();
        }
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
        tokio::spawn(async move {
            tokio::select! {
                _ = getter.run(req) => {}
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
    had_session: bool,
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
        if let Some(sid) = resp.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()) {
            if !self.had_session && !self.emit(Some(Inbound::SessionId(sid.to_string()))).await {
                return;
            }
        }
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        if !status.is_success() {
            let body = read_limited(resp, 4096).await;
            if self.had_session && session_expired(status, &body) {
                let item = Inbound::SessionExpired {
                    frame,
                    upstream_id: self.upstream_id,
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
            let body = read_limited(resp, self.max_event_bytes).await;
            let text = String::from_utf8_lossy(&body);
            match parse_body(&text) {
                Ok(Body::Single(msg)) => {
                    self.emit(Some(Inbound::Message {
                        msg,
                        via: self.upstream_id,
                    }))
                    .await;
                }
                Ok(Body::Batch(items)) => {
                    for msg in items.into_iter().flatten() {
                        if !self
                            .emit(Some(Inbound::Message {
                                msg,
                                via: self.upstream_id,
                            }))
                            .await
                        {
                            return;
                        }
                    }
                }
                Err(err) => {
                    let detail = format!("unreadable JSON reply: {err}");
                    self.emit(self.fail(UpstreamError::Protocol {
                        name: self.name.to_string(),
                        detail,
                    }))
                    .await;
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
        let mut decoder = SseDecoder::new(self.max_event_bytes);
        let mut events = Vec::new();
        let mut body = resp.bytes_stream();
        let mut answered = self.upstream_id.is_none();
        while let Some(chunk) = body.next().await {
            let chunk = match chunk {
                Ok(c) => c,
                Err(err) => {
                    tracing::debug!(upstream = %self.name, err = %error_chain(&err), "SSE reply stream broke");
                    break;
                }
            };
            if let Err(err) = decoder.push(&chunk, &mut events) {
                tracing::warn!(upstream = %self.name, %err, "dropping an SSE reply stream");
                break;
            }
            for event in events.drain(..) {
                if event.data.trim().is_empty() {
                    continue;
                }
                let Some(msg) = parse_frame(&self.name, &event.data) else {
                    continue;
                };
                if let Message::Response { id: Some(id), .. } = &msg {
                    answered |= id.as_u64() == self.upstream_id;
                }
                if !self
                    .emit(Some(Inbound::Message {
                        msg,
                        via: self.upstream_id,
                    }))
                    .await
                {
                    return;
                }
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
    async fn run(self, req: reqwest::RequestBuilder) {
        let mut backoff = Duration::from_millis(500);
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
        let mut decoder = SseDecoder::new(self.max_event_bytes);
        let mut events = Vec::new();
        let mut body = resp.bytes_stream();
        while let Some(Ok(chunk)) = body.next().await {
            if decoder.push(&chunk, &mut events).is_err() {
                return true;
            }
            for event in events.drain(..) {
                if event.data.trim().is_empty() {
                    continue;
                }
                if let Some(msg) = parse_frame(&self.name, &event.data) {
                    if self
                        .inbound
                        .send(Inbound::Message { msg, via: None })
                        .await
                        .is_err()
                    {
                        return false;
                    }
                }
            }
        }
        true
    }
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
