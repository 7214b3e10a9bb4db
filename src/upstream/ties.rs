//! What ties host sessions to upstream connections: the table of server-to-client requests on
//! their way to hosts, and the connections opened for one session (`isolation =
//! "per-session"`), opened at most once per (session, upstream). A host that ends is untied here.

use super::host::HostKey;
use super::server_requests::ServerRequests;
use super::UpstreamHandle;
use crate::config::{IdMap, UpstreamId};
use dashmap::DashMap;

/// Shared by every connection and every session of a gateway.
#[derive(Default)]
pub struct HostTies {
    /// Server-to-client requests on their way to hosts.
    pub routes: ServerRequests,
    /// Per-session connections, by host and upstream.
    connections: DashMap<HostKey, IdMap<UpstreamHandle>, crate::util::fast_map::FastState>,
}

impl HostTies {
    pub fn new() -> Self {
        Self::default()
    }

    /// The live connection of `host` to `upstream`, or the one `open` makes: checked and
    /// recorded under one lock, so concurrent first calls of a session open one connection. A
    /// connection that went down is replaced (and told to stop).
    pub fn connection_or_open(
        &self,
        host: HostKey,
        upstream: &UpstreamId,
        open: impl FnOnce() -> UpstreamHandle,
    ) -> UpstreamHandle {
        let mut of_host = self.connections.entry(host).or_default();
        match of_host.get(upstream) {
            Some(live) if !live.is_down() => live.clone(),
            _ => {
                let handle = open();
                if let Some(dead) = of_host.insert(upstream.clone(), handle.clone()) {
                    dead.shutdown();
                }
                handle
            }
        }
    }

    /// The connection of `host` to `upstream`, if it has one.
    pub fn connection(&self, host: HostKey, upstream: &UpstreamId) -> Option<UpstreamHandle> {
        self.connections.get(&host)?.get(upstream).cloned()
    }

    /// Every connection opened for `host`.
    pub fn connections_of(&self, host: HostKey) -> Vec<UpstreamHandle> {
        self.connections
            .get(&host)
            .map(|of_host| of_host.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Every per-session connection of every host.
    pub fn all_connections(&self) -> Vec<UpstreamHandle> {
        self.connections
            .iter()
            .flat_map(|of_host| of_host.values().cloned().collect::<Vec<_>>())
            .collect()
    }

    /// Take every session's connection to `upstream` out of the table (a reload removed or
    /// replaced it); the caller stops them.
    pub fn forget_upstream(&self, upstream: &UpstreamId) -> Vec<UpstreamHandle> {
        let mut gone = Vec::new();
        for mut of_host in self.connections.iter_mut() {
            gone.extend(of_host.remove(upstream));
        }
        gone
    }

    /// Take `host`'s connection to `upstream` out of the table if it is still the one numbered
    /// `connection_id`; returns whether it was.
    pub fn forget(&self, host: HostKey, upstream: &UpstreamId, connection_id: u64) -> bool {
        let Some(mut of_host) = self.connections.get_mut(&host) else {
            return false;
        };
        if of_host
            .get(upstream)
            .is_some_and(|c| c.connection_id() == connection_id)
        {
            of_host.remove(upstream);
            return true;
        }
        false
    }

    /// `host` ended: whoever waits for its answers gets an error, and its own connections stop.
    pub fn untie(&self, host: HostKey) {
        self.routes.close_host(host);
        if let Some((_, of_host)) = self.connections.remove(&host) {
            for connection in of_host.into_values() {
                connection.shutdown();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};

    #[test]
    fn concurrent_first_calls_open_one_connection() {
        // Many threads ask for the same session's connection at the same moment, again and again:
        // exactly one is opened each time (a check and an insert under two locks opened several,
        // and all but the last were never stopped: leaked child processes).
        for round in 0..200u64 {
            let ties = Arc::new(HostTies::new());
            let opened = Arc::new(AtomicUsize::new(0));
            let threads = 8;
            let start = Arc::new(Barrier::new(threads));
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    let (ties, opened, start) = (ties.clone(), opened.clone(), start.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        ties.connection_or_open(round, &UpstreamId::new("u"), || {
                            opened.fetch_add(1, Ordering::SeqCst);
                            UpstreamHandle::detached("u")
                        })
                        .connection_id()
                    })
                })
                .collect();
            let ids: Vec<u64> = workers.into_iter().map(|w| w.join().unwrap()).collect();
            assert_eq!(opened.load(Ordering::SeqCst), 1, "round {round}");
            assert!(
                ids.iter().all(|id| *id == ids[0]),
                "every caller got the same connection"
            );
        }
    }

    #[test]
    fn untying_a_host_stops_its_connections() {
        let ties = HostTies::new();
        let a = ties.connection_or_open(1, &UpstreamId::new("u"), || UpstreamHandle::detached("a"));
        let b = ties.connection_or_open(2, &UpstreamId::new("u"), || UpstreamHandle::detached("b"));
        assert_eq!(ties.all_connections().len(), 2);
        ties.untie(1);
        assert!(a.is_stopping() && !b.is_stopping());
        let u = UpstreamId::new("u");
        assert!(ties.connection(1, &u).is_none() && ties.connection(2, &u).is_some());
    }

    #[test]
    fn forgetting_an_upstream_takes_every_sessions_connection_to_it_and_no_other() {
        let ties = HostTies::new();
        let (u, v) = (UpstreamId::new("u"), UpstreamId::new("v"));
        let a = ties.connection_or_open(1, &u, || UpstreamHandle::detached("a"));
        ties.connection_or_open(2, &u, || UpstreamHandle::detached("b"));
        ties.connection_or_open(2, &v, || UpstreamHandle::detached("c"));
        let gone: Vec<u64> = ties
            .forget_upstream(&u)
            .iter()
            .map(|c| c.connection_id())
            .collect();
        assert_eq!(gone.len(), 2);
        assert!(gone.contains(&a.connection_id()));
        assert!(ties.connection(1, &u).is_none() && ties.connection(2, &u).is_none());
        assert!(ties.connection(2, &v).is_some());
        // Forgetting one connection by number: only while it is still the one in the table.
        let d = ties.connection_or_open(1, &u, || UpstreamHandle::detached("d"));
        assert!(!ties.forget(1, &u, a.connection_id()));
        assert!(ties.forget(1, &u, d.connection_id()));
        assert!(ties.connection(1, &u).is_none());
    }
}
