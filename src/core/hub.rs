//! The gateway's shared state: configuration, the catalog, the session registry and one slot
//! per configured upstream (its current shared connection and last known facts).

use crate::catalog::freshness::ListFreshness;
use crate::catalog::{CatalogStore, Naming};
use crate::config::{Config, Isolation, ServerConfig};
use crate::core::input_required::ParkedCalls;
use crate::error::UpstreamError;
use crate::session::host::Session;
use crate::session::SessionRegistry;
use crate::upstream::state::UpstreamState;
use crate::upstream::{spawn_connection, ConnectionContext, ConnectionEvent, ServerFacts, UpstreamHandle};
use arc_swap::ArcSwapOption;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// How long a host's first request waits for upstreams that are still starting.
pub const STARTUP_WAIT: Duration = Duration::from_secs(60);
/// How long a call waits for a per-session connection to become ready.
const CONNECT_WAIT: Duration = Duration::from_secs(60);

/// One configured upstream.
pub struct UpstreamSlot {
    pub server: Arc<ServerConfig>,
    pub index: usize,
    pub naming: Naming,
    /// The connection serving every session (shared isolation).
    pub shared: ArcSwapOption<UpstreamHandle>,
    /// What the server said in its last successful initialize.
    pub facts: ArcSwapOption<ServerFacts>,
    /// Why the upstream is unavailable, when it is.
    pub down_reason: ArcSwapOption<String>,
    /// The cache hints a modern upstream gave its lists.
    pub list_freshness: ListFreshness,
    /// Its phase, restarts and last failure, as `/status` reports them.
    pub state: UpstreamState,
    pub events: mpsc::Sender<ConnectionEvent>,
}

/// Shared gateway state.
pub struct Hub {
    pub config: Arc<Config>,
    pub catalog: CatalogStore,
    pub sessions: Arc<SessionRegistry>,
    pub upstreams: Vec<UpstreamSlot>,
    pub shutdown: CancellationToken,
    /// Modern hosts' calls waiting for their retry with input.
    pub parked: Arc<ParkedCalls>,
    started: watch::Receiver<usize>,
    born: std::time::Instant,
}

impl Hub {
    /// Build the hub; returns the receivers each supervisor listens on and the startup counter.
    pub fn new(
        config: Arc<Config>,
        shutdown: CancellationToken,
    ) -> (
        Arc<Hub>,
        Vec<mpsc::Receiver<ConnectionEvent>>,
        watch::Sender<usize>,
    ) {
        let namings: Vec<Naming> = config
            .servers
            .iter()
            .map(|s| Naming {
                namespace: s.namespace.clone(),
                separator: config.gateway.separator.clone(),
            })
            .collect();
        let mut receivers = Vec::new();
        let upstreams = config
            .servers
            .iter()
            .enumerate()
            .map(|(index, server)| {
                let (tx, rx) = mpsc::channel(64);
                receivers.push(rx);
                UpstreamSlot {
                    server: Arc::new(server.clone()),
                    index,
                    naming: namings[index].clone(),
                    shared: ArcSwapOption::empty(),
                    facts: ArcSwapOption::empty(),
                    down_reason: ArcSwapOption::empty(),
                    list_freshness: ListFreshness::default(),
                    state: UpstreamState::default(),
                    events: tx,
                }
            })
            .collect();
        let (started_tx, started_rx) = watch::channel(0);
        let hub = Arc::new(Hub {
            catalog: CatalogStore::new(namings),
            sessions: Arc::new(SessionRegistry::new()),
            upstreams,
            shutdown,
            parked: Arc::new(ParkedCalls::default()),
            started: started_rx,
            born: std::time::Instant::now(),
            config,
        });
        (hub, receivers, started_tx)
    }

    /// Wait (bounded) until every upstream finished its first start attempt.
    pub async fn wait_startup(&self) {
        let total = self.upstreams.len();
        let mut rx = self.started.clone();
        let _ = tokio::time::timeout(STARTUP_WAIT, rx.wait_for(|n| *n >= total)).await;
    }

    /// Whether every upstream finished its first start attempt.
    pub fn started_all(&self) -> bool {
        *self.started.borrow() >= self.upstreams.len()
    }

    /// How long the gateway has been running.
    pub fn uptime(&self) -> Duration {
        self.born.elapsed()
    }

    /// Connection context for a new connection to upstream `index`.
    pub fn connection_context(&self, index: usize, owner: Option<&Arc<Session>>) -> ConnectionContext {
        let slot = &self.upstreams[index];
        ConnectionContext {
            server: slot.server.clone(),
            index,
            naming: slot.naming.clone(),
            sessions: self.sessions.clone(),
            events: slot.events.clone(),
            owner: owner.map(Arc::downgrade),
        }
    }

    /// The connection that serves `session` for upstream `index`, opening a per-session one lazily.
    pub async fn connection_for(
        &self,
        index: usize,
        session: &Arc<Session>,
    ) -> Result<UpstreamHandle, UpstreamError> {
        let slot = &self.upstreams[index];
        let unavailable = |reason: String| UpstreamError::Unavailable {
            name: slot.server.name.clone(),
            reason,
        };
        if slot.server.isolation == Isolation::Shared {
            return match slot.shared.load_full() {
                Some(handle) => Ok((*handle).clone()),
                None => {
                    let reason = slot.down_reason.load_full().map(|r| (*r).clone());
                    Err(unavailable(reason.unwrap_or_else(|| "not connected".into())))
                }
            };
        }
        // A per-session connection that went down is replaced on the session's next call.
        let live = session
            .connection(index)
            .filter(|h| !matches!(h.status(), crate::upstream::Status::Down(_)));
        let handle = match live {
            Some(handle) => handle,
            None => {
                let handle = spawn_connection(self.connection_context(index, Some(session)));
                session.set_connection(index, handle.clone());
                handle
            }
        };
        handle.wait_ready(CONNECT_WAIT).await?;
        Ok(handle)
    }
}
