//! The one table of server-to-client requests on their way to hosts (sampling, elicitation,
//! roots, and mcpmux's own questions for a modern upstream's input): each request's route (a
//! number of this table), the id the host sees (the host makes it from the route:
//! [`HostLink::request_id`]), the host it went to, where its answer goes, and the call stream it
//! rode. Hosts answer through it,
//! upstreams withdraw through it, and a host or connection that ends clears its routes here.
//! Bounded: [`MAX_PER_HOST`] routes per host, [`MAX_ROUTES`] in all.

use super::call_channel::CallSink;
use super::host::{HostKey, HostLink};
use super::UpstreamHandle;
use crate::error::codes;
use crate::protocol::message::error_object;
use crate::protocol::{RequestId, ResponsePayload};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use tokio::sync::oneshot;

/// Server-to-client requests one host may have unanswered.
pub const MAX_PER_HOST: usize = 256;
/// Server-to-client requests unanswered in the whole gateway.
pub const MAX_ROUTES: usize = 16_384;

/// Where a host's answer goes.
pub enum AnswerTo {
    /// Back to the upstream connection that asked, under its own id.
    Upstream {
        connection: UpstreamHandle,
        upstream_id: RequestId,
    },
    /// To mcpmux itself, asking on behalf of a modern upstream's input request.
    Local(oneshot::Sender<ResponsePayload>),
}

impl AnswerTo {
    /// Deliver the host's answer.
    pub fn answer(self, payload: ResponsePayload) {
        match self {
            AnswerTo::Upstream {
                connection,
                upstream_id,
            } => connection.answer(upstream_id, payload),
            AnswerTo::Local(tx) => {
                let _ = tx.send(payload);
            }
        }
    }
}

/// One request on its way to a host.
pub struct Route {
    pub host: Weak<dyn HostLink>,
    /// The id the host knows the request by.
    pub host_id: RequestId,
    pub answer_to: AnswerTo,
    /// The call stream it was sent on (else it went on the host's standalone stream).
    pub sink: Option<CallSink>,
}

/// Why a route could not be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RoutesFull {
    #[error("the host session has {MAX_PER_HOST} server-to-client requests unanswered")]
    Host,
    #[error("mcpmux has {MAX_ROUTES} server-to-client requests unanswered")]
    Gateway,
}

#[derive(Default)]
struct Table {
    routes: HashMap<(HostKey, u64), Route>,
    /// Routes answered by an upstream, by (connection, the upstream's id).
    by_upstream: HashMap<(u64, RequestId), (HostKey, u64)>,
    per_host: HashMap<HostKey, usize>,
}

impl Table {
    fn remove(&mut self, key: (HostKey, u64)) -> Option<Route> {
        let route = self.routes.remove(&key)?;
        if let AnswerTo::Upstream {
            connection,
            upstream_id,
        } = &route.answer_to
        {
            self.by_upstream
                .remove(&(connection.connection_id(), upstream_id.clone()));
        }
        if let Some(n) = self.per_host.get_mut(&key.0) {
            *n -= 1;
            if *n == 0 {
                self.per_host.remove(&key.0);
            }
        }
        Some(route)
    }
}

/// The route table (one per gateway).
#[derive(Default)]
pub struct ServerRequests {
    /// The last route number given out.
    last_route: AtomicU64,
    table: Mutex<Table>,
}

impl ServerRequests {
    pub fn new() -> Self {
        Self::default()
    }

    /// Record a request for `host`: its route, and the id it carries towards the host (made
    /// before the table is locked: the host may seal it).
    pub fn open(
        &self,
        host: &Arc<dyn HostLink>,
        answer_to: AnswerTo,
        sink: Option<CallSink>,
    ) -> Result<(u64, RequestId), RoutesFull> {
        let key = host.key();
        let id = self.last_route.fetch_add(1, Ordering::Relaxed) + 1;
        let host_id = host.request_id(id);
        let mut table = self.table.lock();
        if table.routes.len() >= MAX_ROUTES {
            return Err(RoutesFull::Gateway);
        }
        if table.per_host.get(&key).copied().unwrap_or(0) >= MAX_PER_HOST {
            return Err(RoutesFull::Host);
        }
        if let AnswerTo::Upstream {
            connection,
            upstream_id,
        } = &answer_to
        {
            let index = (connection.connection_id(), upstream_id.clone());
            table.by_upstream.insert(index, (key, id));
        }
        table.routes.insert(
            (key, id),
            Route {
                host: Arc::downgrade(host),
                host_id: host_id.clone(),
                answer_to,
                sink,
            },
        );
        *table.per_host.entry(key).or_default() += 1;
        Ok((id, host_id))
    }

    /// Note the call stream request `id` went out on (notifications about it follow it there).
    pub fn attach_sink(&self, host: HostKey, id: u64, sink: CallSink) {
        if let Some(route) = self.table.lock().routes.get_mut(&(host, id)) {
            route.sink = Some(sink);
        }
    }

    /// Take the route of request `id` sent to `host` (it is answered, or given up).
    pub fn take(&self, host: HostKey, id: u64) -> Option<Route> {
        self.table.lock().remove((host, id))
    }

    /// A host answered request `id`: deliver it. False when no such request waits for that host.
    pub fn answer(&self, host: HostKey, id: u64, payload: ResponsePayload) -> bool {
        match self.take(host, id) {
            Some(route) => {
                route.answer_to.answer(payload);
                true
            }
            None => false,
        }
    }

    /// The upstream behind `connection` withdrew its request `upstream_id`: its route (which
    /// names the id the host knows it by).
    pub fn withdraw(&self, connection: &UpstreamHandle, upstream_id: &RequestId) -> Option<Route> {
        let mut table = self.table.lock();
        let (host, id) = table
            .by_upstream
            .get(&(connection.connection_id(), upstream_id.clone()))
            .copied()?;
        table.remove((host, id))
    }

    /// A connection ended: its requests can no longer be answered.
    pub fn forget_connection(&self, connection: &UpstreamHandle) {
        let conn = connection.connection_id();
        let mut table = self.table.lock();
        let keys: Vec<(HostKey, u64)> = table
            .by_upstream
            .iter()
            .filter(|((c, _), _)| *c == conn)
            .map(|(_, key)| *key)
            .collect();
        for key in keys {
            table.remove(key);
        }
    }

    /// A host ended: whoever waits for its answers gets an error.
    pub fn close_host(&self, host: HostKey) {
        let routes: Vec<Route> = {
            let mut table = self.table.lock();
            if !table.per_host.contains_key(&host) {
                return;
            }
            let keys: Vec<(HostKey, u64)> =
                table.routes.keys().filter(|(h, _)| *h == host).copied().collect();
            keys.into_iter().filter_map(|key| table.remove(key)).collect()
        };
        for route in routes {
            route.answer_to.answer(ResponsePayload::Error(error_object(
                codes::INTERNAL_ERROR,
                "host session ended",
                None,
            )));
        }
    }

    /// Requests waiting for `host`.
    pub fn waiting_for(&self, host: HostKey) -> usize {
        self.table.lock().per_host.get(&host).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::host::TestHost;

    fn host(key: HostKey) -> Arc<dyn HostLink> {
        TestHost::link(key)
    }

    fn local() -> (AnswerTo, oneshot::Receiver<ResponsePayload>) {
        let (tx, rx) = oneshot::channel();
        (AnswerTo::Local(tx), rx)
    }

    #[test]
    fn answers_reach_only_the_route_of_their_host() {
        let table = ServerRequests::new();
        let (a, b) = (host(1), host(2));
        let (to, mut rx) = local();
        let (id, host_id) = table.open(&a, to, None).unwrap();
        assert_eq!(host_id, RequestId::number(id), "as the host names it");
        let ok = ResponsePayload::Result(crate::protocol::message::raw("{}".into()));
        assert!(!table.answer(b.key(), id, ok), "another host cannot answer it");
        let ok = ResponsePayload::Result(crate::protocol::message::raw("{}".into()));
        assert!(table.answer(a.key(), id, ok));
        assert!(matches!(rx.try_recv(), Ok(ResponsePayload::Result(_))));
        assert!(table.table.lock().routes.is_empty());
    }

    #[test]
    fn routes_are_bounded_per_host() {
        let table = ServerRequests::new();
        let a = host(7);
        let mut waiting = Vec::new();
        for _ in 0..MAX_PER_HOST {
            let (to, rx) = local();
            table.open(&a, to, None).unwrap();
            waiting.push(rx);
        }
        let (to, _rx) = local();
        assert_eq!(table.open(&a, to, None), Err(RoutesFull::Host));
        let (to, _rx) = local();
        assert!(
            table.open(&host(8), to, None).is_ok(),
            "other hosts are not affected"
        );
        table.close_host(7);
        assert_eq!(table.waiting_for(7), 0);
        for mut rx in waiting {
            assert!(matches!(rx.try_recv(), Ok(ResponsePayload::Error(_))));
        }
        let (to, _rx) = local();
        assert!(table.open(&a, to, None).is_ok());
    }
}
