//! Where and how an HTTP upstream is reached: its URL, the configured headers, and the session id
//! and protocol version of the current upstream session; request builders for POST, the GET
//! stream (optionally resuming after an event id) and DELETE.

use crate::config::Secret;
use crate::error::UpstreamError;
use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use std::time::Duration;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const LAST_EVENT_ID_HEADER: &str = "last-event-id";

/// One upstream URL with the headers every request to it carries.
#[derive(Clone)]
pub(super) struct Endpoint {
    client: reqwest::Client,
    url: reqwest::Url,
    headers: HeaderMap,
    session_id: Option<String>,
}

impl Endpoint {
    /// The endpoint before any session: the URL and the configured headers (kept out of logs).
    /// The endpoint of upstream `name`; a bad URL or header makes the upstream unavailable.
    pub fn for_upstream(
        name: &str,
        url: &str,
        configured: &[(String, Secret)],
    ) -> Result<Self, UpstreamError> {
        Self::new(url, configured).map_err(|reason| UpstreamError::Unavailable {
            name: name.to_string(),
            reason,
        })
    }

    pub fn new(url: &str, configured: &[(String, Secret)]) -> Result<Self, String> {
        let url = reqwest::Url::parse(url).map_err(|e| format!("bad url: {e}"))?;
        let mut headers = HeaderMap::new();
        for (k, v) in configured {
            let key = HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("header {k}: {e}"))?;
            let mut value =
                HeaderValue::from_str(v.expose()).map_err(|_| format!("header {k}: invalid value"))?;
            value.set_sensitive(true);
            headers.insert(key, value);
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| format!("http client: {}", error_chain(&e)))?;
        Ok(Endpoint {
            client,
            url,
            headers,
            session_id: None,
        })
    }

    /// This endpoint inside an upstream session: with its id (if the server gave one) and the
    /// negotiated protocol version on every request.
    pub fn in_session(&self, session_id: Option<&str>, version: &str) -> Result<Self, String> {
        let mut next = self.clone();
        next.session_id = session_id.map(str::to_string);
        if let Some(sid) = session_id {
            let value = HeaderValue::from_str(sid)
                .map_err(|_| "the upstream sent a session id that is not a valid header value")?;
            next.headers.insert(SESSION_HEADER, value);
        }
        let version = HeaderValue::from_str(version)
            .map_err(|_| "the upstream negotiated a protocol version that is not a valid header value")?;
        next.headers.insert(VERSION_HEADER, version);
        Ok(next)
    }

    /// The same client and headers at another URL (the POST endpoint a legacy SSE server names).
    pub fn at(&self, url: reqwest::Url) -> Self {
        Endpoint { url, ..self.clone() }
    }

    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }

    pub fn has_session(&self) -> bool {
        self.session_id.is_some()
    }

    fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        self.client
            .request(method, self.url.clone())
            .headers(self.headers.clone())
    }

    /// POST one JSON-RPC frame.
    pub fn post(&self, frame: String) -> reqwest::RequestBuilder {
        self.request(reqwest::Method::POST)
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(frame)
    }

    /// GET an SSE stream: the standalone one, or the continuation of the stream whose last event
    /// had id `last_event_id`.
    pub fn get(&self, last_event_id: Option<&str>) -> reqwest::RequestBuilder {
        let req = self
            .request(reqwest::Method::GET)
            .header(ACCEPT, "text/event-stream");
        match last_event_id.and_then(|id| HeaderValue::from_str(id).ok()) {
            Some(id) => req.header(LAST_EVENT_ID_HEADER, id),
            None => req,
        }
    }

    pub fn delete(&self) -> reqwest::RequestBuilder {
        self.request(reqwest::Method::DELETE)
    }
}

/// Up to `limit` bytes of a body; the rest is not read.
pub(super) async fn read_limited(resp: reqwest::Response, limit: usize) -> Vec<u8> {
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

/// An error with all of its causes, for logs and error messages.
pub(super) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
