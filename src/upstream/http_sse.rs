//! SSE streams from an HTTP upstream: their JSON-RPC messages, the last event id and retry delay
//! they announce, and resumption (a GET with `Last-Event-ID` after the announced delay) when a
//! stream ends early, both for a POST reply that ended before its response and for the
//! standalone GET stream (whose reconnect refused reports the whole connection lost).

use super::connection::Inbound;
use super::http_endpoint::{error_chain, gone, Endpoint};
use super::http_reply::{BodyStream, Reply};
use super::parse_frame;
use crate::protocol::sse::SseDecoder;
use crate::protocol::Message;
use crate::util::Backoff;
use futures_util::StreamExt;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Delay before resuming when the server announced none.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);
/// Upper bound on a server-announced retry delay.
const MAX_RETRY: Duration = Duration::from_secs(30);
/// Consecutive resumptions that bring no new event before giving up on a stream.
const MAX_IDLE_RESUMES: u32 = 5;
/// Backoff bounds for a standalone GET stream that fails outright.
const GET_BACKOFF_MIN: Duration = Duration::from_millis(500);
const GET_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The messages of one logical SSE stream, which may span several HTTP responses when resumed.
/// Priming events (empty data) and frames that are not messages are skipped; a broken stream or
/// an oversized event ends the current response (logged).
pub(super) struct SseMessages {
    name: Arc<str>,
    max_event_bytes: usize,
    body: Option<BodyStream>,
    decoder: SseDecoder,
    ready: VecDeque<Message>,
    last_event_id: Option<String>,
    retry: Option<Duration>,
    /// Whether the current response ended normally (rather than breaking).
    ended_cleanly: bool,
    /// The event id the last resumption started from, and how many resumptions in a row
    /// started from that same id (brought nothing new).
    resumed_from: Option<String>,
    idle_resumes: u32,
}

impl SseMessages {
    pub fn new(name: Arc<str>, resp: impl Into<Reply>, max_event_bytes: usize) -> Self {
        SseMessages {
            name,
            max_event_bytes,
            body: Some(resp.into().into_body()),
            decoder: SseDecoder::new(max_event_bytes),
            ready: VecDeque::new(),
            last_event_id: None,
            retry: None,
            ended_cleanly: false,
            resumed_from: None,
            idle_resumes: 0,
        }
    }

    /// The next message; `None` once the current response has ended.
    pub async fn next(&mut self) -> Option<Message> {
        let mut events = Vec::new();
        loop {
            if let Some(msg) = self.ready.pop_front() {
                return Some(msg);
            }
            let body = self.body.as_mut()?;
            let chunk = match body.next().await {
                Some(Ok(chunk)) => chunk,
                Some(Err(err)) => {
                    tracing::debug!(upstream = %self.name, %err, "SSE stream broke");
                    self.body = None;
                    return None;
                }
                None => {
                    self.body = None;
                    self.ended_cleanly = true;
                    return None;
                }
            };
            if let Err(err) = self.decoder.push(&chunk, &mut events) {
                tracing::warn!(upstream = %self.name, %err, "dropping an SSE stream");
                self.body = None;
            }
            for event in events.drain(..) {
                if let Some(id) = event.id {
                    self.last_event_id = (!id.is_empty()).then_some(id);
                }
                if let Some(ms) = event.retry_ms {
                    self.retry = Some(Duration::from_millis(ms).min(MAX_RETRY));
                }
                if event.data.trim().is_empty() {
                    continue;
                }
                if let Some(msg) = parse_frame(&self.name, &event.data) {
                    self.ready.push_back(msg);
                }
            }
        }
    }

    pub fn last_event_id(&self) -> Option<&str> {
        self.last_event_id.as_deref()
    }

    /// The server ended the response on purpose after giving an event id: it polls (SEP-1699).
    pub fn server_polls(&self) -> bool {
        self.ended_cleanly && self.last_event_id.is_some()
    }

    /// The reconnection delay the server announced.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry.map(|d| d.as_millis() as u64)
    }

    /// Whether resuming now would be the resumption too many that brings nothing new.
    pub fn resumes_exhausted(&self) -> bool {
        self.last_event_id.is_some()
            && self.last_event_id == self.resumed_from
            && self.idle_resumes >= MAX_IDLE_RESUMES
    }

    /// Wait the announced delay, then continue this stream from its last event id with a GET.
    /// Fails when there is nothing to resume from, resumptions keep bringing nothing new, or
    /// the server refuses.
    pub async fn resume(&mut self, endpoint: &Endpoint) -> Result<(), String> {
        let Some(last) = self.last_event_id.clone() else {
            return Err("the stream announced no event id to resume from".into());
        };
        if self.resumes_exhausted() {
            return Err("resuming brought no new events".into());
        }
        self.idle_resumes = if self.resumed_from.as_deref() == Some(last.as_str()) {
            self.idle_resumes + 1
        } else {
            0
        };
        self.resumed_from = Some(last.clone());
        tokio::time::sleep(self.retry.unwrap_or(DEFAULT_RETRY)).await;
        let resp = endpoint
            .get(Some(&last))
            .send()
            .await
            .map_err(|e| format!("resuming failed: {}", error_chain(&e)))?;
        if !resp.status().is_success() {
            return Err(format!("resuming refused with HTTP {}", resp.status()));
        }
        self.body = Some(Reply::from(resp).into_body());
        self.decoder = SseDecoder::new(self.max_event_bytes);
        self.ended_cleanly = false;
        Ok(())
    }
}

/// The standalone GET stream of one upstream session, kept open (and resumed) until cancelled.
pub(super) struct GetStream {
    pub name: Arc<str>,
    pub endpoint: Arc<Endpoint>,
    pub inbound: mpsc::Sender<Inbound>,
    pub max_event_bytes: usize,
}

impl GetStream {
    /// Read `first` (the server's answer to the first GET), then resume it each time it ends,
    /// reconnecting with backoff when a reconnect fails outright. Returns when the server stops
    /// offering the stream or the actor is gone.
    pub async fn run(self, first: reqwest::Response) {
        let mut stream = SseMessages::new(self.name.clone(), first, self.max_event_bytes);
        let mut backoff = Backoff::new(GET_BACKOFF_MIN, GET_BACKOFF_MAX);
        loop {
            while let Some(msg) = stream.next().await {
                if self
                    .inbound
                    .send(Inbound::Message { msg, via: None })
                    .await
                    .is_err()
                {
                    return;
                }
            }
            if stream.last_event_id().is_some() {
                match stream.resume(&self.endpoint).await {
                    Ok(()) => continue,
                    Err(err) => tracing::debug!(upstream = %self.name, %err, "GET stream not resumed"),
                }
            }
            // Nothing to resume from (or resuming failed): open a fresh stream.
            loop {
                tokio::time::sleep(backoff.next_delay()).await;
                match self.endpoint.get(None).send().await {
                    Ok(resp) if resp.status().is_success() => {
                        backoff.reset();
                        stream = SseMessages::new(self.name.clone(), resp, self.max_event_bytes);
                        break;
                    }
                    Ok(resp) => {
                        tracing::debug!(upstream = %self.name, status = %resp.status(), "upstream offers no GET stream");
                        return;
                    }
                    Err(err) if self.endpoint.is_gone(gone(&err)).await => {
                        // The server is gone: the connection is down, not just this stream.
                        let reason = format!("the upstream cannot be reached: {}", error_chain(&err));
                        let _ = self.inbound.send(Inbound::Closed(reason)).await;
                        return;
                    }
                    Err(err) => {
                        tracing::debug!(upstream = %self.name, err = %error_chain(&err), "GET stream failed")
                    }
                }
            }
        }
    }
}
