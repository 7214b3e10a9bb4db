//! The opening of a connection before it serves calls: the stdio era probe (`server/discover`,
//! then `initialize` after an error or 5 s of silence, a late discover answer still winning)
//! and the `initialize` handshake, answering pings and refusing other server requests meanwhile.

use super::connection::{Actor, Inbound, Transport};
use super::handshake::{
    discover_request, initialize_request, initialized_notification, read_discover_result,
    read_initialize_result,
};
use super::ServerFacts;
use crate::error::codes;
use crate::protocol::message::{error_object, raw};
use crate::protocol::{Message, ResponsePayload};
use std::time::Duration;
use tokio::sync::mpsc;

/// How long an upstream may take to answer `initialize`.
const INIT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a stdio server may take to answer `server/discover` before `initialize` is sent
/// too (some ignore unknown methods before `initialize`).
const DISCOVER_TIMEOUT: Duration = Duration::from_secs(5);

impl Actor {
    /// Probe a stdio server with `server/discover`; an error or an answer without 2026-07-28
    /// means it speaks the session era (`initialize`). After 5 s of silence `initialize` is sent
    /// too, and whichever answer comes first decides: a slow-starting modern server may still
    /// answer the probe (and then refuse `initialize`).
    pub(super) async fn discover_or_handshake(
        &mut self,
        transport: &mut Transport,
        inbound: &mut mpsc::Receiver<Inbound>,
    ) -> Result<ServerFacts, String> {
        let id = self.handle.next_id();
        self.send_early(transport, discover_request(id), id)?;
        let deadline = tokio::time::Instant::now() + DISCOVER_TIMEOUT;
        match self.await_answer(transport, inbound, &[id], deadline).await {
            Ok((_, payload)) => match read_discover_result(payload) {
                Some(facts) => Ok(facts),
                None => self.handshake(transport, inbound, None).await,
            },
            Err(reason) => {
                tracing::debug!(upstream = %self.name(), %reason, "no answer to server/discover yet; trying initialize");
                self.handshake(transport, inbound, Some(id)).await
            }
        }
    }

    /// Send `initialize`, wait for the answer, send `initialized`; a late answer to the
    /// discover probe `late_discover` that says 2026-07-28 wins instead.
    pub(super) async fn handshake(
        &mut self,
        transport: &mut Transport,
        inbound: &mut mpsc::Receiver<Inbound>,
        late_discover: Option<u64>,
    ) -> Result<ServerFacts, String> {
        let id = self.handle.next_id();
        self.send_early(transport, initialize_request(id), id)?;
        let deadline = tokio::time::Instant::now() + INIT_TIMEOUT;
        let mut waiting: Vec<u64> = std::iter::once(id).chain(late_discover).collect();
        loop {
            let (answered, payload) = self.await_answer(transport, inbound, &waiting, deadline).await?;
            if answered == id {
                let facts = read_initialize_result(payload)?;
                transport
                    .send(initialized_notification().to_json(), None)
                    .map_err(|e| e.to_string())?;
                return Ok(facts);
            }
            if let Some(facts) = read_discover_result(payload) {
                return Ok(facts);
            }
            waiting.retain(|w| *w == id);
        }
    }

    fn send_early(&self, transport: &mut Transport, request: Message, id: u64) -> Result<(), String> {
        transport
            .send(request.to_json(), Some(id))
            .map_err(|e| e.to_string())
    }

    /// Wait for the answer to one of `ids` before the connection is open (answering pings,
    /// refusing other server requests meanwhile).
    async fn await_answer(
        &mut self,
        transport: &mut Transport,
        inbound: &mut mpsc::Receiver<Inbound>,
        ids: &[u64],
        deadline: tokio::time::Instant,
    ) -> Result<(u64, ResponsePayload), String> {
        let method = "the opening handshake";
        loop {
            let item = tokio::time::timeout_at(deadline, inbound.recv())
                .await
                .map_err(|_| format!("no answer to {method} in time"))?;
            match item {
                None => return Err(format!("transport ended during {method}")),
                Some(Inbound::Closed(reason)) => {
                    return Err(self.describe_exit(transport, format!("{reason} during {method}")))
                }
                Some(Inbound::PostFailed { upstream_id, error }) if ids.contains(&upstream_id) => {
                    return Err(error.to_string())
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
