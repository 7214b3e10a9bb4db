//! `subscriptions/listen` for modern hosts: the grant (list notifications mcpmux can deliver,
//! resource subscriptions on upstreams that support them), the acknowledgement first, then only
//! granted notifications on an SSE stream; resource subscriptions are taken out upstream for as
//! long as a listener or a session wants them.

use crate::config::{Isolation, UpstreamId};
use crate::core::access::Access;
use crate::core::context::RequestCtx;
use crate::core::hub::Hub;
use crate::error::codes;
use crate::protocol::message::error_reply;
use crate::protocol::message::{json_string, raw, to_raw};
use crate::protocol::modern::META_SUBSCRIPTION_ID;
use crate::protocol::modern_result::RESULT_COMPLETE;
use crate::protocol::{Message, RawObject, RequestId, ResponsePayload};
use crate::session::listeners::{tagged, Grant, Listener, LISTENER_QUEUE, MAX_LISTENERS};
use axum::response::Response;
use futures_util::StreamExt;
use http::StatusCode;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Decide what a listen request gets: list notifications mcpmux can deliver, and resource
/// subscriptions whose upstream supports them (shared connections only).
fn grant(
    hub: &Hub,
    (access, ctx): (&Access, &RequestCtx),
    requested: &RawObject,
) -> (Grant, Vec<(UpstreamId, String, String)>) {
    let asked = |key: &str| requested.get(key).map(|v| v.get()) == Some("true");
    let caps = crate::core::methods::initialize::merged_capabilities(hub, access.profile());
    let mut grant = Grant {
        tools: asked("toolsListChanged"),
        prompts: asked("promptsListChanged") && caps.get("prompts").is_some(),
        resources: asked("resourcesListChanged") && caps.get("resources").is_some(),
        uris: Vec::new(),
    };
    let catalog = hub.catalog_for(ctx);
    let mut upstream_subscriptions = Vec::new();
    let uris = requested
        .get("resourceSubscriptions")
        .and_then(|v| serde_json::from_str::<Vec<String>>(v.get()).ok())
        .unwrap_or_default();
    for uri in uris {
        let Ok((upstream, original)) = catalog.resolve_uri(&uri) else {
            continue;
        };
        // Granted under the URI updates name (a bare URI's owner may be namespaced).
        let Some(uri) = catalog.naming(&upstream).map(|n| n.expose_uri(&original)) else {
            continue;
        };
        // A resource the policy hides is not granted, as one that does not exist.
        if !access.permits(&uri) || !access.in_view(crate::catalog::ListKind::Resources, &upstream, &uri) {
            continue;
        }
        let Some(slot) = hub.upstreams.get(&upstream) else {
            continue;
        };
        let supports = slot.facts.load().as_ref().is_some_and(|f| {
            f.capabilities
                .pointer("/resources/subscribe")
                .and_then(|v| v.as_bool())
                == Some(true)
        });
        if supports && slot.server.isolation == Isolation::Shared && !grant.uris.contains(&uri) {
            grant.uris.push(uri.clone());
            upstream_subscriptions.push((upstream, uri, original));
        }
    }
    (grant, upstream_subscriptions)
}

/// Start or stop change notifications for a resource on an upstream's shared connection, or
/// on `principal`'s own one where the upstream's connections are per principal.
fn upstream_subscription(
    hub: &Arc<Hub>,
    (upstream, principal): (&UpstreamId, Option<&str>),
    original: String,
    on: bool,
) {
    let Some(slot) = hub.upstreams.get(upstream) else {
        return;
    };
    let handle = match (&slot.personal, principal) {
        (Some(connections), Some(principal)) => connections.of(principal).and_then(|me| me.handle()),
        (Some(_), None) => None,
        (None, _) => slot.shared.load_full().map(|h| (*h).clone()),
    };
    let Some(handle) = handle else {
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
    /// Whose stream it is (`Principal::grant_principal`), when authentication is on.
    principal: Option<String>,
    subscriptions: Vec<(UpstreamId, String, String)>,
}

impl Drop for ListenerGuard {
    fn drop(&mut self) {
        self.hub.sessions.listeners.remove(self.key);
        for (upstream, exposed, original) in std::mem::take(&mut self.subscriptions) {
            let listened = self.hub.sessions.listeners.watches(&exposed);
            let subscribed = self
                .hub
                .sessions
                .all()
                .iter()
                .any(|s| s.is_subscribed_exact(&exposed));
            if !listened && !subscribed {
                let whose = (&upstream, self.principal.as_deref());
                upstream_subscription(&self.hub, whose, original, false);
            }
        }
    }
}

/// Open a listen stream for a `subscriptions/listen` request.
pub fn open(hub: &Arc<Hub>, ctx: &RequestCtx, id: RequestId, params: &RawObject) -> Response {
    if hub.shutdown.is_cancelled() {
        let body = error_reply(id, codes::UPSTREAM_UNAVAILABLE, super::SHUTTING_DOWN, None).to_json();
        return crate::error::json_text(StatusCode::SERVICE_UNAVAILABLE, body);
    }
    let requested = params.get_object("notifications").unwrap_or_default();
    let (grant, upstream) = grant(hub, (&Access::of(hub, ctx), ctx), &requested);
    let (queue, mut rx) = mpsc::channel(LISTENER_QUEUE);
    let listener = Listener {
        subscription: id.clone(),
        grant: grant.clone(),
        queue,
        profile: ctx.profile.clone(),
        viewer: (ctx.principal.clone()).map(|p| p as Arc<dyn crate::policy::Viewer>),
    };
    let Some(key) = hub.sessions.listeners.insert(listener) else {
        let message = format!("more than {MAX_LISTENERS} listen streams are open");
        let body = error_reply(id, codes::OVERLOADED, &message, None).to_json();
        return crate::error::json_text(StatusCode::SERVICE_UNAVAILABLE, body);
    };
    let principal = ctx.principal.as_ref().map(|p| p.grant_principal());
    for (id, _, original) in &upstream {
        upstream_subscription(hub, (id, principal.as_deref()), original.clone(), true);
    }
    let guard = ListenerGuard {
        hub: hub.clone(),
        key,
        principal,
        subscriptions: upstream,
    };
    let mut ack_params = RawObject::default();
    ack_params.set("notifications", to_raw(&grant.to_json()));
    let ack = tagged("notifications/subscriptions/acknowledged", Some(ack_params), &id);
    let shutdown = hub.shutdown.clone();
    let frames = async_stream::stream! {
        let _guard = guard;
        yield crate::protocol::sse::event_bytes(None, None, &ack);
        loop {
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(json) => yield crate::protocol::sse::event_bytes(None, None, &json),
                    None => break,
                },
                _ = shutdown.cancelled() => {
                    // A graceful end: the listen request completes.
                    let result = format!(
                        "{{\"resultType\":{},\"_meta\":{{{}:{}}}}}",
                        json_string(RESULT_COMPLETE),
                        json_string(META_SUBSCRIPTION_ID),
                        id.as_json()
                    );
                    let end = Message::Response { id: Some(id.clone()), payload: ResponsePayload::Result(raw(result)) };
                    yield crate::protocol::sse::event_bytes(None, None, &end.to_json());
                    break;
                }
            }
        }
    };
    super::streamable::sse_response(super::streamable::with_keepalive(frames.boxed()))
}
