//! What an upstream sends that is not a reply: server-to-client requests and notifications,
//! routed to the host call or session they belong to (the attribution rule lives here).

use super::connection::{Actor, ConnectionEvent, ForwardedServerRequest, Pending, Transport};
use super::{CallEvent, CallOrigin};
use crate::catalog::ListKind;
use crate::error::codes;
use crate::protocol::message::{error_object, raw};
use crate::protocol::{Message, RawObject, RequestId, ResponsePayload};
use crate::session::host::{cancelled_notification, ServerRequestRoute, Session};
use std::sync::{Arc, Weak};
use tokio::sync::mpsc;

impl Actor {
    /// Find the host call a message from the upstream belongs to (see the README's
    /// "server-to-client routing" rule): the request whose HTTP stream carried it; else, for a
    /// per-session connection, its session; else the oldest host call in flight here.
    fn attribute(&self, via: Option<u64>) -> Option<(Arc<Session>, Option<mpsc::Sender<CallEvent>>)> {
        if let Some(p) = via.and_then(|id| self.pending.get(&id)) {
            return match &p.origin {
                CallOrigin::Host { session, sink } => Some((session.clone(), Some(sink.clone()))),
                // mcpmux's own request (a listen stream, a list walk): no host is behind it.
                CallOrigin::Internal(_) => None,
            };
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

    pub(super) fn on_server_request(
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
        let route = ServerRequestRoute::Upstream {
            upstream: self.handle.clone(),
            upstream_id: id.clone(),
        };
        let (downstream_id, json) = session.address_server_request(route, method, params);
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

    pub(super) fn on_notification(
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
                let msg = cancelled_notification(&fwd.downstream_id.to_string(), &reason);
                deliver_or_get(&session, fwd.sink.as_ref(), msg);
            }
            // mcpmux's own listen stream on a modern upstream was opened.
            "notifications/subscriptions/acknowledged" => {
                let uris = parsed
                    .as_ref()
                    .and_then(|p| p.get_object("notifications"))
                    .and_then(|n| n.get("resourceSubscriptions").map(|v| v.get().to_owned()))
                    .and_then(|v| serde_json::from_str(&v).ok())
                    .unwrap_or_default();
                self.handle.listen_acknowledged(uris);
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
                if self.ctx.owner.is_none() {
                    self.ctx.sessions.listeners.resource_updated(&exposed, &p);
                }
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
