//! Streamable HTTP upstreams: the session handshake, each POST in its own task (JSON or SSE
//! replies; an SSE reply that ends before its response is resumed), the GET stream for
//! server-initiated messages, session-expiry detection for a transparent re-initialize, and
//! DELETE on stop.

use super::connection::Inbound;
use super::handshake::{
    discover_request, initialize_request, initialized_notification, read_discover_result,
    read_initialize_result,
};
use super::http_endpoint::{error_chain, read_limited, Endpoint};
use super::http_reply::Reply;
use super::http_sse::{GetStream, SseMessages};
use super::ServerFacts;
use crate::config::Secret;
use crate::credentials::bearer::Bearer;
use crate::error::UpstreamError;
use crate::protocol::modern::{self, MODERN_VERSION};
use crate::protocol::{parse_body, Body, Message, ParseError, RequestId, ResponsePayload};
use crate::util::fast_map::FastMap;
use parking_lot::Mutex;
use reqwest::StatusCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const SESSION_HEADER: &str = "mcp-session-id";
const DELETE_TIMEOUT: Duration = Duration::from_secs(2);
/// Bound on each step of opening a session (initialize, GET stream, initialized).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// A Streamable HTTP client for one upstream.
pub struct HttpTransport {
    name: Arc<str>,
    /// The URL and configured headers, outside any session.
    base: Endpoint,
    /// `base` inside the current upstream session (its id and protocol version).
    endpoint: Arc<Endpoint>,
    /// Bumps each time a new upstream session is opened.
    generation: u64,
    inbound: mpsc::Sender<Inbound>,
    max_event_bytes: usize,
    get_stream: Option<CancellationToken>,
    /// Requests whose POST is still open, by upstream id (closing one cancels it upstream in
    /// 2026-07-28).
    open_posts: Arc<Mutex<FastMap<u64, CancellationToken>>>,
    stop: CancellationToken,
}

/// Extra headers of one request (the 2026-07-28 request metadata).
type RequestHeaders = Vec<(String, String)>;

/// Why an upstream session could not be opened.
#[derive(Debug)]
pub struct EstablishError {
    pub reason: String,
    /// The HTTP status that refused the `initialize` POST, when that is what failed.
    pub refused_with: Option<StatusCode>,
}

impl EstablishError {
    /// The spec's cue to try legacy HTTP+SSE: `initialize` refused with 400, 404 or 405.
    pub fn suggests_legacy_sse(&self) -> bool {
        self.refused_with
            .is_some_and(|s| matches!(s.as_u16(), 400 | 404 | 405))
    }
}

impl From<String> for EstablishError {
    fn from(reason: String) -> Self {
        EstablishError {
            reason,
            refused_with: None,
        }
    }
}

impl std::fmt::Display for EstablishError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl HttpTransport {
    pub fn new(
        name: Arc<str>,
        url: &str,
        configured: &[(String, Secret)],
        bearer: Option<Arc<dyn Bearer>>,
        max_event_bytes: usize,
        inbound: mpsc::Sender<Inbound>,
    ) -> Result<Self, UpstreamError> {
        let base = Endpoint::for_upstream(&name, url, configured, bearer)?;
        Ok(HttpTransport {
            name,
            endpoint: Arc::new(base.clone()),
            base,
            generation: 0,
            inbound,
            max_event_bytes,
            get_stream: None,
            open_posts: Arc::default(),
            stop: CancellationToken::new(),
        })
    }

    /// Where this transport reports to its actor (a legacy SSE transport taking over uses it too).
    pub fn inbound(&self) -> mpsc::Sender<Inbound> {
        self.inbound.clone()
    }

    /// Which upstream session requests are being sent in.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Open the upstream: a `server/discover` probe first unless `probe_id` is `None` (a
    /// 2026-07-28 server needs nothing more), else a session.
    pub async fn establish(
        &mut self,
        probe_id: Option<u64>,
        init_id: u64,
    ) -> Result<ServerFacts, EstablishError> {
        self.base.bearer_ready().await?;
        let discovered = match probe_id {
            Some(id) => self.probe_modern(id).await,
            None => None,
        };
        if let Some((facts, answered_at)) = discovered {
            self.follow_move(&answered_at);
            self.endpoint = Arc::new(self.base.clone());
            self.generation += 1;
            return Ok(facts);
        }
        self.establish_session(init_id).await
    }

    /// The server answered at `url` after redirects (same origin only, see
    /// [`Endpoint`]): send everything there from now on, so no later request (the lean POST
    /// client follows no redirect) hits the old URL.
    fn follow_move(&mut self, url: &reqwest::Url) {
        if url != self.base.url() {
            tracing::info!(upstream = %self.name, from = %self.base.url(), to = %url, "upstream URL redirects; using the new one");
            self.base = self.base.at(url.clone());
        }
    }

    /// Ask for `server/discover` the 2026-07-28 way; any refusal means the session era. The
    /// facts come with the URL that answered.
    async fn probe_modern(&self, id: u64) -> Option<(ServerFacts, reqwest::Url)> {
        let frame = discover_request(id).to_json();
        let mut req = self.base.post(frame);
        for (name, value) in modern::request_headers("server/discover", None, MODERN_VERSION) {
            req = req.header(name, value);
        }
        let resp = match tokio::time::timeout(HANDSHAKE_TIMEOUT, req.send()).await {
            Ok(Ok(resp)) if resp.status().is_success() => resp,
            Ok(Ok(resp)) => {
                tracing::debug!(upstream = %self.name, status = %resp.status(), "server/discover refused; opening a session");
                return None;
            }
            Ok(Err(err)) => {
                tracing::debug!(upstream = %self.name, err = %error_chain(&err), "server/discover failed");
                return None;
            }
            Err(_) => return None,
        };
        let answered_at = resp.url().clone();
        let reply = tokio::time::timeout(
            HANDSHAKE_TIMEOUT,
            read_reply(&self.name, resp, id, self.max_event_bytes),
        );
        Some((read_discover_result(reply.await.ok()?.ok()?)?, answered_at))
    }

    /// Open a session, in order: `initialize` (its answer and session id), the GET stream, then
    /// `initialized` acknowledged by the server. Only then may requests follow, so a server that
    /// registers tools when it sees `initialized` lists them all, and any list_changed it sends
    /// has a stream to arrive on.
    pub async fn establish_session(&mut self, id: u64) -> Result<ServerFacts, EstablishError> {
        self.endpoint = Arc::new(self.base.clone());
        if let Some(old) = self.get_stream.take() {
            old.cancel();
        }
        let resp = self.post_now(initialize_request(id).to_json()).await?;
        self.follow_move(resp.url());
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
        self.endpoint = Arc::new(self.base.in_session(sid.as_deref(), &facts.protocol_version)?);
        self.generation += 1;
        self.open_get_stream().await;
        self.post_now(initialized_notification().to_json())
            .await
            .map_err(|e| EstablishError::from(e.reason))?;
        Ok(facts)
    }

    /// POST one frame and wait for the response head; non-2xx is an error carrying the status.
    async fn post_now(&self, frame: String) -> Result<reqwest::Response, EstablishError> {
        let send = |frame: String| async {
            tokio::time::timeout(HANDSHAKE_TIMEOUT, self.endpoint.post(frame).send())
                .await
                .map_err(|_| "no HTTP answer in time".to_string())?
                .map_err(|e| format!("request failed: {}", error_chain(&e)))
        };
        let mut resp = send(frame.clone()).await?;
        if !resp.status().is_success() {
            // A credential refused: renewed (the renewed header is what the endpoint sends now).
            let status = resp.status().as_u16();
            if let Some(renewed) = self.endpoint.renewed_after(status, resp.headers(), None).await {
                renewed?;
                resp = send(frame).await?;
            }
        }
        if !resp.status().is_success() {
            let status = resp.status();
            let reason = match moved_elsewhere(&resp) {
                Some(location) => format!(
                    "HTTP {status}: it redirects to {location}, another origin; mcpmux does not follow it there \
                     (the configured headers would go along): set `url` to it if you trust that server"
                ),
                None => {
                    let body = read_limited(resp, 500).await;
                    format!("HTTP {status}: {}", String::from_utf8_lossy(&body))
                }
            };
            return Err(EstablishError {
                reason,
                refused_with: Some(status),
            });
        }
        Ok(resp)
    }

    /// POST one frame; replies flow back to the actor as [`Inbound`] items.
    pub fn send(&mut self, frame: String, upstream_id: Option<u64>) -> Result<(), UpstreamError> {
        self.send_with(frame, upstream_id, Vec::new())
    }

    /// POST one frame with extra headers.
    pub fn send_with(
        &mut self,
        frame: String,
        upstream_id: Option<u64>,
        headers: RequestHeaders,
    ) -> Result<(), UpstreamError> {
        let cancel = self.stop.child_token();
        if let Some(id) = upstream_id {
            self.open_posts.lock().insert(id, cancel.clone());
        }
        let post = Post {
            name: self.name.clone(),
            endpoint: self.endpoint.clone(),
            inbound: self.inbound.clone(),
            upstream_id,
            headers,
            generation: self.generation,
            max_event_bytes: self.max_event_bytes,
            cancel,
            open_posts: self.open_posts.clone(),
        };
        tokio::spawn(post.run(frame));
        Ok(())
    }

    /// Close the POST of request `upstream_id` (how 2026-07-28 cancels a request).
    pub fn abort(&mut self, upstream_id: u64) {
        if let Some(cancel) = self.open_posts.lock().remove(&upstream_id) {
            cancel.cancel();
        }
    }

    /// Open the standalone GET stream for server-initiated messages; returns once the server
    /// has answered it (or refused it), so nothing sent afterwards can overtake it.
    async fn open_get_stream(&mut self) {
        let token = self.stop.child_token();
        self.get_stream = Some(token.clone());
        let first = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.endpoint.get(None).send()).await;
        let first = match first {
            Ok(Ok(resp)) if resp.status().is_success() => resp,
            Ok(Ok(resp)) => {
                tracing::debug!(upstream = %self.name, status = %resp.status(), "upstream offers no GET stream");
                return;
            }
            Ok(Err(err)) => {
                tracing::debug!(upstream = %self.name, err = %error_chain(&err), "GET stream failed");
                return;
            }
            Err(_) => {
                tracing::debug!(upstream = %self.name, "GET stream not answered in time");
                return;
            }
        };
        let getter = GetStream {
            name: self.name.clone(),
            endpoint: self.endpoint.clone(),
            inbound: self.inbound.clone(),
            max_event_bytes: self.max_event_bytes,
        };
        tokio::spawn(async move {
            tokio::select! {
                _ = getter.run(first) => {}
                _ = token.cancelled() => {}
            }
        });
    }

    /// Stop every stream and end the upstream session with DELETE.
    pub async fn stop(self) {
        self.stop.cancel();
        if self.endpoint.has_session() {
            let req = self.endpoint.delete().timeout(DELETE_TIMEOUT);
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
    endpoint: Arc<Endpoint>,
    inbound: mpsc::Sender<Inbound>,
    upstream_id: Option<u64>,
    headers: RequestHeaders,
    generation: u64,
    max_event_bytes: usize,
    /// Cancelled when the transport stops or the request is aborted.
    cancel: CancellationToken,
    open_posts: Arc<Mutex<FastMap<u64, CancellationToken>>>,
}

impl Post {
    async fn run(self, frame: String) {
        // The exchange's state (the request's and the reply's futures) is kilobytes: boxed, the
        // task is small to spawn (tokio moves a task's future several times on the way in).
        let exchange = Box::pin(self.exchange(frame));
        tokio::select! {
            _ = self.cancel.cancelled() => {}
            _ = exchange => {}
        }
        if let Some(id) = self.upstream_id {
            self.open_posts.lock().remove(&id);
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

    async fn exchange(&self, frame: String) {
        let resp = match self.endpoint.send_post(frame.clone(), &self.headers).await {
            Ok(resp) => resp,
            Err(failure) if self.endpoint.is_gone(failure.gone).await => {
                // Nothing serves the upstream any more: the whole connection is down, not
                // just this request (its pending calls fail and its supervisor restarts it).
                let reason = format!("the upstream cannot be reached: {failure}");
                self.emit(Some(Inbound::Closed(reason))).await;
                return;
            }
            Err(failure) => {
                let reason = format!("request failed: {failure}");
                let error = UpstreamError::unavailable(self.name.to_string(), reason);
                self.emit(self.fail(error)).await;
                return;
            }
        };
        let status = resp.status;
        let content_type = resp.content_type();
        if !status.is_success() {
            let body = resp.read_limited(4096).await;
            if self.endpoint.has_session() && session_expired(status, &body) {
                let item = Inbound::SessionExpired {
                    frame,
                    upstream_id: self.upstream_id,
                    generation: self.generation,
                };
                self.emit(Some(item)).await;
                return;
            }
            if let Some(msg) = self.rpc_error(&body) {
                // A refusal with a JSON-RPC answer (a 2026-07-28 server's 400 or 404): the
                // answer is the response.
                self.emit(Some(Inbound::Message {
                    msg,
                    via: self.upstream_id,
                }))
                .await;
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
        if status == StatusCode::ACCEPTED {
            // Accepted with nothing to say (some servers still label the empty body JSON); a
            // request answered this way gets its response on the GET stream.
        } else if content_type.starts_with("text/event-stream") {
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
        } else if self.upstream_id.is_some() {
            let detail = format!("reply with unexpected content type {content_type:?}");
            self.emit(self.fail(UpstreamError::Protocol {
                name: self.name.to_string(),
                detail,
            }))
            .await;
        }
    }

    /// The error response to this request that a refused POST's body carries, if any. A POST
    /// carries one request, so an error answers it whatever id it names (the TypeScript SDK's
    /// -32700 has a null id, the Python SDK's refusals the id "server-error"): the host gets the
    /// upstream's code as it is, not a gateway -32000 for the HTTP status.
    fn rpc_error(&self, body: &[u8]) -> Option<Message> {
        let upstream_id = self.upstream_id?;
        match parse_body(&String::from_utf8_lossy(body)) {
            Ok(Body::Single(Message::Response { id, payload })) => {
                let ours = id.as_ref().and_then(RequestId::as_u64) == Some(upstream_id);
                (ours || matches!(payload, ResponsePayload::Error(_))).then(|| Message::Response {
                    id: Some(RequestId::number(upstream_id)),
                    payload,
                })
            }
            _ => None,
        }
    }

    /// Read an SSE reply until the response to this request arrives, resuming the stream (GET
    /// with `Last-Event-ID`) if the server ends it before that.
    async fn read_sse(&self, resp: Reply) {
        let mut messages = SseMessages::new(self.name.clone(), resp, self.max_event_bytes);
        let Some(upstream_id) = self.upstream_id else {
            // A notification or a response to the server: nothing is owed on this stream.
            while let Some(msg) = messages.next().await {
                if !self.emit(Some(Inbound::Message { msg, via: None })).await {
                    return;
                }
            }
            return;
        };
        loop {
            while let Some(msg) = messages.next().await {
                let answered = matches!(&msg, Message::Response { id: Some(id), .. } if id.as_u64() == Some(upstream_id));
                if !self
                    .emit(Some(Inbound::Message {
                        msg,
                        via: Some(upstream_id),
                    }))
                    .await
                    || answered
                {
                    return;
                }
            }
            let resumed = if messages.resumes_exhausted() {
                Err("resuming brought no new events".to_string())
            } else {
                if messages.server_polls() {
                    let retry_ms = messages.retry_ms();
                    if !self
                        .emit(Some(Inbound::Paused {
                            upstream_id,
                            retry_ms,
                        }))
                        .await
                    {
                        return;
                    }
                }
                messages.resume(&self.endpoint).await
            };
            if let Err(why) = resumed {
                let reason = format!("the reply stream ended before the response ({why})");
                self.emit(self.fail(UpstreamError::unavailable(self.name.to_string(), reason)))
                    .await;
                return;
            }
        }
    }
}

/// The `Location` of a redirect the client did not follow (it leads to another origin).
fn moved_elsewhere(resp: &reqwest::Response) -> Option<String> {
    if !resp.status().is_redirection() {
        return None;
    }
    let location = resp.headers().get(reqwest::header::LOCATION)?.to_str().ok()?;
    Some(crate::util::text::clip(location).into_owned())
}

/// Read the response to request `id` from a JSON or SSE reply.
async fn read_reply(
    name: &Arc<str>,
    resp: reqwest::Response,
    id: u64,
    max_event_bytes: usize,
) -> Result<ResponsePayload, String> {
    let resp = Reply::from(resp);
    let is_sse = resp.is_sse();
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
    let mut messages = SseMessages::new(name.clone(), resp, max_event_bytes);
    while let Some(msg) = messages.next().await {
        if let Some(payload) = answer(msg) {
            return Ok(payload);
        }
    }
    Err("reply stream ended before the response".into())
}

/// The JSON-RPC messages of a JSON body: one message, or the valid entries of a batch.
async fn json_messages(resp: Reply, limit: usize) -> Result<Vec<Message>, ParseError> {
    let body = resp.read_limited(limit).await;
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
