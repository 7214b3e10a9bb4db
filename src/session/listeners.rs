//! The modern hosts' open `subscriptions/listen` streams and what each was granted: list changes
//! and resource updates fan out to them (as well as to session-era GET streams), each
//! notification tagged with the subscription id (the listen request's id). Bounded: at most
//! [`MAX_LISTENERS`] streams, [`LISTENER_QUEUE`] notifications queued per stream.

use crate::catalog::ListKind;
use crate::policy::Viewer;
use crate::protocol::message::{json_string, raw};
use crate::protocol::modern::META_SUBSCRIPTION_ID;
use crate::protocol::{Message, RawObject, RequestId};
use parking_lot::{Mutex, MutexGuard};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;

/// At most this many listen streams are open at once.
pub const MAX_LISTENERS: usize = 4096;
/// Notifications queued per listen stream; beyond it they are dropped (a list_changed already
/// queued says the same).
pub const LISTENER_QUEUE: usize = 64;

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
    pub fn wants(&self, kind: ListKind) -> bool {
        match kind {
            ListKind::Tools => self.tools,
            ListKind::Prompts => self.prompts,
            ListKind::Resources | ListKind::Templates => self.resources,
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
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

pub struct Listener {
    pub subscription: RequestId,
    pub grant: Grant,
    pub queue: mpsc::Sender<Arc<str>>,
    /// The profile whose endpoint the listen request came to (`None`: the main endpoint).
    pub profile: Option<Arc<str>>,
    /// Who opened the stream (`None` while nobody is authenticated): what it sees under a
    /// changed policy.
    pub viewer: Option<Arc<dyn Viewer>>,
}

/// One open stream as [`Listeners::who`] names it: its key, profile and principal.
pub type StreamOwner = (u64, Option<Arc<str>>, Option<Arc<dyn Viewer>>);

/// The open listen streams.
#[derive(Default)]
pub struct Listeners {
    map: Mutex<HashMap<u64, Listener>>,
    next: AtomicU64,
}

/// A notification tagged with a subscription id.
pub fn tagged(method: &str, params: Option<RawObject>, subscription: &RequestId) -> Arc<str> {
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
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Listener>> {
        self.map.lock()
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn send(&self, pick: impl Fn(u64, &Listener) -> bool, mut make: impl FnMut(&RequestId) -> Arc<str>) {
        let map = self.lock();
        for listener in map.iter().filter(|(k, l)| pick(**k, l)).map(|(_, l)| l) {
            if listener.queue.try_send(make(&listener.subscription)).is_err() {
                tracing::debug!(subscription = %listener.subscription, "listen stream cannot take a notification");
            }
        }
    }

    /// Tell every listener that asked for it that a list changed. The notifications differ only
    /// in the subscription id: each is the same head, the id and the same tail, written in one
    /// allocation per listener (this runs under the listeners' lock). Only listeners of the
    /// endpoints `told` names (by profile; `None`: the main endpoint) hear of it.
    pub fn list_changed(&self, kind: ListKind, told: impl Fn(Option<&Arc<str>>) -> bool) {
        self.list_changed_where(kind, |_, l| told(l.profile.as_ref()));
    }

    /// [`Listeners::list_changed`] to the streams of `keys` only (see [`Listeners::who`]).
    pub fn list_changed_to(&self, kind: ListKind, keys: &HashSet<u64>) {
        self.list_changed_where(kind, |key, _| keys.contains(&key));
    }

    /// Who each open stream is: its key, profile and principal.
    pub fn who(&self) -> Vec<StreamOwner> {
        (self.lock().iter())
            .map(|(key, l)| (*key, l.profile.clone(), l.viewer.clone()))
            .collect()
    }

    fn list_changed_where(&self, kind: ListKind, told: impl Fn(u64, &Listener) -> bool) {
        let head = format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":{},\"params\":{{\"_meta\":{{{}:",
            json_string(kind.list_changed_notification()),
            json_string(META_SUBSCRIPTION_ID)
        );
        let mut buf = String::new();
        self.send(
            |key, l| l.grant.wants(kind) && told(key, l),
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
        self.resource_updated_for(uri, params, None);
    }

    /// [`Listeners::resource_updated`], to the streams of principal `only` alone when given (the
    /// update came from an upstream connection acting for that principal).
    pub fn resource_updated_for(&self, uri: &str, params: &RawObject, only: Option<&str>) {
        let theirs = |l: &Listener| {
            only.is_none_or(|p| l.viewer.as_ref().and_then(|v| v.grant_principal()).as_deref() == Some(p))
        };
        let covers = |l: &Listener| {
            theirs(l)
                && l.grant
                    .uris
                    .iter()
                    .any(|s| uri == s || uri.starts_with(&format!("{s}/")))
        };
        self.send(
            |_, l| covers(l),
            |id| tagged("notifications/resources/updated", Some(params.clone()), id),
        );
    }

    /// Whether any listener watches exactly `uri`.
    pub fn watches(&self, uri: &str) -> bool {
        self.lock()
            .values()
            .any(|l| l.grant.uris.iter().any(|u| u == uri))
    }

    pub fn insert(&self, listener: Listener) -> Option<u64> {
        let mut map = self.lock();
        if map.len() >= MAX_LISTENERS {
            return None;
        }
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        map.insert(key, listener);
        Some(key)
    }

    pub fn remove(&self, key: u64) -> Option<Grant> {
        self.lock().remove(&key).map(|l| l.grant)
    }
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
            profile: None,
            viewer: None,
        });
        let key = listeners
            .insert(Listener {
                subscription: RequestId::number(2),
                grant: res,
                queue: tx_res,
                profile: None,
                viewer: None,
            })
            .unwrap();
        listeners.list_changed(ListKind::Tools, |_| true);
        listeners.list_changed(ListKind::Prompts, |_| true);
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
