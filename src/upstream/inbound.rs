//! What an upstream sends that is not a reply: server-to-client requests and notifications,
//! routed to the host call or session they belong to (by the rule in [`super::attribution`]),
//! or handed to every host as a [`HostEvent`].

use super::attribution::{attribute, Attributed};
use super::call_channel::{CallSink, Refused};
use super::connection::{Actor, ConnectionEvent, Pending, Transport};
use super::host::{HostEvent, HostLink};
use super::server_requests::AnswerTo;
use super::{CallEvent, CallOrigin};
use crate::catalog::ListKind;
use crate::error::codes;
use crate::protocol::message::{cancelled_notification, error_object, raw};
use crate::protocol::{Message, RawObject, RequestId, ResponsePayload};
use std::sync::{Arc, Weak};

impl Actor {
    /// The host a message from the upstream belongs to, and the call stream it rides.
    fn attribute(&self, via: Option<u64>) -> Option<Attributed> {
        attribute(&self.pending, via, self.owner())
    }

    /// The session owning this connection (`isolation = "per-session"`), while it lives.
    fn owner(&self) -> Option<Arc<dyn HostLink>> {
        self.ctx.owner.as_ref().and_then(Weak::upgrade)
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
        let refuse = |transport: &mut Transport, code: i64, msg: &str| {
            reply(transport, ResponsePayload::Error(error_object(code, msg, None)))
        };
        if method == "ping" {
            return reply(transport, ResponsePayload::Result(raw("{}".into())));
        }
        let parsed = RawObject::parse_opt(params.as_deref());
        let Some((host, sink)) = self.attribute(via) else {
            if method == "roots/list" {
                return reply(transport, ResponsePayload::Result(raw("{\"roots\":[]}".into())));
            }
            let msg = format!("mcpmux: no host session is waiting on this server to receive {method}");
            return refuse(transport, codes::INTERNAL_ERROR, &msg);
        };
        if !host.caps().supports(&method, parsed.as_ref()) {
            let msg = format!("the host session does not support {method}");
            return refuse(transport, codes::METHOD_NOT_FOUND, &msg);
        }
        let routes = &self.ctx.ties.routes;
        let answer_to = AnswerTo::Upstream {
            connection: self.handle.clone(),
            upstream_id: id.clone(),
        };
        let (downstream_id, host_id) = match routes.open(&host, answer_to, None) {
            Ok(opened) => opened,
            Err(full) => return refuse(transport, codes::OVERLOADED, &format!("mcpmux: {full}")),
        };
        let json: Arc<str> = Message::Request {
            id: host_id,
            method,
            params,
        }
        .to_json()
        .into();
        let sink = sink.filter(|s| s.try_send(CallEvent::ServerRequest(json.clone())).is_ok());
        match sink {
            Some(sink) => routes.attach_sink(host.key(), downstream_id, sink),
            None if host.push(json) => {}
            None => {
                routes.take(host.key(), downstream_id);
                let msg = "mcpmux: the host session has no open stream to receive this request";
                refuse(transport, codes::INTERNAL_ERROR, msg);
            }
        }
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
                    sink.send_progress(CallEvent::Notification(Message::Notification { method, params }));
                }
            }
            "notifications/cancelled" => {
                let request = parsed
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .and_then(RequestId::from_raw);
                let Some(route) = request.and_then(|id| self.ctx.ties.routes.withdraw(&self.handle, &id))
                else {
                    return;
                };
                let Some(host) = route.host.upgrade() else {
                    return;
                };
                let reason = parsed
                    .as_ref()
                    .and_then(|p| p.get_str("reason"))
                    .unwrap_or_default();
                let msg = cancelled_notification(route.host_id.as_json(), &reason);
                deliver_or_push(host.as_ref(), route.sink.as_ref(), msg);
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
                let notification: Arc<str> = Message::Notification {
                    method,
                    params: Some(p.to_raw()),
                }
                .to_json()
                .into();
                let owner = match &self.ctx.owner {
                    Some(owner) => match owner.upgrade() {
                        Some(owner) => Some(owner.key()),
                        None => return,
                    },
                    None => None,
                };
                self.ctx.hosts.emit(HostEvent::ResourceUpdated {
                    owner,
                    uri: &exposed,
                    params: &p,
                    notification,
                });
            }
            "notifications/message" => {
                let level = parsed.as_ref().and_then(|p| p.get_str("level"));
                let msg = Message::Notification { method, params };
                match self.attribute(via) {
                    Some((host, sink)) => {
                        if host.wants_log(level.as_deref()) {
                            deliver_or_push(host.as_ref(), sink.as_ref(), msg);
                        }
                    }
                    None => self.ctx.hosts.emit(HostEvent::Log {
                        upstream: &self.ctx.id,
                        level: level.as_deref(),
                        notification: msg.to_json().into(),
                    }),
                }
            }
            _ => {
                let msg = Message::Notification { method, params };
                match self.attribute(via) {
                    Some((host, sink)) => deliver_or_push(host.as_ref(), sink.as_ref(), msg),
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

/// A notification for a host: on the call stream it belongs to, else (no call, or its queue is
/// full or gone) on the host's standalone stream.
fn deliver_or_push(host: &dyn HostLink, sink: Option<&CallSink>, msg: Message) {
    let msg = match sink {
        Some(sink) => match sink.try_send(CallEvent::Notification(msg)) {
            Ok(()) => return,
            Err(Refused::Full(CallEvent::Notification(m)) | Refused::Closed(CallEvent::Notification(m))) => m,
            Err(_) => return,
        },
        None => msg,
    };
    host.push(msg.to_json().into());
}
