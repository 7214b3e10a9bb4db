//! The host side as upstream connections see it. `upstream/` never names a host-side type: a
//! host session is a [`HostLink`], and what concerns every host (list changes, resource updates,
//! log messages no call claims) is a [`HostEvent`] handed to [`HostEvents`].

use crate::catalog::ListKind;
use crate::protocol::{ClientCaps, RawObject, RequestId};
use std::sync::Arc;

/// Identifies one host session for as long as the process runs (never reused).
pub type HostKey = u64;

/// One host session, as a connection needs it.
pub trait HostLink: Send + Sync {
    /// Its key.
    fn key(&self) -> HostKey;
    /// The client capabilities it declared.
    fn caps(&self) -> ClientCaps;
    /// The log level to ask a modern upstream for on its behalf (none: no log messages).
    fn log_level_name(&self) -> Option<&'static str>;
    /// Whether a `notifications/message` at `level` should reach it.
    fn wants_log(&self, level: Option<&str>) -> bool;
    /// The id the server-to-client request of route `route` carries towards it.
    fn request_id(&self, route: u64) -> RequestId;
    /// Queue a message on its standalone stream; false when it has none or it is full.
    fn push(&self, json: Arc<str>) -> bool;
    /// Whether the session ended.
    fn is_closed(&self) -> bool;
}

/// What a connection tells every host about.
pub enum HostEvent<'a> {
    /// `notifications/resources/updated` for `uri` (as hosts see it); `owner` is the session of a
    /// per-session connection (only it may hear of its resources).
    ResourceUpdated {
        owner: Option<HostKey>,
        uri: &'a str,
        params: &'a RawObject,
        notification: Arc<str>,
    },
    /// A log message no host call claims, from `upstream`.
    Log {
        upstream: &'a crate::config::UpstreamId,
        level: Option<&'a str>,
        notification: Arc<str>,
    },
    /// What hosts see of these lists changed.
    ListsChanged(&'a [ListKind]),
    /// `event` concerns only the hosts of `principal` (it comes from an upstream connection
    /// acting for that principal alone).
    Personal {
        principal: &'a str,
        event: &'a HostEvent<'a>,
    },
}

/// Where connections and supervisors send [`HostEvent`]s.
pub trait HostEvents: Send + Sync {
    fn emit(&self, event: HostEvent<'_>);
}

/// A host for tests: every capability, every log level, and what was pushed to its stream.
#[cfg(test)]
pub(crate) struct TestHost {
    pub key: HostKey,
    pub pushed: parking_lot::Mutex<Vec<Arc<str>>>,
}

#[cfg(test)]
impl TestHost {
    pub fn link(key: HostKey) -> Arc<dyn HostLink> {
        Arc::new(TestHost {
            key,
            pushed: parking_lot::Mutex::new(Vec::new()),
        })
    }
}

#[cfg(test)]
impl HostLink for TestHost {
    fn key(&self) -> HostKey {
        self.key
    }
    fn caps(&self) -> ClientCaps {
        ClientCaps::ALL
    }
    fn log_level_name(&self) -> Option<&'static str> {
        None
    }
    fn wants_log(&self, _level: Option<&str>) -> bool {
        true
    }
    fn request_id(&self, route: u64) -> RequestId {
        RequestId::number(route)
    }
    fn push(&self, json: Arc<str>) -> bool {
        self.pushed.lock().push(json);
        true
    }
    fn is_closed(&self) -> bool {
        false
    }
}

/// Hosts that hear nothing (a connection with no hosts behind it, and tests).
pub struct NoHosts;

impl HostEvents for NoHosts {
    fn emit(&self, _event: HostEvent<'_>) {}
}
