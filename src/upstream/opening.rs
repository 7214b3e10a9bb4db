//! The opening of a connection before it serves calls: the stdio era probe (`server/discover`,
//! then `initialize` after an error or 5 s of silence, a late discover answer still winning;
//! a server that exits on the probe is reported as such, see [`Opening::ProbeEnded`]) and the
//! `initialize` handshake, answering pings and refusing other server requests meanwhile.

use super::connection::{Actor, Inbound, Transport};
use super::handshake::{
    discover_request, initialize_request, initialized_notification, read_discover_result,
    read_initialize_result,
};
use super::ServerFacts;
use crate::error::{codes, UpstreamError};
use crate::protocol::message::{error_object, raw};
use crate::protocol::{Message, ResponsePayload};
use std::time::Duration;
use tokio::sync::mpsc;

/// How long a stdio server may take to answer `server/discover` before `initialize` is sent
/// too (some ignore unknown methods before `initialize`).
const DISCOVER_TIMEOUT: Duration = Duration::from_secs(5);

/// Why an opening step gave up: the server's `handshake_timeout_secs` ran out.
pub(super) fn timed_out(limit: Duration) -> String {
    format!(
        "no answer to the opening handshake within {} s (handshake_timeout_secs)",
        limit.as_secs()
    )
}

/// Why a stdio server's opening with the era probe failed.
pub(super) enum Opening {
    /// The server exited (its transport ended) after a `server/discover` it never answered:
    /// old Python SDKs (`mcp` 1.2 to 1.9.0) fail on a method they do not know before
    /// `initialize`, and exit when the next line arrives. Starting it again with `initialize`
    /// alone may well work.
    ProbeEnded(String),
    Failed(String),
}

/// Why no answer came during the opening, and whether the transport ended.
pub(super) struct Unanswered {
    reason: String,
    ended: bool,
}

impl Unanswered {
    fn failed(reason: String) -> Self {
        Unanswered { reason, ended: false }
    }
}

impl From<Unanswered> for String {
    fn from(unanswered: Unanswered) -> Self {
        unanswered.reason
    }
}

impl Actor {
    /// Probe a stdio server with `server/discover`; an error or an answer without 2026-07-28
    /// means it speaks the session era (`initialize`). After 5 s of silence `initialize` is sent
    /// too, and whichever answer comes first decides: a slow-starting modern server may still
    /// answer the probe (and then refuse `initialize`).
    pub(super) async fn discover_or_handshake(
        &mut self,
        transport: &mut Transport,
        inbound: &mut mpsc::Receiver<Inbound>,
    ) -> Result<ServerFacts, Opening> {
        let id = self.handle.next_id();
        self.send_early(transport, discover_request(id), id)
            .map_err(|u| Opening::Failed(u.reason))?;
        let deadline = tokio::time::Instant::now() + DISCOVER_TIMEOUT;
        match self.await_answer(transport, inbound, &[id], deadline).await {
            Ok((_, payload)) => match read_discover_result(payload) {
                Some(facts) => Ok(facts),
                None => (self.exchange_initialize(transport, inbound, None).await)
                    .map_err(|u| Opening::Failed(u.reason)),
            },
            Err(Unanswered { reason, ended: true }) => Err(Opening::ProbeEnded(reason)),
            Err(Unanswered { reason, .. }) => {
                tracing::debug!(upstream = %self.name(), %reason, "no answer to server/discover yet; trying initialize");
                // Some servers (Python `mcp` 1.6) stop at the probe but only exit once more
                // input arrives: the `initialize` that follows it.
                (self.exchange_initialize(transport, inbound, Some(id)).await).map_err(|u| match u.ended {
                    true => Opening::ProbeEnded(u.reason),
                    false => Opening::Failed(u.reason),
                })
            }
        }
    }

    /// The child exited on the `server/discover` probe: start it once more and open it with
    /// `initialize` alone. If that works, the server is opened that way from now on (the
    /// verdict outlives this connection); if not, the connection fails as usual.
    pub(super) async fn respawn_without_probe(
        &mut self,
        transport: &mut Transport,
        inbound: &mut mpsc::Receiver<Inbound>,
        reason: String,
    ) -> Result<ServerFacts, String> {
        tracing::info!(
            upstream = %self.name(),
            %reason,
            "the server exited on the server/discover probe; starting it again with initialize"
        );
        let (fresh, fresh_inbound) = self.open_transport().map_err(|e| e.detail())?;
        std::mem::replace(transport, fresh).stop().await;
        *inbound = fresh_inbound;
        let facts = self.handshake(transport, inbound, None).await?;
        self.ctx.learned.set_probe_kills();
        tracing::info!(upstream = %self.name(), "the server speaks the session era only; it is opened with initialize from now on");
        Ok(facts)
    }

    /// Send `initialize`, wait for the answer, send `initialized`; a late answer to the
    /// discover probe `late_discover` that says 2026-07-28 wins instead.
    pub(super) async fn handshake(
        &mut self,
        transport: &mut Transport,
        inbound: &mut mpsc::Receiver<Inbound>,
        late_discover: Option<u64>,
    ) -> Result<ServerFacts, String> {
        (self.exchange_initialize(transport, inbound, late_discover).await).map_err(String::from)
    }

    /// [`Actor::handshake`], saying whether a failure was the transport ending.
    async fn exchange_initialize(
        &mut self,
        transport: &mut Transport,
        inbound: &mut mpsc::Receiver<Inbound>,
        late_discover: Option<u64>,
    ) -> Result<ServerFacts, Unanswered> {
        let id = self.handle.next_id();
        self.send_early(transport, initialize_request(id), id)?;
        // The connection's opening clock decides (`startup`); this only bounds the wait.
        let bound = super::startup::opening_bound(self.ctx.tunables.load().handshake_timeout);
        let deadline = tokio::time::Instant::now() + bound;
        let mut waiting: Vec<u64> = std::iter::once(id).chain(late_discover).collect();
        loop {
            let (answered, payload) = self.await_answer(transport, inbound, &waiting, deadline).await?;
            if answered == id {
                let facts = read_initialize_result(payload).map_err(Unanswered::failed)?;
                transport
                    .send(initialized_notification().to_json(), None)
                    .map_err(|e| Unanswered::failed(e.detail()))?;
                return Ok(facts);
            }
            if let Some(facts) = read_discover_result(payload) {
                return Ok(facts);
            }
            waiting.retain(|w| *w == id);
        }
    }

    /// Send a request before the connection is open; a closed transport counts as ended.
    fn send_early(&self, transport: &mut Transport, request: Message, id: u64) -> Result<(), Unanswered> {
        transport
            .send(request.to_json(), Some(id))
            .map_err(|e| Unanswered {
                reason: e.detail(),
                ended: matches!(e, UpstreamError::Closed { .. }),
            })
    }

    /// Wait for the answer to one of `ids` before the connection is open (answering pings,
    /// refusing other server requests meanwhile).
    async fn await_answer(
        &mut self,
        transport: &mut Transport,
        inbound: &mut mpsc::Receiver<Inbound>,
        ids: &[u64],
        deadline: tokio::time::Instant,
    ) -> Result<(u64, ResponsePayload), Unanswered> {
        let method = "the opening handshake";
        let ended = |reason: String| Unanswered { reason, ended: true };
        loop {
            let Ok(item) = tokio::time::timeout_at(deadline, inbound.recv()).await else {
                let reason = format!("no answer to {method} in time");
                return Err(Unanswered {
                    reason: self.describe_end(transport, reason).await,
                    ended: false,
                });
            };
            match item {
                None => return Err(ended(format!("transport ended during {method}"))),
                Some(Inbound::Closed(reason)) => {
                    let reason = format!("{reason} during {method}");
                    return Err(ended(self.describe_end(transport, reason).await));
                }
                Some(Inbound::PostFailed { upstream_id, error }) if ids.contains(&upstream_id) => {
                    return Err(Unanswered {
                        reason: error.detail(),
                        ended: false,
                    })
                }
                Some(
                    Inbound::SessionExpired { .. } | Inbound::Paused { .. } | Inbound::PostFailed { .. },
                ) => {}
                Some(Inbound::Message {
                    msg:
                        Message::Response {
                            id: Some(rid),
                            payload,
                        },
                    ..
                }) if rid.as_u64().is_some_and(|r| ids.contains(&r)) => {
                    return Ok((rid.as_u64().unwrap_or_default(), payload))
                }
                Some(Inbound::Message {
                    msg: Message::Request { id, method, .. },
                    ..
                }) => {
                    let payload = if method == "ping" {
                        ResponsePayload::Result(raw("{}".into()))
                    } else {
                        ResponsePayload::Error(error_object(
                            codes::INVALID_REQUEST,
                            "not initialized yet",
                            None,
                        ))
                    };
                    let reply = Message::Response {
                        id: Some(id),
                        payload,
                    };
                    let _ = transport.send(reply.to_json(), None);
                }
                Some(Inbound::Message { .. }) => {}
            }
        }
    }
}
