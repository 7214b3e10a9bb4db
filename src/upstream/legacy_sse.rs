//! Legacy HTTP+SSE upstreams (protocol 2024-11-05): the GET stream and its `endpoint` event
//! (resolved against the stream's URL, same origin only), every message POSTed to that endpoint
//! in order, and every server message read from the stream. A lost stream is reported to the
//! actor as [`Inbound::Closed`]; [`LegacySseTransport::connect`] opens a new one.

use super::connection::Inbound;
use super::http_endpoint::{error_chain, gone, read_limited, Endpoint, Failure, Gone};
use super::parse_frame;
use crate::error::UpstreamError;
use crate::protocol::sse::{SseDecoder, SseEvent};
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use reqwest::header::CONTENT_TYPE;
use reqwest::{StatusCode, Url};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Bound on opening the stream: the GET's answer and the `endpoint` event.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on one POST (some servers never answer a POST for a session they do not know).
const POST_TIMEOUT: Duration = Duration::from_secs(30);
/// Messages waiting to be POSTed.
const WRITE_QUEUE: usize = 1024;

/// A message to POST, with the upstream id of the request it carries.
type Outgoing = (String, Option<u64>);

/// A legacy HTTP+SSE client for one upstream.
pub struct LegacySseTransport {
    name: Arc<str>,
    /// The SSE URL with the configured headers.
    sse: Endpoint,
    inbound: mpsc::Sender<Inbound>,
    max_event_bytes: usize,
    /// The queue of the current stream's POSTs (none before the first connect).
    writer: Option<mpsc::Sender<Outgoing>>,
    /// Ends the current stream's reader and writer.
    current: CancellationToken,
    stop: CancellationToken,
}

impl LegacySseTransport {
    pub fn new(
        name: Arc<str>,
        sse: Endpoint,
        max_event_bytes: usize,
        inbound: mpsc::Sender<Inbound>,
    ) -> Result<Self, UpstreamError> {
        let stop = CancellationToken::new();
        Ok(LegacySseTransport {
            name,
            sse,
            inbound,
            max_event_bytes,
            writer: None,
            current: stop.child_token(),
            stop,
        })
    }

    /// Open the stream (ending any previous one): GET the SSE URL, wait for the `endpoint`
    /// event, then start reading messages and posting. Fails when the answer is not an SSE
    /// stream whose first event is `endpoint` naming a URL on the same origin.
    pub async fn connect(&mut self) -> Result<(), Failure> {
        self.current.cancel();
        self.writer = None;
        let current = self.stop.child_token();
        self.current = current.clone();
        let opened = tokio::time::timeout(CONNECT_TIMEOUT, self.open()).await;
        let Opened {
            post_url,
            body,
            decoder,
            rest,
        } = opened.map_err(|_| Failure::from("no `endpoint` event in time".to_string()))??;
        tracing::debug!(upstream = %self.name, endpoint = %post_url.path(), "legacy SSE stream open");
        let lost = CancellationToken::new();
        let (tx, rx) = mpsc::channel(WRITE_QUEUE);
        let poster = Poster {
            name: self.name.clone(),
            endpoint: self.sse.at(post_url),
            inbound: self.inbound.clone(),
            lost: lost.clone(),
        };
        tokio::spawn(poster.run(rx, current.clone()));
        let reader = Reader {
            name: self.name.clone(),
            inbound: self.inbound.clone(),
        };
        tokio::spawn(reader.run(body, decoder, rest, Tokens { current, lost }));
        self.writer = Some(tx);
        Ok(())
    }

    /// The GET and its `endpoint` event.
    async fn open(&self) -> Result<Opened, Failure> {
        self.sse.bearer_ready().await?;
        let get = || async {
            self.sse.get(None).send().await.map_err(|e| {
                let failure = Failure::of(&e);
                Failure {
                    reason: format!("GET failed: {}", failure.reason),
                    ..failure
                }
            })
        };
        let mut resp = get().await?;
        if let Some(renewed) = (self.sse)
            .renewed_after(resp.status().as_u16(), resp.headers(), None)
            .await
        {
            renewed?;
            resp = get().await?;
        }
        let status = resp.status();
        let is_sse = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().starts_with("text/event-stream"));
        if !status.is_success() || !is_sse {
            return Err(format!("GET answered HTTP {status} without an SSE stream").into());
        }
        let mut body = resp.bytes_stream().boxed();
        let mut decoder = SseDecoder::new(self.max_event_bytes);
        let mut events = Vec::new();
        loop {
            if let Some(at) = events.iter().position(|e: &SseEvent| !e.data.is_empty()) {
                let first = &events[at];
                if first.event.as_deref() != Some("endpoint") {
                    return Err("the SSE stream's first event is not `endpoint`"
                        .to_string()
                        .into());
                }
                let post_url = resolve_endpoint(self.sse.url(), &first.data)?;
                let rest = events.split_off(at + 1);
                return Ok(Opened {
                    post_url,
                    body,
                    decoder,
                    rest,
                });
            }
            match body.next().await {
                Some(Ok(chunk)) => decoder.push(&chunk, &mut events).map_err(|e| e.to_string())?,
                Some(Err(err)) => return Err(format!("the SSE stream broke: {}", error_chain(&err)).into()),
                None => {
                    return Err("the SSE stream ended before its `endpoint` event"
                        .to_string()
                        .into())
                }
            }
        }
    }

    /// Queue one message for POSTing; replies arrive on the stream.
    pub fn send(&mut self, frame: String, upstream_id: Option<u64>) -> Result<(), UpstreamError> {
        let unavailable =
            |reason: &str| UpstreamError::unavailable(self.name.to_string(), reason.to_string());
        let Some(writer) = &self.writer else {
            return Err(unavailable("the SSE stream is not open"));
        };
        writer.try_send((frame, upstream_id)).map_err(|err| match err {
            mpsc::error::TrySendError::Full(_) => UpstreamError::Overloaded {
                name: self.name.to_string(),
                reason: format!("more than {WRITE_QUEUE} messages waiting to be posted"),
            },
            mpsc::error::TrySendError::Closed(_) => unavailable("the SSE stream is closed"),
        })
    }

    /// Whether the server is gone after a failure that says `how` (see [`Endpoint::is_gone`]).
    pub async fn is_gone(&self, how: Gone) -> bool {
        self.sse.is_gone(how).await
    }

    /// Close the stream (the server ends the session when its stream closes).
    pub async fn stop(self) {
        self.stop.cancel();
    }
}

/// A stream whose `endpoint` event has arrived.
struct Opened {
    /// Where messages are POSTed.
    post_url: Url,
    /// The rest of the stream, and the events already decoded after `endpoint`.
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    decoder: SseDecoder,
    rest: Vec<SseEvent>,
}

/// Resolve the `endpoint` event's URI against the SSE URL (relative paths keep their query);
/// an endpoint on another origin is refused, as the configured headers would follow it.
fn resolve_endpoint(sse_url: &Url, data: &str) -> Result<Url, String> {
    let url = sse_url
        .join(data.trim())
        .map_err(|e| format!("the `endpoint` event is not a URL: {e}"))?;
    if url.origin() != sse_url.origin() {
        return Err(format!(
            "the `endpoint` event names another origin ({}); refused",
            url.origin().ascii_serialization()
        ));
    }
    Ok(url)
}

/// Reads server messages from the stream until it ends.
struct Reader {
    name: Arc<str>,
    inbound: mpsc::Sender<Inbound>,
}

/// What ends a stream: `current` silently (the transport stopped or reconnected), `lost`
/// loudly (the POST endpoint forgot the session).
struct Tokens {
    current: CancellationToken,
    lost: CancellationToken,
}

impl Reader {
    /// Forward every `message` event; report the end of the stream (or `lost`, the POST
    /// endpoint forgetting the session) as [`Inbound::Closed`]. A cancelled `current` (the
    /// transport stopped or reconnected) ends it silently.
    async fn run(
        self,
        mut body: BoxStream<'static, reqwest::Result<Bytes>>,
        mut decoder: SseDecoder,
        mut events: Vec<SseEvent>,
        Tokens { current, lost }: Tokens,
    ) {
        let reason = loop {
            for event in events.drain(..) {
                if !self.forward(event).await {
                    return;
                }
            }
            tokio::select! {
                chunk = body.next() => match chunk {
                    Some(Ok(chunk)) => {
                        if let Err(err) = decoder.push(&chunk, &mut events) {
                            break format!("dropping the SSE stream: {err}");
                        }
                    }
                    Some(Err(err)) => break format!("the SSE stream broke: {}", error_chain(&err)),
                    None => break "the server ended the SSE stream".to_string(),
                },
                _ = lost.cancelled() => break "the server no longer knows the SSE session".to_string(),
                _ = current.cancelled() => return,
            }
        };
        if !current.is_cancelled() {
            let _ = self.inbound.send(Inbound::Closed(reason)).await;
        }
    }

    /// Hand one event's message to the actor; false once the actor is gone.
    async fn forward(&self, event: SseEvent) -> bool {
        match event.event.as_deref() {
            None | Some("message") if !event.data.trim().is_empty() => {
                let Some(msg) = parse_frame(&self.name, &event.data) else {
                    return true;
                };
                self.inbound
                    .send(Inbound::Message { msg, via: None })
                    .await
                    .is_ok()
            }
            None | Some("message") => true,
            Some(other) => {
                tracing::debug!(upstream = %self.name, event = other, "ignoring an SSE event");
                true
            }
        }
    }
}

/// POSTs queued messages one at a time, so they reach the server in the order sent.
struct Poster {
    name: Arc<str>,
    endpoint: Endpoint,
    inbound: mpsc::Sender<Inbound>,
    /// Cancelled when the endpoint answers 404: the server forgot the session.
    lost: CancellationToken,
}

impl Poster {
    async fn run(self, mut queue: mpsc::Receiver<Outgoing>, current: CancellationToken) {
        loop {
            let (frame, upstream_id) = tokio::select! {
                next = queue.recv() => match next {
                    Some(item) => item,
                    None => return,
                },
                _ = current.cancelled() => return,
            };
            let outcome = tokio::select! {
                r = tokio::time::timeout(POST_TIMEOUT, self.post(frame)) => r,
                _ = current.cancelled() => return,
            };
            let error = match outcome {
                Ok(Ok(())) => continue,
                Ok(Err(Posted::Unreachable(reason))) => {
                    // The server is gone: the stream is lost too (the actor reconnects or
                    // gives the connection up).
                    let _ = self.inbound.send(Inbound::Closed(reason)).await;
                    return;
                }
                Ok(Err(Posted::Failed(error))) => error,
                Err(_) => UpstreamError::unavailable(
                    self.name.to_string(),
                    format!("no answer to a POST within {} s", POST_TIMEOUT.as_secs()),
                ),
            };
            match upstream_id {
                Some(upstream_id) => {
                    let failed = Inbound::PostFailed { upstream_id, error };
                    if self.inbound.send(failed).await.is_err() {
                        return;
                    }
                }
                None => {
                    tracing::warn!(upstream = %self.name, %error, "upstream refused a notification or response")
                }
            }
        }
    }

    async fn post(&self, frame: String) -> Result<(), Posted> {
        let mut sent = self.endpoint.post(frame.clone()).send().await;
        if let Ok(resp) = &sent {
            let renewed = (self.endpoint)
                .renewed_after(resp.status().as_u16(), resp.headers(), None)
                .await;
            match renewed {
                Some(Ok(_)) => sent = self.endpoint.post(frame).send().await,
                Some(Err(why)) => {
                    return Err(Posted::Failed(UpstreamError::unavailable(
                        self.name.to_string(),
                        why,
                    )))
                }
                None => {}
            }
        }
        let resp = match sent {
            Ok(resp) => resp,
            Err(err) => {
                let reason = format!("POST failed: {}", Failure::of(&err));
                if self.endpoint.is_gone(gone(&err)).await {
                    return Err(Posted::Unreachable(format!(
                        "the upstream cannot be reached: {reason}"
                    )));
                }
                let error = UpstreamError::unavailable(self.name.to_string(), reason).because(err);
                return Err(Posted::Failed(error));
            }
        };
        let status = resp.status();
        // Read the (short) body so the connection can be reused.
        let body = read_limited(resp, 4096).await;
        if status.is_success() {
            return Ok(());
        }
        if status == StatusCode::NOT_FOUND {
            self.lost.cancel();
        }
        let detail: String = String::from_utf8_lossy(&body).chars().take(500).collect();
        Err(Posted::Failed(UpstreamError::Http {
            name: self.name.to_string(),
            status: status.as_u16(),
            detail,
        }))
    }
}

/// Why a POST failed: the request alone, or the server is gone.
enum Posted {
    Failed(UpstreamError),
    Unreachable(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_resolve_against_the_sse_url_on_its_origin_only() {
        let sse = Url::parse("http://127.0.0.1:3103/base/sse?token=a").unwrap();
        let rel = resolve_endpoint(&sse, "/message?sessionId=abc").unwrap();
        assert_eq!(rel.as_str(), "http://127.0.0.1:3103/message?sessionId=abc");
        let sibling = resolve_endpoint(&sse, "messages/?session_id=1f\n").unwrap();
        assert_eq!(
            sibling.as_str(),
            "http://127.0.0.1:3103/base/messages/?session_id=1f"
        );
        let absolute = resolve_endpoint(&sse, "http://127.0.0.1:3103/m?s=1").unwrap();
        assert_eq!(absolute.query(), Some("s=1"));
        assert!(resolve_endpoint(&sse, "http://evil.example/m?s=1").is_err());
        assert!(resolve_endpoint(&sse, "https://127.0.0.1:3103/m").is_err());
        assert!(resolve_endpoint(&sse, "//other:1/m").is_err());
    }
}
