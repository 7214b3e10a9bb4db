//! `subscriptions/listen` for modern hosts: the acknowledgement of what was granted first, then
//! only granted notifications, each tagged with the subscription id (the listen request's id).
//! List changes and resource updates fan out here as well as to session-era GET streams;
//! resource subscriptions are taken out upstream (`resources/subscribe`) for as long as a
//! listener or a session wants them.

use super::forward::error_reply;
use crate::catalog::ListKind;
use crate::config::Isolation;
use crate::error::codes;
use crate::hub::Hub;
use crate::protocol::message::{json_string, raw, to_raw};
use crate::protocol::modern::META_SUBSCRIPTION_ID;
use crate::protocol::modern_result::RESULT_COMPLETE;
use crate::protocol::{Message, RawObject, RequestId, ResponsePayload};
use axum::response::Response;
use bytes::Bytes;
use futures_util::StreamExt;
use http::StatusCode;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// At most this many listen streams are open at once.
pub const MAX_LISTENERS: usize = 4096;
/// Notifications queued per listen stream; beyond it they are dropped (a list_changed already
/// queued says the same).
const LISTENER_QUEUE: usize = 64;
const KEEPALIVE_EVERY: Duration = Duration::from_secs(15);

/// What one listen stream was granted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Grant {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
    /// Resource URIs (as hosts see them) whose updates are wanted.
    pub uris: Vec<String>,
}

impl Grant {
    fn wants(&self, kind: ListKind) -> bool {
        match kind {
            ListKind::Tools => self.tools,
            ListKind::Prompts => self.prompts,
            ListKind::Resources | ListKind::Templates => self.resources,
        }
    }

    fn to_json(&self) -> serde_json::Value {
        let mut out = serde_json::Map::new();
        for (key, on) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if on {
                out.insert(key.into(), true.into());
            }
        }
        if !self.uris.is_empty() {
            out.insert("resourceSubscriptions".into(), self.uris.clone().into());
        }
        out.into()
    }
}

struct Listener {
    subscription: RequestId,
    grant: Grant,
    queue: mpsc::Sender<Arc<str>>,
}

/// The open listen streams.
#[derive(Default)]
pub struct Listeners {
    map: Mutex<HashMap<u64, Listener>>,
    next: AtomicU64,
}

/// A notification tagged with a subscription id.
fn tagged(method: &str, params: Option<RawObject>, subscription: &RequestId) -> Arc<str> {
    let mut params = params.unwrap_or_default();
    let mut meta = params.get_object("_meta").unwrap_or_default();
    meta.set(META_SUBSCRIPTION_ID, raw(subscription.as_json().to_string()));
    params.set("_meta", meta.to_raw());
    Message::Notification {
        method: method.into(),
        params: Some(params.to_raw()),
    }
    .to_json()
    .into()
}

impl Listeners {
    pub fn len(&self) -> usize {
        self.map.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn send(&self, pick: impl Fn(&Grant) -> bool, mut make: impl FnMut(&RequestId) -> Arc<str>) {
        for listener in self.map.lock().values().filter(|l| pick(&l.grant)) {
            if listener.queue.try_send(make(&listener.subscription)).is_err() {
                tracing::debug!(subscription = %listener.subscription, "listen stream cannot take a notification");
            }
        }
    }

    /// Tell every listener that asked for it that a list changed. The notifications differ only
    /// in the subscription id: each is the same head, the id and the same tail, written in one
    /// allocation per listener (this runs under the listeners' lock).
    pub fn list_changed(&self, kind: ListKind) {
        let head = format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":{},\"params\":{{\"_meta\":{{{}:",
            json_string(kind.list_changed_notification()),
            json_string(META_SUBSCRIPTION_ID)
        );
        let mut buf = String::new();
        self.send(
            |g| g.wants(kind),
            |id| {
                buf.clear();
                buf.push_str(&head);
                buf.push_str(id.as_json());
                buf.push_str("}}}");
                Arc::from(buf.as_str())
            },
        );
    }

    /// Tell listeners subscribed to `uri` (or a resource it contains) that it was updated.
    pub fn resource_updated(&self, uri: &str, params: &RawObject) {
        let covers = |g: &Grant| {
            g.uris
                .iter()
                .any(|s| uri == s || uri.starts_with(&format!("{s}/")))
        };
        self.send(covers, |id| {
            tagged("notifications/resources/updated", Some(params.clone()), id)
        });
    }

    /// Whether any listener watches exactly `uri`.
    pub fn watches(&self, uri: &str) -> bool {
        self.map
            .lock()
            .values()
            .any(|l| l.grant.uris.iter().any(|u| u == uri))
    }

    fn insert(&self, listener: Listener) -> Option<u64> {
        let mut map = self.map.lock();
        if map.len() >= MAX_LISTENERS {
            return None;
        }
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        map.insert(key, listener);
        Some(key)
    }

    fn remove(&self, key: u64) -> Option<Grant> {
        self.map.lock().remove(&key).map(|l| l.grant)
    }
}

/// Decide what a listen request gets: list notifications mcpmux can deliver, and resource
/// subscriptions whose upstream supports them (shared connections only).
fn grant(hub: &Hub, requested: &RawObject) -> (Grant, Vec<(usize, String, String)>) {
    let asked = |key: &str| requested.get(key).map(|v| v.get()) == Some("true");
    let caps = super::router::merged_capabilities(hub);
    let mut grant = Grant {
        tools: asked("toolsListChanged"),
        prompts: asked("promptsListChanged") && caps.get("prompts").is_some(),
        resources: asked("resourcesListChanged") && caps.get("resources").is_some(),
        uris: Vec::new(),
    };
    let catalog = hub.catalog.snapshot();
    let mut upstream_subscriptions = Vec::new();
    let uris = requested
        .get("resourceSubscriptions")
        .and_then(|v| serde_json::from_str::<Vec<String>>(v.get()).ok())
        .unwrap_or_default();
    for uri in uris {
        let Some((index, original)) = catalog.resolve_uri(&uri) else {
            continue;
        };
        let slot = &hub.upstreams[index];
        let supports = slot.facts.load().as_ref().is_some_and(|f| {
            f.capabilities
                .pointer("/resources/subscribe")
                .and_then(|v| v.as_bool())
                == Some(true)
        });
        if supports && slot.server.isolation == Isolation::Shared && !grant.uris.contains(&uri) {
            grant.uris.push(uri.clone());
            upstream_subscriptions.push((index, uri, original));
        }
    }
    (grant, upstream_subscriptions)
}

/// Start or stop change notifications for a resource on an upstream's shared connection.
fn upstream_subscription(hub: &Arc<Hub>, index: usize, original: String, on: bool) {
    let Some(handle) = hub.upstreams[index].shared.load_full() else {
        return;
    };
    tokio::spawn(async move {
        if let Err(err) = handle.watch_resource(&original, on).await {
            tracing::warn!(upstream = %handle.name(), %err, on, "resource subscription failed upstream");
        }
    });
}

/// Removes the listener when its stream ends, dropping upstream subscriptions no one needs.
struct ListenerGuard {
    hub: Arc<Hub>,
    key: u64,
    subscriptions: Vec<(usize, String, String)>,
}

impl Drop for ListenerGuard {
    fn drop(&mut self) {
        self.hub.sessions.listeners.remove(self.key);
        for (index, exposed, original) in std::mem::take(&mut self.subscriptions) {
            let listened = self.hub.sessions.listeners.watches(&exposed);
            let subscribed = self
                .hub
                .sessions
                .all()
                .iter()
                .any(|s| s.is_subscribed_exact(&exposed));
            if !listened && !subscribed {
                upstream_subscription(&self.hub, index, original, false);
            }
        }
    }
}

/// Open a listen stream for a `subscriptions/listen` request.
pub fn open(hub: &Arc<Hub>, id: RequestId, params: &RawObject) -> Response {
    let requested = params.get_object("notifications").unwrap_or_default();
    let (grant, upstream) = grant(hub, &requested);
    let (queue, mut rx) = mpsc::channel(LISTENER_QUEUE);
    let listener = Listener {
        subscription: id.clone(),
        grant: grant.clone(),
        queue,
    };
    let Some(key) = hub.sessions.listeners.insert(listener) else {
        let message = format!("more than {MAX_LISTENERS} listen streams are open");
        let body = error_reply(id, codes::OVERLOADED, &message, None).to_json();
        return super::http::json_text(StatusCode::SERVICE_UNAVAILABLE, body);
    };
    for (index, _, original) in &upstream {
        upstream_subscription(hub, *index, original.clone(), true);
    }
    let guard = ListenerGuard {
        hub: hub.clone(),
        key,
        subscriptions: upstream,
    };
    let mut ack_params = RawObject::default();
    ack_params.set("notifications", to_raw(&grant.to_json()));
    let ack = tagged("notifications/subscriptions/acknowledged", Some(ack_params), &id);
    let shutdown = hub.shutdown.clone();
    let frames = async_stream::stream! {
        let _guard = guard;
        yield super::resume::event_bytes(None, None, &ack);
        let mut keepalive = tokio::time::interval(KEEPALIVE_EVERY);
        keepalive.tick().await;
        loop {
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(json) => yield super::resume::event_bytes(None, None, &json),
                    None => break,
                },
                _ = keepalive.tick() => yield Bytes::from_static(b": keepalive\n\n"),
                _ = shutdown.cancelled() => {
                    // A graceful end: the listen request completes.
                    let result = format!(
                        "{{\"resultType\":{},\"_meta\":{{{}:{}}}}}",
                        json_string(RESULT_COMPLETE),
                        json_string(META_SUBSCRIPTION_ID),
                        id.as_json()
                    );
                    let end = Message::Response { id: Some(id.clone()), payload: ResponsePayload::Result(raw(result)) };
                    yield super::resume::event_bytes(None, None, &end.to_json());
                    break;
                }
            }
        }
    };
    super::http::sse_response(frames.boxed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_carry_the_subscription_id() {
        let id = RequestId::from_raw(&raw("\"listen-1\"".into())).unwrap();
        let json = tagged("notifications/tools/list_changed", None, &id);
        assert_eq!(
            &*json,
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"}}}"#
        );
        let params = RawObject::parse(r#"{"uri":"a://b","_meta":{"x":1}}"#).unwrap();
        let json = tagged(
            "notifications/resources/updated",
            Some(params),
            &RequestId::number(4),
        );
        assert!(
            json.contains(r#""_meta":{"x":1,"io.modelcontextprotocol/subscriptionId":4}"#),
            "{json}"
        );
    }

    #[test]
    fn listeners_get_only_what_they_were_granted() {
        let listeners = Listeners::default();
        let (tx_tools, mut rx_tools) = mpsc::channel(4);
        let (tx_res, mut rx_res) = mpsc::channel(4);
        let tools = Grant {
            tools: true,
            ..Grant::default()
        };
        let res = Grant {
            uris: vec!["mcpmux://a/x".into()],
            ..Grant::default()
        };
        listeners.insert(Listener {
            subscription: RequestId::number(1),
            grant: tools,
            queue: tx_tools,
        });
        let key = listeners
            .insert(Listener {
                subscription: RequestId::number(2),
                grant: res,
                queue: tx_res,
            })
            .unwrap();
        listeners.list_changed(ListKind::Tools);
        listeners.list_changed(ListKind::Prompts);
        let uri = RawObject::parse(r#"{"uri":"mcpmux://a/x/y"}"#).unwrap();
        listeners.resource_updated("mcpmux://a/x/y", &uri);
        let expected = tagged("notifications/tools/list_changed", None, &RequestId::number(1));
        assert_eq!(rx_tools.try_recv().unwrap(), expected);
        assert!(rx_tools.try_recv().is_err());
        assert!(rx_res.try_recv().unwrap().contains("resources/updated"));
        assert!(rx_res.try_recv().is_err());
        assert!(listeners.watches("mcpmux://a/x"));
        listeners.remove(key);
        assert!(!listeners.watches("mcpmux://a/x"));
    }
}
