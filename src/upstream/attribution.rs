//! The attribution rule, in one place: which host call a message from an upstream belongs to
//! when it is not a response (a server-to-client request, a log message, another notification).
//! 1. The request whose HTTP response stream carried it (mcpmux's own request: nobody).
//! 2. On a per-session connection: the owner's oldest call in flight, else the owner itself.
//! 3. Else the oldest host call in flight on the connection; with none, nobody.

use super::call_channel::CallSink;
use super::connection::Pending;
use super::host::HostLink;
use super::CallOrigin;
use std::collections::HashMap;
use std::sync::Arc;

/// The host a message goes to, and the call stream it rides when a call claims it.
pub(super) type Attributed = (Arc<dyn HostLink>, Option<CallSink>);

/// Apply the rule to the calls `pending` on a connection.
pub(super) fn attribute<S: std::hash::BuildHasher>(
    pending: &HashMap<u64, Pending, S>,
    via: Option<u64>,
    owner: Option<Arc<dyn HostLink>>,
) -> Option<Attributed> {
    if let Some(call) = via.and_then(|id| pending.get(&id)) {
        return match &call.origin {
            CallOrigin::Host { host, sink } => Some((host.clone(), Some(sink.clone()))),
            // mcpmux's own request (a listen stream, a list walk): no host is behind it.
            CallOrigin::Internal(_) => None,
        };
    }
    let owner_key = owner.as_ref().map(|o| o.key());
    let oldest = pending
        .values()
        .filter_map(|p| match &p.origin {
            CallOrigin::Host { host, sink } => Some((p.started, host, sink)),
            CallOrigin::Internal(_) => None,
        })
        .filter(|(_, host, _)| owner_key.is_none_or(|k| host.key() == k))
        .min_by_key(|(started, _, _)| *started)
        .map(|(_, host, sink)| (host.clone(), Some(sink.clone())));
    match owner {
        Some(owner) => oldest.or(Some((owner, None))),
        None => oldest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::call_channel::call_channel;
    use crate::upstream::host::{HostKey, TestHost};
    use std::time::{Duration, Instant};

    fn host_call(key: HostKey, age_ms: u64) -> Pending {
        let (sink, events) = call_channel(4);
        std::mem::forget(events);
        Pending {
            origin: CallOrigin::Host {
                host: TestHost::link(key),
                sink,
            },
            started: Instant::now() - Duration::from_millis(age_ms),
            span: tracing::Span::none(),
            leg: None,
        }
    }

    fn internal() -> Pending {
        let (tx, _rx) = tokio::sync::oneshot::channel();
        Pending {
            origin: CallOrigin::Internal(tx),
            started: Instant::now() - Duration::from_secs(60),
            span: tracing::Span::none(),
            leg: None,
        }
    }

    fn key_of(found: Option<Attributed>) -> Option<(HostKey, bool)> {
        found.map(|(host, sink)| (host.key(), sink.is_some()))
    }

    #[test]
    fn the_stream_a_message_arrives_on_names_its_call() {
        let pending = HashMap::from([(1, host_call(10, 5)), (2, host_call(20, 500)), (3, internal())]);
        assert_eq!(key_of(attribute(&pending, Some(1), None)), Some((10, true)));
        assert_eq!(
            key_of(attribute(&pending, Some(3), None)),
            None,
            "mcpmux's own request"
        );
    }

    #[test]
    fn otherwise_the_oldest_host_call_in_flight() {
        let pending = HashMap::from([(1, host_call(10, 5)), (2, host_call(20, 500)), (3, internal())]);
        assert_eq!(key_of(attribute(&pending, None, None)), Some((20, true)));
        assert_eq!(
            key_of(attribute(&pending, Some(99), None)),
            Some((20, true)),
            "an unknown stream"
        );
        let only_internal = HashMap::from([(3, internal())]);
        assert_eq!(key_of(attribute(&only_internal, None, None)), None);
    }

    #[test]
    fn a_per_session_connection_belongs_to_its_owner() {
        let pending = HashMap::from([(1, host_call(10, 5)), (2, host_call(20, 500))]);
        let owner = TestHost::link(10);
        assert_eq!(
            key_of(attribute(&pending, None, Some(owner.clone()))),
            Some((10, true))
        );
        let idle = HashMap::new();
        assert_eq!(
            key_of(attribute(&idle, None, Some(owner))),
            Some((10, false)),
            "its standalone stream"
        );
    }
}
