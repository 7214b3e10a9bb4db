//! The actor that owns one upstream connection: it initializes the server, allocates nothing
//! itself (ids come from the handle), keeps the pending map, routes replies, notifications and
//! server-to-client requests to the right host call or session, and stops the transport.

use super::handshake::modern_params_object;
use super::host::{HostEvents, HostLink};
use super::legacy_sse::LegacySseTransport;
use super::opening::Opening;
use super::stdio::StdioTransport;
use super::ties::HostTies;
use super::{
    CallEvent, CallFailure, CallOrigin, CallParams, Command, OutboundCall, Status, UpstreamHandle,
    COMMAND_QUEUE,
};
use crate::catalog::{ListKind, Naming};
use crate::config::{Era, ServerConfig, TransportConfig, UpstreamId};
use crate::error::UpstreamError;
use crate::protocol::message::cancelled_notification;
use crate::protocol::modern::{self, MODERN_VERSION};
use crate::protocol::{ClientCaps, Message, RequestId, ResponsePayload};
use crate::util::fast_map::FastMap;
use std::sync::{Arc, Weak};
use std::time::Instant;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// Capacity of the queue of frames arriving from the transport.
const INBOUND_QUEUE: usize = 1024;

/// What transports report to their connection actor.
pub(crate) enum Inbound {
    /// A message; `via` names the request whose HTTP response stream carried it.
    Message { msg: Message, via: Option<u64> },
    /// An HTTP POST failed for a request.
    PostFailed { upstream_id: u64, error: UpstreamError },
    /// The reply stream of a request ended before its response and is being resumed.
    Paused { upstream_id: u64, retry_ms: Option<u64> },
    /// The HTTP upstream no longer knows the session `generation`: re-initialize and resend.
    SessionExpired {
        frame: String,
        upstream_id: Option<u64>,
        generation: u64,
    },
    /// The transport is gone.
    Closed(String),
}

/// Events a connection reports to its supervisor.
pub enum ConnectionEvent {
    ListChanged { kind: ListKind, via: UpstreamHandle },
}

/// Everything a connection needs from the rest of the gateway.
#[derive(Clone)]
pub struct ConnectionContext {
    /// The server's configuration as its slot started (its live settings are in `tunables`).
    pub server: Arc<ServerConfig>,
    /// The server's settings in force, read per call and per connect (a reload changes them).
    pub tunables: super::tunables::LiveTunables,
    pub id: UpstreamId,
    pub naming: Naming,
    /// Where list changes, resource updates and unclaimed log messages go.
    pub hosts: Arc<dyn HostEvents>,
    /// The route table of server-to-client requests, and per-session connections.
    pub ties: Arc<HostTies>,
    pub events: mpsc::Sender<ConnectionEvent>,
    /// The session owning this connection when `isolation = "per-session"`.
    pub owner: Option<Weak<dyn HostLink>>,
    /// What earlier connections to this server learned (shared with its slot).
    pub learned: Arc<super::Learned>,
    /// The `Authorization` header of the identity this connection acts as (`auth = {...}`).
    pub bearer: Option<Arc<dyn crate::credentials::bearer::Bearer>>,
}

pub(super) enum Transport {
    Stdio(StdioTransport),
    Http(Box<super::http::HttpTransport>),
    LegacySse(Box<LegacySseTransport>),
    /// Frames handed to a test playing the server.
    #[cfg(test)]
    Memory(mpsc::UnboundedSender<String>),
}

impl Transport {
    pub(super) fn send(&mut self, frame: String, upstream_id: Option<u64>) -> Result<(), UpstreamError> {
        match self {
            Transport::Stdio(t) => t.send(frame),
            Transport::Http(t) => t.send(frame, upstream_id),
            Transport::LegacySse(t) => t.send(frame, upstream_id),
            #[cfg(test)]
            Transport::Memory(t) => Self::to_test(t, frame),
        }
    }

    #[cfg(test)]
    fn to_test(server: &mpsc::UnboundedSender<String>, frame: String) -> Result<(), UpstreamError> {
        server.send(frame).map_err(|_| UpstreamError::Closed {
            name: "memory".into(),
            reason: "the test's server is gone".into(),
        })
    }

    /// Send a request with the headers a modern HTTP upstream needs (ignored on stdio).
    fn send_request(
        &mut self,
        frame: String,
        upstream_id: u64,
        headers: Vec<(String, String)>,
    ) -> Result<(), UpstreamError> {
        match self {
            Transport::Stdio(t) => t.send(frame),
            Transport::Http(t) => t.send_with(frame, Some(upstream_id), headers),
            Transport::LegacySse(t) => t.send(frame, Some(upstream_id)),
            #[cfg(test)]
            Transport::Memory(t) => Self::to_test(t, frame),
        }
    }

    /// Drive an HTTP upstream's POSTs until one ends (pending while none runs, and for other
    /// transports).
    async fn advance_posts(&mut self) {
        match self {
            Transport::Http(t) => t.advance_posts().await,
            _ => std::future::pending().await,
        }
    }

    /// When a stdio child first wrote on stdout (`None` for other transports).
    fn first_output(&self) -> Option<super::startup::FirstOutput> {
        match self {
            Transport::Stdio(t) => Some(t.first_output()),
            _ => None,
        }
    }

    pub(super) async fn stop(self) {
        match self {
            Transport::Stdio(t) => t.stop().await,
            Transport::Http(t) => (*t).stop().await,
            Transport::LegacySse(t) => (*t).stop().await,
            #[cfg(test)]
            Transport::Memory(_) => {}
        }
    }
}

pub(super) struct Pending {
    pub(super) origin: CallOrigin,
    pub(super) started: Instant,
    pub(super) span: tracing::Span,
    /// What telemetry hears of it: timed and counted in flight until answered.
    pub(super) leg: Option<crate::telemetry::UpstreamLeg>,
}

/// Start a connection task; the handle is usable at once (calls queue until ready).
pub fn spawn_connection(ctx: ConnectionContext) -> UpstreamHandle {
    let (commands_tx, commands_rx) = mpsc::channel(COMMAND_QUEUE);
    let (status_tx, status_rx) = watch::channel(Status::Starting);
    let stop = CancellationToken::new();
    let name: Arc<str> = ctx.server.name.as_str().into();
    let handle = UpstreamHandle::new(name, ctx.id.clone(), commands_tx, status_rx, stop.clone());
    let actor = Actor {
        ctx,
        handle: handle.clone(),
        pending: FastMap::default(),
        status: status_tx,
        modern: false,
    };
    tokio::spawn(actor.run(commands_rx, stop));
    handle
}

pub(super) struct Actor {
    pub(super) ctx: ConnectionContext,
    pub(super) handle: UpstreamHandle,
    pub(super) pending: FastMap<u64, Pending>,
    pub(super) status: watch::Sender<Status>,
    /// The upstream speaks 2026-07-28: requests carry the envelope, nothing is sessioned.
    pub(super) modern: bool,
}

impl Actor {
    pub(super) fn name(&self) -> &str {
        &self.ctx.server.name
    }

    async fn run(self, commands: mpsc::Receiver<Command>, stop: CancellationToken) {
        match self.open_transport() {
            Ok((transport, inbound)) => self.serve(transport, inbound, commands, stop).await,
            Err(err) => {
                self.report_end(&err.detail());
                self.status.send_replace(Status::Down(err.detail()));
            }
        }
    }

    /// Spawn the child or set up the HTTP client, with the queue it reports to.
    pub(super) fn open_transport(&self) -> Result<(Transport, mpsc::Receiver<Inbound>), UpstreamError> {
        let (inbound_tx, inbound) = mpsc::channel(INBOUND_QUEUE);
        let transport = match &self.ctx.server.transport {
            TransportConfig::Stdio { .. } => StdioTransport::spawn(
                self.handle.name().into(),
                &self.ctx.server.transport,
                self.ctx.tunables.load().max_line_bytes,
                inbound_tx,
            )
            .map(Transport::Stdio),
            TransportConfig::Http { .. } => {
                super::legacy_link::http_transport(self.handle.name().into(), &self.ctx, inbound_tx)
            }
        }?;
        Ok((transport, inbound))
    }

    /// Log why the connection ended, once: a shared connection's end is logged by its
    /// supervisor (with what it does next), a per-session one's here.
    fn report_end(&self, reason: &str) {
        if self.ctx.owner.is_some() && reason != "stopped" {
            tracing::warn!(upstream = %self.name(), %reason, "per-session upstream connection ended");
        }
    }

    /// Open the connection over `transport` and serve it until it ends or is stopped.
    pub(super) async fn serve(
        mut self,
        mut transport: Transport,
        mut inbound: mpsc::Receiver<Inbound>,
        mut commands: mpsc::Receiver<Command>,
        stop: CancellationToken,
    ) {
        let limit = self.ctx.tunables.load().handshake_timeout;
        let (name, first_output) = (self.handle.name().to_string(), transport.first_output());
        let opening = self.initialize(&mut transport, &mut inbound);
        let opening = super::startup::bounded(&name, limit, first_output, opening);
        let reason = tokio::select! {
            r = opening => match r {
                Ok(opened) => opened.err(),
                Err(why) => Some(self.describe_end(&mut transport, why).await),
            },
            _ = stop.cancelled() => Some("stopped".to_string()),
        };
        let handle = self.handle.clone();
        // Waiting on `stop` once for the connection's life, not again at every wake-up.
        let stopped = stop.cancelled();
        tokio::pin!(stopped);
        let reason = match reason {
            Some(reason) => reason,
            None => loop {
                if handle.has_urgent() {
                    self.on_urgent(&mut transport);
                }
                tokio::select! {
                    Some(cmd) = commands.recv() => match cmd {
                        Command::Abandon(reason) => break reason,
                        cmd => self.on_command(&mut transport, cmd),
                    },
                    item = inbound.recv() => match item {
                        Some(Inbound::Closed(reason)) => {
                            let lost = self.reconnect_legacy(&mut transport, &mut inbound, &mut commands, reason, &stop);
                            if let Err(reason) = lost.await {
                                break self.describe_end(&mut transport, reason).await;
                            }
                        }
                        Some(Inbound::SessionExpired { frame, upstream_id, generation }) => {
                            self.recover_session(&mut transport, frame, upstream_id, generation).await
                        }
                        Some(item) => self.on_inbound(&mut transport, item),
                        None => break "transport ended".to_string(),
                    },
                    _ = &mut stopped => break "stopped".to_string(),
                    // An HTTP upstream's POSTs run on this task: their replies come back on
                    // `inbound` (the next turn of the loop takes them).
                    _ = transport.advance_posts() => {}
                }
            },
        };
        self.report_end(&reason);
        self.fail_all(&reason);
        commands.close();
        while let Ok(cmd) = commands.try_recv() {
            if let Command::Call(call) = cmd {
                self.fail_origin(call.origin, self.closed_error(&reason));
            }
        }
        transport.stop().await;
        self.status.send_replace(Status::Down(reason));
    }

    /// `reason` with what a stdio child says of its end (exit status, last stderr lines).
    pub(super) async fn describe_end(&self, transport: &mut Transport, reason: String) -> String {
        match transport {
            Transport::Stdio(t) => {
                let ended = reason != "stopped";
                t.describe_end(reason, ended).await
            }
            _ => reason,
        }
    }

    fn closed_error(&self, reason: &str) -> UpstreamError {
        UpstreamError::Closed {
            name: self.name().to_string(),
            reason: reason.to_string(),
        }
    }

    /// An HTTP upstream forgot the session a request used: open a new one (once per lost
    /// session, however many requests report it) and send the request again.
    async fn recover_session(
        &mut self,
        transport: &mut Transport,
        frame: String,
        upstream_id: Option<u64>,
        generation: u64,
    ) {
        let Transport::Http(t) = transport else { return };
        if t.generation() == generation {
            tracing::info!(upstream = %self.name(), "upstream session expired; re-initializing");
            match t.establish_session(self.handle.next_id()).await {
                Ok(facts) => {
                    self.status.send_replace(Status::Ready(Arc::new(facts)));
                }
                Err(reason) => {
                    tracing::warn!(upstream = %self.name(), %reason, "re-initialize failed");
                    if let Some(id) = upstream_id {
                        let reason = format!("re-initialize failed: {reason}");
                        self.fail_pending(id, UpstreamError::unavailable(self.name().to_string(), reason));
                    }
                    return;
                }
            }
        }
        self.send_frame(transport, frame, upstream_id);
    }

    /// Find out which era the upstream speaks and open it: `server/discover` first (a result
    /// naming 2026-07-28 means modern), else the `initialize` handshake.
    async fn initialize(
        &mut self,
        transport: &mut Transport,
        inbound: &mut mpsc::Receiver<Inbound>,
    ) -> Result<(), String> {
        let probe = self.ctx.server.era == Era::Auto && !self.ctx.learned.probe_kills();
        let facts = match transport {
            Transport::Http(_) | Transport::LegacySse(_) => self.open_http(transport, inbound, probe).await?,
            Transport::Stdio(_) if probe => match self.discover_or_handshake(transport, inbound).await {
                Ok(facts) => facts,
                Err(Opening::ProbeEnded(reason)) => {
                    self.respawn_without_probe(transport, inbound, reason).await?
                }
                Err(Opening::Failed(reason)) => return Err(reason),
            },
            _ => self.handshake(transport, inbound, None).await?,
        };
        self.ctx
            .learned
            .set_legacy_sse(matches!(transport, Transport::LegacySse(_)));
        self.modern = facts.protocol_version == MODERN_VERSION;
        self.handle.set_modern(self.modern);
        tracing::info!(upstream = %self.name(), version = %facts.protocol_version, "upstream initialized");
        if self.modern {
            super::listen::keep_listening(self.handle.clone(), &facts);
        }
        super::health::watch(self.handle.clone(), self.ctx.tunables.clone());
        self.status.send_replace(Status::Ready(Arc::new(facts)));
        Ok(())
    }

    fn on_command(&mut self, transport: &mut Transport, cmd: Command) {
        match cmd {
            Command::Call(call) => self.send_call(transport, call),
            Command::Notify { method, params } => {
                let frame = Message::Notification { method, params }.to_json();
                self.send_frame(transport, frame, None);
            }
            // The loop takes the urgent lane before the next command.
            Command::Abandon(_) | Command::Wake => {}
        }
    }

    /// Cancellations and host answers, which skip the command queue.
    fn on_urgent(&mut self, transport: &mut Transport) {
        let urgent = self.handle.take_urgent();
        for (upstream_id, reason) in urgent.cancels {
            if self.pending.remove(&upstream_id).is_none() {
                continue;
            }
            match transport {
                // A modern HTTP upstream is told by closing the request's stream.
                Transport::Http(t) if self.modern => t.abort(upstream_id),
                _ => {
                    let frame = cancelled_notification(&upstream_id.to_string(), &reason).to_json();
                    self.send_frame(transport, frame, None);
                }
            }
        }
        for (upstream_id, payload) in urgent.answers {
            let frame = Message::Response {
                id: Some(upstream_id),
                payload,
            }
            .to_json();
            self.send_frame(transport, frame, None);
        }
    }

    fn send_frame(&mut self, transport: &mut Transport, frame: String, upstream_id: Option<u64>) {
        if let Err(err) = transport.send(frame, upstream_id) {
            tracing::warn!(upstream = %self.name(), %err, "could not send to upstream");
            if let Some(id) = upstream_id {
                self.fail_pending(id, err);
            }
        }
    }

    fn send_call(&mut self, transport: &mut Transport, call: OutboundCall) {
        let OutboundCall {
            upstream_id,
            method,
            params,
            origin,
            param_headers,
            span,
            trace_headers,
            target,
        } = call;
        let in_call = span.enter();
        // Read per call: a reload changes it for the next call, calls in flight stay.
        let max_in_flight = self.ctx.tunables.load().max_in_flight;
        if matches!(origin, CallOrigin::Host { .. }) && self.host_calls() >= max_in_flight {
            crate::telemetry::record::refused(crate::telemetry::Refusal::Overload);
            let error = UpstreamError::Overloaded {
                name: self.name().to_string(),
                reason: format!("{max_in_flight} requests in flight (max_in_flight)"),
            };
            return self.fail_origin(origin, error);
        }
        let mut headers = trace_headers;
        let params = if self.modern {
            let (caps, level) = match &origin {
                CallOrigin::Host { host, .. } => (host.caps(), host.log_level_name()),
                CallOrigin::Internal(_) => (ClientCaps::ALL, None),
            };
            let params = modern_params_object(
                params.map(CallParams::into_object).unwrap_or_default(),
                caps,
                level,
            );
            headers.extend(
                modern::request_headers(&method, Some(&params), MODERN_VERSION)
                    .into_iter()
                    .map(|(name, value)| (name.to_string(), value))
                    .chain(param_headers),
            );
            Some(params.to_raw())
        } else {
            params.map(CallParams::into_raw)
        };
        let leg = Some(crate::telemetry::UpstreamLeg::start(self.name(), &method, target));
        let frame = Message::Request {
            id: RequestId::number(upstream_id),
            method,
            params,
        }
        .to_json();
        tracing::debug!(upstream = %self.name(), upstream_id, "request sent upstream");
        drop(in_call);
        self.pending.insert(
            upstream_id,
            Pending {
                origin,
                started: Instant::now(),
                span,
                leg,
            },
        );
        if let Err(err) = transport.send_request(frame, upstream_id, headers) {
            tracing::warn!(upstream = %self.name(), %err, "could not send to upstream");
            self.fail_pending(upstream_id, err);
        }
    }

    /// Host calls waiting on this connection.
    fn host_calls(&self) -> usize {
        (self.pending.values())
            .filter(|p| matches!(p.origin, CallOrigin::Host { .. }))
            .count()
    }

    fn fail_pending(&mut self, upstream_id: u64, error: UpstreamError) {
        if let Some(p) = self.pending.remove(&upstream_id) {
            crate::telemetry::UpstreamLeg::failed(p.leg, error.code());
            self.fail_origin(p.origin, error);
        }
    }

    pub(super) fn fail_origin(&self, origin: CallOrigin, error: UpstreamError) {
        match origin {
            CallOrigin::Internal(tx) => {
                let _ = tx.send(Err(CallFailure::Upstream(error)));
            }
            CallOrigin::Host { sink, .. } => {
                sink.finish(CallEvent::Failed(error));
            }
        }
    }

    pub(super) fn fail_all(&mut self, reason: &str) {
        let error = self.closed_error(reason);
        for (_, p) in self.pending.drain().collect::<Vec<_>>() {
            crate::telemetry::UpstreamLeg::failed(p.leg, error.code());
            self.fail_origin(p.origin, error.clone());
        }
        self.ctx.ties.routes.forget_connection(&self.handle);
    }

    fn on_inbound(&mut self, transport: &mut Transport, item: Inbound) {
        match item {
            Inbound::Message { msg, via } => self.on_message(transport, msg, via),
            Inbound::PostFailed { upstream_id, error } => self.fail_pending(upstream_id, error),
            Inbound::Paused {
                upstream_id,
                retry_ms,
            } => {
                if let Some(CallOrigin::Host { sink, .. }) = self.pending.get(&upstream_id).map(|p| &p.origin)
                {
                    if sink.try_send(CallEvent::Paused { retry_ms }).is_err() {
                        tracing::debug!(upstream = %self.name(), upstream_id, "a paused call's host stream is full or gone");
                    }
                }
            }
            Inbound::SessionExpired { .. } | Inbound::Closed(_) => {}
        }
    }

    fn on_message(&mut self, transport: &mut Transport, msg: Message, via: Option<u64>) {
        match msg {
            Message::Response { id, payload } => self.on_response(id, payload),
            Message::Request { id, method, params } => {
                self.on_server_request(transport, id, method, params, via)
            }
            Message::Notification { method, params } => self.on_notification(method, params, via),
        }
    }

    fn on_response(&mut self, id: Option<RequestId>, payload: ResponsePayload) {
        let Some(upstream_id) = id.as_ref().and_then(RequestId::as_u64) else {
            let id = id.map_or_else(|| "null".to_string(), |id| id.to_string());
            tracing::warn!(upstream = %self.name(), %id, "response with an id mcpmux never sent");
            return;
        };
        let Some(pending) = self.pending.remove(&upstream_id) else {
            tracing::debug!(upstream = %self.name(), upstream_id, "dropping a late or unknown response");
            return;
        };
        pending.span.in_scope(|| {
            let elapsed_us = pending.started.elapsed().as_micros() as u64;
            tracing::debug!(upstream = %self.name(), upstream_id, elapsed_us, "upstream answered");
        });
        if let Some(leg) = pending.leg {
            let tool = leg.is_tool_call();
            leg.finish(crate::telemetry::outcome::of_payload(&payload, tool));
        }
        match pending.origin {
            CallOrigin::Internal(tx) => {
                let _ = tx.send(match payload {
                    ResponsePayload::Result(r) => Ok(r),
                    ResponsePayload::Error(e) => Err(CallFailure::Rpc(e)),
                });
            }
            CallOrigin::Host { sink, .. } => {
                sink.finish(CallEvent::Response(Message::Response { id, payload }));
            }
        }
    }
}
