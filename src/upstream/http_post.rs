//! The POSTs of one Streamable HTTP upstream connection: each frame's exchange (a JSON or SSE
//! reply; an SSE reply that ends before its response is resumed; a forgotten session reported
//! for a transparent re-initialize), and [`Posts`], the set of those in flight, which the
//! connection's actor drives on its own task. A task and a cancellation token per POST cost
//! two wake-ups and a spawn a call, for exchanges that are nearly always one request and its
//! reply (docs/profiling.md).

use super::connection::Inbound;
use super::http_endpoint::Endpoint;
use super::http_reply::Reply;
use super::http_sse::SseMessages;
use crate::error::UpstreamError;
use crate::protocol::{parse_body, Body, Message, ParseError, RequestId, ResponsePayload};
use crate::util::fast_map::FastMap;
use futures_util::future::{AbortHandle, Abortable, BoxFuture};
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use reqwest::StatusCode;
use std::sync::Arc;
use sync_wrapper::SyncWrapper;
use tokio::sync::mpsc;

/// Extra headers of one request (the 2026-07-28 request metadata).
pub(super) type RequestHeaders = Vec<(String, String)>;

/// The POSTs of a connection still running, and how to abort the one of a request.
#[derive(Default)]
pub(super) struct Posts {
    /// Each ends with the upstream id of its request, if it had one. Only ever reached through
    /// `&mut` (the transport is shared across the actor's awaits).
    running: SyncWrapper<FuturesUnordered<Abortable<BoxFuture<'static, Option<u64>>>>>,
    /// By upstream request id, while its POST runs: closing one cancels it upstream in 2026-07-28.
    open: FastMap<u64, AbortHandle>,
}

impl Posts {
    /// Send `frame` as `post` says; its replies reach the actor as [`Inbound`] items as the
    /// actor drives it ([`Posts::advance`]).
    pub fn start(&mut self, post: Post, frame: String) {
        let (abort, registration) = AbortHandle::new_pair();
        if let Some(id) = post.upstream_id {
            self.open.insert(id, abort);
        }
        let run = async move {
            post.exchange(frame).await;
            post.upstream_id
        };
        self.running
            .get_mut()
            .push(Abortable::new(run.boxed(), registration));
    }

    /// Close the POST of request `upstream_id` (how 2026-07-28 cancels a request).
    pub fn abort(&mut self, upstream_id: u64) {
        if let Some(abort) = self.open.remove(&upstream_id) {
            abort.abort();
        }
    }

    /// Drive the running POSTs until one of them ends (pending for ever when none runs: a
    /// POST started later is driven by the next call).
    pub async fn advance(&mut self) {
        match self.running.get_mut().next().await {
            // Ended by itself: its request can no longer be aborted (an aborted one was
            // forgotten by `abort`).
            Some(Ok(Some(id))) => {
                self.open.remove(&id);
            }
            Some(_) => {}
            None => std::future::pending::<()>().await,
        }
    }

    #[cfg(test)]
    fn is_empty(&mut self) -> bool {
        self.running.get_mut().is_empty()
    }
}

/// One frame's exchange with the upstream.
pub(super) struct Post {
    pub name: Arc<str>,
    pub endpoint: Arc<Endpoint>,
    pub inbound: mpsc::Sender<Inbound>,
    pub upstream_id: Option<u64>,
    pub headers: RequestHeaders,
    /// The upstream session it was sent in.
    pub generation: u64,
    pub max_event_bytes: usize,
}

impl Post {
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
/// The JSON-RPC messages of a JSON body: one message, or the valid entries of a batch.
pub(super) async fn json_messages(resp: Reply, limit: usize) -> Result<Vec<Message>, ParseError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn post(endpoint: Endpoint, upstream_id: Option<u64>, inbound: mpsc::Sender<Inbound>) -> Post {
        Post {
            name: "e".into(),
            endpoint: Arc::new(endpoint),
            inbound,
            upstream_id,
            headers: Vec::new(),
            generation: 0,
            max_event_bytes: 1 << 20,
        }
    }

    /// A server that answers each POST with its body after `delay`.
    async fn echo_server(delay: std::time::Duration) -> String {
        let app = axum::Router::new().route(
            "/mcp",
            axum::routing::post(move |body: String| async move {
                tokio::time::sleep(delay).await;
                ([(http::header::CONTENT_TYPE, "application/json")], body)
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    #[tokio::test]
    async fn posts_run_as_they_are_driven_and_their_replies_reach_the_actor() {
        let url = echo_server(std::time::Duration::ZERO).await;
        let (tx, mut rx) = mpsc::channel(8);
        let mut posts = Posts::default();
        for id in [1, 2] {
            let endpoint = Endpoint::new(&url, &[]).expect("endpoint");
            let frame = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
            posts.start(post(endpoint, Some(id), tx.clone()), frame);
        }
        let mut answered = Vec::new();
        while answered.len() < 2 {
            tokio::select! {
                _ = posts.advance() => {}
                item = rx.recv() => match item {
                    Some(Inbound::Message { via, .. }) => answered.push(via),
                    _ => panic!("not a message"),
                },
            }
        }
        answered.sort();
        assert_eq!(answered, [Some(1), Some(2)]);
        while !posts.is_empty() {
            posts.advance().await;
        }
        assert!(posts.open.is_empty(), "ended POSTs are forgotten");
    }

    #[tokio::test]
    async fn an_aborted_post_ends_without_an_answer_and_the_others_go_on() {
        let slow = echo_server(std::time::Duration::from_secs(30)).await;
        let quick = echo_server(std::time::Duration::ZERO).await;
        let (tx, mut rx) = mpsc::channel(8);
        let mut posts = Posts::default();
        let frame = |id: u64| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
        posts.start(
            post(Endpoint::new(&slow, &[]).expect("endpoint"), Some(7), tx.clone()),
            frame(7),
        );
        posts.start(
            post(Endpoint::new(&quick, &[]).expect("endpoint"), Some(8), tx.clone()),
            frame(8),
        );
        posts.abort(7);
        posts.abort(99);
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while !posts.is_empty() {
            tokio::time::timeout_at(deadline, posts.advance())
                .await
                .expect("both end");
        }
        match rx.try_recv() {
            Ok(Inbound::Message { via, .. }) => assert_eq!(via, Some(8)),
            _ => panic!("the quick POST's answer"),
        }
        assert!(rx.try_recv().is_err(), "nothing from the aborted POST");
    }
}
