//! The actor that owns one upstream connection: it initializes the server, allocates nothing
//! itself (ids come from the handle), keeps the pending map, routes replies, notifications and
//! server-to-client requests to the right host call or session, and stops the transport.

use super::http::HttpTransport;
use super::stdio::StdioTransport;
use super::{
    CallEvent, CallFailure, CallOrigin, Command, OutboundCall, ServerFacts, Status, UpstreamHandle,
    COMMAND_QUEUE,
};
use crate::catalog::{ListKind, Naming};
use crate::config::{ServerConfig, TransportConfig};
use crate::downstream::session::{cancelled_notification, ServerRequestRoute, Session};
use crate::downstream::SessionRegistry;
use crate::error::{codes, UpstreamError};
use crate::protocol::message::{error_object, json_string, raw, to_raw};
use crate::protocol::version::{LATEST_SESSION_ERA, UPSTREAM_ACCEPTED_VERSIONS};
use crate::protocol::{Message, RawObject, RequestId, ResponsePayload};
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

/// How long an upstream may take to answer `initialize`.
const INIT_TIMEOUT: Duration = Duration::from_secs(60);
/// Capacity of the queue of frames arriving from the transport.
const INBOUND_QUEUE: usize = 1024;

/// What transports report to their connection actor.
pub(crate) enum Inbound {
    /// A message; `via` names the request whose HTTP response stream carried it.
    Message { msg: Message, via: Option<u64> },
    /// The HTTP upstream assigned a session id.
    SessionId(String),
    /// An HTTP POST failed for a request.
    PostFailed { upstream_id: u64, error: UpstreamError },
    /// The HTTP upstream no longer knows our session: re-initialize and resend.
    SessionExpired { frame: String, upstream_id: Option<u64> },
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
    pub server: Arc<ServerConfig>,
    pub index: usize,
    pub naming: Naming,
    pub sessions: Arc<SessionRegistry>,
    pub events: mpsc::Sender<ConnectionEvent>,
    /// The session owning this connection when `isolation = "per-session"`.
    pub owner: Option<Weak<Session>>,
}

enum Transport {
    Stdio(StdioTransport),
    Http(Box<HttpTransport>),
}

impl Transport {
    fn send(&mut self, frame: String, upstream_id: Option<u64>) -> Result<(), UpstreamError> {
        match self {
            Transport::Stdio(t) => t.send(frame),
            Transport::Http(t) => t.send(frame, upstream_id),
        }
    }

    async fn stop(self) {
        match self {
            Transport::Stdio(t) => t.stop().await,
            Transport::Http(t) => (*t).stop().await,
        }
    }
}

struct Pending {
    origin: CallOrigin,
    started: Instant,
}

struct ForwardedServerRequest {
    session: Weak<Session>,
    downstream_id: u64,
    sink: Option<mpsc::Sender<CallEvent>>,
}

/// Start a connection task; the handle is usable at once (calls queue until ready).
pub fn spawn_connection(ctx: ConnectionContext) -> UpstreamHandle {
    let (commands_tx, commands_rx) = mpsc::channel(COMMAND_QUEUE);
    let (status_tx, status_rx) = watch::channel(Status::Starting);
    let stop = CancellationToken::new();
    let name: Arc<str> = ctx.server.name.as_str().into();
    let handle = UpstreamHandle::new(name, ctx.index, commands_tx, status_rx, stop.clone());
    let actor = Actor {
        ctx,
        handle: handle.clone(),
        pending: HashMap::new(),
        forwarded: HashMap::new(),
        status: status_tx,
        resend: None,
    };
    tokio::spawn(actor.run(commands_rx, stop));
    handle
}

struct Actor {
    ctx: ConnectionContext,
    handle: UpstreamHandle,
    pending: HashMap<u64, Pending>,
    forwarded: HashMap<RequestId, ForwardedServerRequest>,
    status: watch::Sender<Status>,
    /// While re-initializing an HTTP session: frames to send once it is back.
    resend: Option<Vec<(String, Option<u64>)>>,
}

impl Actor {
    fn name(&self) -> &str {
        &self.ctx.server.name
    }

    async fn run(mut self, mut commands: mpsc::Receiver<Command>, stop: CancellationToken) {
        let (inbound_tx, mut inbound) = mpsc::channel(INBOUND_QUEUE);
        let transport = match &self.ctx.server.transport {
            TransportConfig::Stdio { .. } => StdioTransport::spawn(
                self.handle.name().into(),
                &self.ctx.server.transport,
                self.ctx.server.max_line_bytes,
                inbound_tx,
            )
            .map(Transport::Stdio),
            TransportConfig::Http { url, headers } => HttpTransport::new(
                self.handle.name().into(),
                url,
                headers,
                self.ctx.server.max_line_bytes,
                inbound_tx,
            )
            .map(|t| Transport::Http(Box::new(t))),
        };
        let mut transport = match transport {
            Ok(t) => t,
            Err(err) => {
                tracing::error!(upstream = %self.name(), %err, "cannot start upstream");
                self.status.send_replace(Status::Down(err.to_string()));
                return;
            }
        };
        let reason = tokio::select! {
            r = self.initialize(&mut transport, &mut inbound) => r.err(),
            _ = stop.cancelled() => Some("stopped".to_string()),
        };
        let reason = match reason {
            Some(reason) => reason,
            None => loop {
                tokio::select! {
                    Some(cmd) = commands.recv() => self.on_command(&mut transport, cmd),
                    item = inbound.recv() => match item {
                        Some(Inbound::Closed(reason)) | Some(Inbound::PostFailed { error: UpstreamError::Closed { reason, .. }, upstream_id: 0 }) => {
                            break self.describe_exit(&mut transport, reason);
                        }
                        Some(item) => self.on_inbound(&mut transport, item),
                        None => break "transport ended".to_string(),
                    },
                    _ = stop.cancelled() => break "stopped".to_string(),
                }
            },
        };
        if reason != "stopped" {
            tracing::warn!(upstream = %self.name(), %reason, "upstream connection lost");
        }
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

    fn describe_exit(&self, transport: &mut Transport, reason: String) -> String {
        match transport {
            Transport::Stdio(t) => match t.exit_status() {
                Some(status) => format!("{reason}; process {status}"),
                None => reason,
            },
            Transport::Http(_) => reason,
        }
    }

    fn closed_error(&self, reason: &str) -> UpstreamError {
        UpstreamError::Closed {
            name: self.name().to_string(),
            reason: reason.to_string(),
        }
    }

    /// Send `initialize`, wait for the answer (serving pings meanwhile), send `initialized`.
    async fn initialize(
        &mut self,
        transport: &mut Transport,
        inbound: &mut mpsc::Receiver<Inbound>,
    ) -> Result<(), String> {
        let facts = self.handshake(transport, inbound).await?;
        tracing::info!(upstream = %self.name(), version = %facts.protocol_version, "upstream initialized");
        self.status.send_replace(Status::Ready(Arc::new(facts)));
        Ok(())
    }

    async fn handshake(
        &mut self,
        transport: &mut Transport,
        inbound: &mut mpsc::Receiver<Inbound>,
    ) -> Result<ServerFacts, String> {
        let id = self.handle.next_id();
        let frame = initialize_request(id).to_json();
        transport.send(frame, Some(id)).map_err(|e| e.to_string())?;
        let deadline = tokio::time::Instant::now() + INIT_TIMEOUT;
        loop {
            let item = tokio::time::timeout_at(deadline, inbound.recv())
                .await
                .map_err(|_| format!("no answer to initialize within {} s", INIT_TIMEOUT.as_secs()))?;
            match item {
                None => return Err("transport ended during initialize".into()),
                Some(Inbound::Closed(reason)) => {
                    return Err(self.describe_exit(transport, format!("{reason} during initialize")))
                }
                Some(Inbound::PostFailed { error, .. }) => return Err(error.to_string()),
                Some(Inbound::SessionExpired { .. }) => {
                    return Err("session refused during initialize".into())
                }
                Some(Inbound::SessionId(sid)) => {
                    if let Transport::Http(t) = transport {
                        t.set_session_id(Some(sid));
                    }
                }
                Some(Inbound::Message {
                    msg:
                        Message::Response {
                            id: Some(rid),
                            payload,
                        },
                    ..
                }) if rid.as_u64() == Some(id) => {
                    let facts = read_initialize_result(payload)?;
                    if let Transport::Http(t) = transport {
                        t.set_protocol_version(&facts.protocol_version);
                    }
                    let initialized = Message::Notification {
                        method: "notifications/initialized".into(),
                        params: None,
                    };
                    transport
                        .send(initialized.to_json(), None)
                        .map_err(|e| e.to_string())?;
                    if let Transport::Http(t) = transport {
                        t.open_get_stream();
                    }
                    return Ok(facts);
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

    /// Re-initialize an HTTP upstream that forgot our session, then resend what was queued.
    fn start_reinitialize(&mut self, transport: &mut Transport, frame: String, upstream_id: Option<u64>) {
        if let Some(queue) = self.resend.as_mut() {
            queue.push((frame, upstream_id));
            return;
        }
        tracing::info!(upstream = %self.name(), "upstream session expired; re-initializing");
        self.resend = Some(vec![(frame, upstream_id)]);
        if let Transport::Http(t) = transport {
            t.set_session_id(None);
        }
        let id = self.handle.next_id();
        let (tx, rx) = oneshot::channel();
        self.pending.insert(
            id,
            Pending {
                origin: CallOrigin::Internal(tx),
                started: Instant::now(),
            },
        );
        let frame = initialize_request(id).to_json();
        if let Err(err) = transport.send(frame, Some(id)) {
            self.pending.remove(&id);
            self.fail_resend(&err.to_string());
            return;
        }
        // The answer arrives through the pending map; the actor finishes the exchange then.
        let handle = self.handle.clone();
        tokio::spawn(async move {
            let outcome = rx.await;
            handle.reinitialized(outcome.is_ok_and(|r| r.is_ok()));
        });
    }

    fn finish_reinitialize(&mut self, transport: &mut Transport, ok: bool) {
        let Some(queue) = self.resend.take() else { return };
        if !ok {
            self.fail_resend("re-initialize failed");
            return;
        }
        let initialized = Message::Notification {
            method: "notifications/initialized".into(),
            params: None,
        };
        let _ = transport.send(initialized.to_json(), None);
        if let Transport::Http(t) = transport {
            t.open_get_stream();
        }
        for (frame, upstream_id) in queue {
            if let Err(err) = transport.send(frame, upstream_id) {
                if let Some(id) = upstream_id {
                    self.fail_pending(id, err);
                }
            }
        }
    }

    fn fail_resend(&mut self, reason: &str) {
        for (_, upstream_id) in self.resend.take().unwrap_or_default() {
            if let Some(id) = upstream_id {
                self.fail_pending(id, self.closed_error(reason));
            }
        }
    }

    fn on_command(&mut self, transport: &mut Transport, cmd: Command) {
        match cmd {
            Command::Call(call) => self.send_call(transport, call),
            Command::Notify { method, params } => {
                let frame = Message::Notification { method, params }.to_json();
                self.send_frame(transport, frame, None);
            }
            Command::Cancel { upstream_id, reason } => {
                if self.pending.remove(&upstream_id).is_some() {
                    let frame = cancelled_notification(&upstream_id.to_string(), &reason);
                    self.send_frame(transport, frame, None);
                }
            }
            Command::Answer { upstream_id, payload } => {
                self.forwarded.remove(&upstream_id);
                let frame = Message::Response {
                    id: Some(upstream_id),
                    payload,
                }
                .to_json();
                self.send_frame(transport, frame, None);
            }
            Command::Reinitialized(ok) => self.finish_reinitialize(transport, ok),
        }
    }

    fn send_frame(&mut self, transport: &mut Transport, frame: String, upstream_id: Option<u64>) {
        if let Some(queue) = self.resend.as_mut() {
            queue.push((frame, upstream_id));
            return;
        }
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
        } = call;
        let frame = Message::Request {
            id: RequestId::number(upstream_id),
            method,
            params,
        }
        .to_json();
        self.pending.insert(
            upstream_id,
            Pending {
                origin,
                started: Instant::now(),
            },
        );
        self.send_frame(transport, frame, Some(upstream_id));
    }

    fn fail_pending(&mut self, upstream_id: u64, error: UpstreamError) {
        if let Some(p) = self.pending.remove(&upstream_id) {
            self.fail_origin(p.origin, error);
        }
    }

    fn fail_origin(&self, origin: CallOrigin, error: UpstreamError) {
        match origin {
            CallOrigin::Internal(tx) => {
                let _ = tx.send(Err(CallFailure::Upstream(error)));
            }
            CallOrigin::Host { sink, .. } => deliver(&sink, CallEvent::Failed(error)),
        }
    }

    fn fail_all(&mut self, reason: &str) {
        let error = self.closed_error(reason);
        for (_, p) in self.pending.drain().collect::<Vec<_>>() {
            self.fail_origin(p.origin, error.clone());
        }
        for (_, fwd) in self.forwarded.drain() {
            if let Some(session) = fwd.session.upgrade() {
                session.take_server_request(fwd.downstream_id);
            }
        }
    }

    fn on_inbound(&mut self, transport: &mut Transport, item: Inbound) {
        match item {
            Inbound::Message { msg, via } => self.on_message(transport, msg, via),
            Inbound::SessionId(sid) => {
                if let Transport::Http(t) = transport {
                    t.set_session_id(Some(sid));
                }
            }
            Inbound::PostFailed { upstream_id, error } => self.fail_pending(upstream_id, error),
            Inbound::SessionExpired { frame, upstream_id } => {
                self.start_reinitialize(transport, frame, upstream_id)
            }
            Inbound::Closed(_) => {}
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
            tracing::warn!(upstream = %self.name(), id = ?id, "response with an id mcpmux never sent");
            return;
        };
        let Some(pending) = self.pending.remove(&upstream_id) else {
            tracing::debug!(upstream = %self.name(), upstream_id, "dropping a late or unknown response");
            return;
        };
        match pending.origin {
            CallOrigin::Internal(tx) => {
                let _ = tx.send(match payload {
                    ResponsePayload::Result(r) => Ok(r),
                    ResponsePayload::Error(e) => Err(CallFailure::Rpc(e)),
                });
            }
            CallOrigin::Host { sink, .. } => {
                deliver(&sink, CallEvent::Response(Message::Response { id, payload }))
            }
        }
    }

    /// Find the host call a message from the upstream belongs to (see the README's
    /// "server-to-client routing" rule): the request whose HTTP stream carried it; else, for a
    /// per-session connection, its session; else the oldest host call in flight here.
    fn attribute(&self, via: Option<u64>) -> Option<(Arc<Session>, Option<mpsc::Sender<CallEvent>>)> {
        if let Some(p) = via.and_then(|id| self.pending.get(&id)) {
            if let CallOrigin::Host { session, sink } = &p.origin {
                return Some((session.clone(), Some(sink.clone())));
            }
        }
        let oldest = |only: Option<&Arc<Session>>| {
            self.pending
                .values()
                .filter_map(|p| match &p.origin {
                    CallOrigin::Host { session, sink } => Some((p.started, session, sink)),
                    CallOrigin::Internal(_) => None,
                })
                .filter(|(_, s, _)| only.is_none_or(|o| Arc::ptr_eq(o, s)))
                .min_by_key(|(started, _, _)| *started)
                .map(|(_, s, sink)| (s.clone(), Some(sink.clone())))
        };
        if let Some(owner) = self.ctx.owner.as_ref().and_then(Weak::upgrade) {
            return oldest(Some(&owner)).or(Some((owner, None)));
        }
        oldest(None)
    }

    fn on_server_request(
        &mut self,
        transport: &mut Transport,
        id: RequestId,
        method: String,
        params: Option<Box<serde_json::value::RawValue>>,
        via: Option<u64>,
    ) {
        let reply = |transport: &mut Transport, payload: ResponsePayload| {
            let frame = Message::Response {
                id: Some(id.clone()),
                payload,
            }
            .to_json();
            let _ = transport.send(frame, None);
        };
        if method == "ping" {
            return reply(transport, ResponsePayload::Result(raw("{}".into())));
        }
        let parsed = RawObject::parse_opt(params.as_deref());
        let Some((session, sink)) = self.attribute(via) else {
            let payload = if method == "roots/list" {
                ResponsePayload::Result(raw("{\"roots\":[]}".into()))
            } else {
                let msg = format!("mcpmux: no host session is waiting on this server to receive {method}");
                ResponsePayload::Error(error_object(codes::INTERNAL_ERROR, &msg, None))
            };
            return reply(transport, payload);
        };
        if !session.caps.supports(&method, parsed.as_ref()) {
            let msg = format!("the host session does not support {method}");
            return reply(
                transport,
                ResponsePayload::Error(error_object(codes::METHOD_NOT_FOUND, &msg, None)),
            );
        }
        let route = ServerRequestRoute {
            upstream: self.handle.clone(),
            upstream_id: id.clone(),
        };
        let downstream_id = session.register_server_request(route);
        let json: Arc<str> = Message::Request {
            id: RequestId::number(downstream_id),
            method,
            params,
        }
        .to_json()
        .into();
        let on_stream = sink
            .as_ref()
            .is_some_and(|s| s.try_send(CallEvent::ServerRequest(json.clone())).is_ok());
        if !on_stream && !session.push_get(json) {
            session.take_server_request(downstream_id);
            let msg = "mcpmux: the host session has no open stream to receive this request";
            return reply(
                transport,
                ResponsePayload::Error(error_object(codes::INTERNAL_ERROR, msg, None)),
            );
        }
        let sink = if on_stream { sink } else { None };
        self.forwarded.insert(
            id,
            ForwardedServerRequest {
                session: Arc::downgrade(&session),
                downstream_id,
                sink,
            },
        );
    }

    fn on_notification(
        &mut self,
        method: String,
        params: Option<Box<serde_json::value::RawValue>>,
        via: Option<u64>,
    ) {
        let parsed = RawObject::parse_opt(params.as_deref());
        match method.as_str() {
            "notifications/progress" => {
                let token = parsed
                    .as_ref()
                    .and_then(|p| p.get("progressToken"))
                    .map(|t| t.get().to_string());
                let pending = token
                    .and_then(|t| t.parse::<u64>().ok())
                    .and_then(|id| self.pending.get(&id));
                if let Some(Pending {
                    origin: CallOrigin::Host { sink, .. },
                    ..
                }) = pending
                {
                    let _ = sink.try_send(CallEvent::Notification(Message::Notification { method, params }));
                }
            }
            "notifications/cancelled" => {
                let request = parsed
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .and_then(RequestId::from_raw);
                let Some(fwd) = request.and_then(|id| self.forwarded.remove(&id)) else {
                    return;
                };
                let Some(session) = fwd.session.upgrade() else {
                    return;
                };
                session.take_server_request(fwd.downstream_id);
                let reason = parsed
                    .as_ref()
                    .and_then(|p| p.get_str("reason"))
                    .unwrap_or_default();
                let json: Arc<str> = cancelled_notification(&fwd.downstream_id.to_string(), &reason).into();
                let msg = Message::Notification {
                    method,
                    params: Some(raw(json_params(&json))),
                };
                let sent = fwd
                    .sink
                    .is_some_and(|s| s.try_send(CallEvent::Notification(msg)).is_ok());
                if !sent {
                    session.push_get(json);
                }
            }
            "notifications/tools/list_changed" => self.list_changed(ListKind::Tools),
            "notifications/prompts/list_changed" => self.list_changed(ListKind::Prompts),
            "notifications/resources/list_changed" => {
                self.list_changed(ListKind::Resources);
                self.list_changed(ListKind::Templates);
            }
            "notifications/resources/updated" => {
                let Some(mut p) = parsed else { return };
                let Some(uri) = p.get_str("uri") else { return };
                let exposed = self.ctx.naming.expose_uri(&uri);
                p.set_str("uri", &exposed);
                let json: Arc<str> = Message::Notification {
                    method,
                    params: Some(p.to_raw()),
                }
                .to_json()
                .into();
                let owner = self.ctx.owner.as_ref().and_then(Weak::upgrade);
                for session in self.ctx.sessions.all() {
                    let mine = owner.as_ref().is_none_or(|o| Arc::ptr_eq(o, &session));
                    if mine && session.is_subscribed(&exposed) {
                        session.push_get(json.clone());
                    }
                }
            }
            "notifications/message" => {
                let level = parsed.as_ref().and_then(|p| p.get_str("level"));
                let msg = Message::Notification { method, params };
                match self.attribute(via) {
                    Some((session, sink)) => {
                        if session.wants_log(level.as_deref()) {
                            deliver_or_get(&session, sink.as_ref(), msg);
                        }
                    }
                    None => {
                        let json: Arc<str> = msg.to_json().into();
                        for session in self.ctx.sessions.all() {
                            if session.log_level().is_some() && session.wants_log(level.as_deref()) {
                                session.push_get(json.clone());
                            }
                        }
                    }
                }
            }
            _ => {
                let msg = Message::Notification { method, params };
                match self.attribute(via) {
                    Some((session, sink)) => deliver_or_get(&session, sink.as_ref(), msg),
                    None => {
                        tracing::debug!(upstream = %self.name(), "dropping a notification no session is waiting for")
                    }
                }
            }
        }
    }

    fn list_changed(&self, kind: ListKind) {
        let event = ConnectionEvent::ListChanged {
            kind,
            via: self.handle.clone(),
        };
        if self.ctx.events.try_send(event).is_err() {
            tracing::debug!(upstream = %self.name(), "list_changed already queued");
        }
    }
}

fn json_params(notification_json: &str) -> String {
    RawObject::parse(notification_json)
        .ok()
        .and_then(|o| o.get("params").map(|p| p.get().to_string()))
        .unwrap_or_else(|| "{}".into())
}

/// Hand an event to a host call; a full queue waits in a task, never blocking the actor.
fn deliver(sink: &mpsc::Sender<CallEvent>, event: CallEvent) {
    match sink.try_send(event) {
        Ok(()) => {}
        Err(mpsc::error::TrySendError::Full(event)) => {
            let sink = sink.clone();
            tokio::spawn(async move {
                let _ = sink.send(event).await;
            });
        }
        Err(mpsc::error::TrySendError::Closed(_)) => {
            tracing::debug!("host call stream is gone; dropping its event");
        }
    }
}

fn deliver_or_get(session: &Session, sink: Option<&mpsc::Sender<CallEvent>>, msg: Message) {
    let msg = match sink {
        Some(sink) => match sink.try_send(CallEvent::Notification(msg)) {
            Ok(()) => return,
            Err(mpsc::error::TrySendError::Full(CallEvent::Notification(m)))
            | Err(mpsc::error::TrySendError::Closed(CallEvent::Notification(m))) => m,
            Err(_) => return,
        },
        None => msg,
    };
    session.push_get(msg.to_json().into());
}

fn initialize_request(id: u64) -> Message {
    let params = serde_json::json!({
        "protocolVersion": LATEST_SESSION_ERA,
        "capabilities": {
            "sampling": {},
            "elicitation": { "form": {}, "url": {} },
            "roots": { "listChanged": true }
        },
        "clientInfo": { "name": "mcpmux", "version": env!("CARGO_PKG_VERSION") }
    });
    Message::Request {
        id: RequestId::number(id),
        method: "initialize".into(),
        params: Some(to_raw(&params)),
    }
}

fn read_initialize_result(payload: ResponsePayload) -> Result<ServerFacts, String> {
    let result = match payload {
        ResponsePayload::Result(r) => r,
        ResponsePayload::Error(e) => return Err(format!("initialize failed: {}", e.get())),
    };
    let value: serde_json::Value =
        serde_json::from_str(result.get()).map_err(|e| format!("bad initialize result: {e}"))?;
    let version = value
        .get("protocolVersion")
        .and_then(|v| v.as_str())
        .unwrap_or_default();
    if !UPSTREAM_ACCEPTED_VERSIONS.contains(&version) {
        return Err(format!(
            "upstream chose unsupported protocol version {}",
            json_string(version)
        ));
    }
    Ok(ServerFacts {
        protocol_version: version.to_string(),
        capabilities: value
            .get("capabilities")
            .cloned()
            .unwrap_or(serde_json::json!({})),
        instructions: value
            .get("instructions")
            .and_then(|v| v.as_str())
            .map(str::to_string),
        server_info: value
            .get("serverInfo")
            .cloned()
            .unwrap_or(serde_json::Value::Null),
    })
}
