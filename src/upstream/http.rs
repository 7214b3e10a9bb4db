//! Streamable HTTP upstreams: the session handshake, the POSTs (driven by the connection's
//! actor: `http_post.rs`), the GET stream for server-initiated messages, and DELETE on stop.

use super::connection::Inbound;
use super::handshake::{
    discover_request, initialize_request, initialized_notification, read_discover_result,
    read_initialize_result,
};
use super::http_endpoint::{error_chain, read_limited, Endpoint, Failure};
use super::http_post::{json_messages, Post, Posts, RequestHeaders};
use super::http_reply::Reply;
use super::http_sse::{GetStream, SseMessages};
use super::ServerFacts;
use crate::error::UpstreamError;
use crate::protocol::modern::{self, MODERN_VERSION};
use crate::protocol::HEADER_SESSION_ID as SESSION_HEADER;
use crate::protocol::{Message, ResponsePayload};
use reqwest::StatusCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

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
    /// The POSTs in flight.
    posts: Posts,
    stop: CancellationToken,
}

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
        base: Endpoint,
        max_event_bytes: usize,
        inbound: mpsc::Sender<Inbound>,
    ) -> Result<Self, UpstreamError> {
        Ok(HttpTransport {
            name,
            endpoint: Arc::new(base.clone()),
            base,
            generation: 0,
            inbound,
            max_event_bytes,
            get_stream: None,
            posts: Posts::default(),
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
                .map_err(|e| format!("request failed: {}", Failure::of(&e)))
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

    /// POST one frame; replies flow back to the actor as [`Inbound`] items as it drives the
    /// POSTs ([`HttpTransport::advance_posts`]).
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
        let post = Post {
            name: self.name.clone(),
            endpoint: self.endpoint.clone(),
            inbound: self.inbound.clone(),
            upstream_id,
            headers,
            generation: self.generation,
            max_event_bytes: self.max_event_bytes,
        };
        self.posts.start(post, frame);
        Ok(())
    }

    /// Close the POST of request `upstream_id` (how 2026-07-28 cancels a request).
    pub fn abort(&mut self, upstream_id: u64) {
        self.posts.abort(upstream_id);
    }

    /// Drive the POSTs in flight until one ends, pending while none runs (the actor's loop
    /// awaits this beside its channels; dropped between wake-ups, the POSTs keep their state).
    pub async fn advance_posts(&mut self) {
        self.posts.advance().await
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
