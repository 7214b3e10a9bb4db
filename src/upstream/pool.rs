//! Every configured upstream of a gateway: one slot per server (its shared connection, last known
//! facts, phase and list freshness), the catalog their lists feed, the ties to host sessions, and
//! where connections report to hosts. Connections are opened here, shared or per session.

use super::host::{HostEvent, HostEvents, HostLink};
use super::state::{Phase, UpstreamState};
use super::ties::HostTies;
use super::{spawn_connection, ConnectionContext, ConnectionEvent, Learned, ServerFacts, UpstreamHandle};
use crate::catalog::freshness::ListFreshness;
use crate::catalog::{CatalogStore, Naming};
use crate::config::{Config, IdMap, Isolation, ServerConfig, UpstreamId};
use crate::error::UpstreamError;
use arc_swap::ArcSwapOption;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// How long after the gateway starts a host's request waits for upstreams still on their first
/// start (a host arriving later never waits for them): long enough
/// for a cold `npx` or Python server on a busy machine to be in its answer, well short of the
/// handshake timeout and of hosts' own request timeouts, so a slow or hung one does not stall
/// the host (its lists join later, announced with `list_changed`).
pub const STARTUP_WAIT: Duration = Duration::from_secs(10);
/// How long a call waits for a per-session connection to become ready.
const CONNECT_WAIT: Duration = Duration::from_secs(60);
/// Capacity of a supervisor's event queue.
const SUPERVISOR_EVENTS: usize = 64;

/// One configured upstream.
pub struct UpstreamSlot {
    pub server: Arc<ServerConfig>,
    /// Its identity (the config name), which survives a reload.
    pub id: UpstreamId,
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
    /// What its connections learned about it (the era probe kills it, it speaks legacy SSE).
    pub learned: Arc<Learned>,
    pub events: mpsc::Sender<ConnectionEvent>,
}

/// The upstreams of a gateway.
pub struct Upstreams {
    /// In configuration order (earlier ones win a clash of exposed names).
    slots: Vec<UpstreamSlot>,
    by_id: IdMap<usize>,
    pub catalog: Arc<CatalogStore>,
    pub ties: Arc<HostTies>,
    hosts: Arc<dyn HostEvents>,
    pub shutdown: CancellationToken,
    started: watch::Receiver<usize>,
    /// Until when a host's first request may wait for upstreams on their first start.
    startup_deadline: tokio::time::Instant,
    /// Whether "all upstreams ready" was logged since the last failure.
    all_ready: AtomicBool,
}

/// What each supervisor needs to start with: its event queue, and the counter of upstreams that
/// finished their first start attempt.
pub struct SupervisorInputs {
    pub events: Vec<(UpstreamId, mpsc::Receiver<ConnectionEvent>)>,
    pub started: watch::Sender<usize>,
}

impl Upstreams {
    /// One slot per configured server; connections report to `hosts`.
    pub fn new(
        config: &Config,
        hosts: Arc<dyn HostEvents>,
        ties: Arc<HostTies>,
        shutdown: CancellationToken,
    ) -> (Arc<Upstreams>, SupervisorInputs) {
        let naming = |server: &ServerConfig| Naming {
            namespace: server.namespace.clone(),
            separator: config.gateway.separator.clone(),
            shaping: server.shaping.clone(),
        };
        let mut events = Vec::new();
        let slots = (config.servers.iter())
            .map(|server| {
                let (tx, rx) = mpsc::channel(SUPERVISOR_EVENTS);
                events.push((server.id.clone(), rx));
                UpstreamSlot {
                    server: Arc::new(server.clone()),
                    id: server.id.clone(),
                    naming: naming(server),
                    shared: ArcSwapOption::empty(),
                    facts: ArcSwapOption::empty(),
                    down_reason: ArcSwapOption::empty(),
                    list_freshness: ListFreshness::default(),
                    state: UpstreamState::default(),
                    learned: Arc::default(),
                    events: tx,
                }
            })
            .collect::<Vec<_>>();
        let (started_tx, started_rx) = watch::channel(0);
        let upstreams = Upstreams {
            catalog: Arc::new(CatalogStore::new(
                slots.iter().map(|s| (s.id.clone(), s.naming.clone())).collect(),
            )),
            by_id: slots.iter().enumerate().map(|(i, s)| (s.id.clone(), i)).collect(),
            slots,
            ties,
            hosts,
            shutdown,
            started: started_rx,
            startup_deadline: tokio::time::Instant::now() + STARTUP_WAIT,
            all_ready: AtomicBool::new(false),
        };
        let inputs = SupervisorInputs {
            events,
            started: started_tx,
        };
        (Arc::new(upstreams), inputs)
    }

    /// The upstream `id`, if it is configured.
    pub fn get(&self, id: &UpstreamId) -> Option<&UpstreamSlot> {
        self.by_id.get(id).and_then(|&i| self.slots.get(i))
    }

    /// The upstream `id`, or why a call to it cannot be served.
    pub fn slot(&self, id: &UpstreamId) -> Result<&UpstreamSlot, UpstreamError> {
        (self.get(id)).ok_or_else(|| UpstreamError::unavailable(id.as_str(), "not configured"))
    }

    pub fn iter(&self) -> std::slice::Iter<'_, UpstreamSlot> {
        self.slots.iter()
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Tell every host.
    pub fn emit(&self, event: HostEvent<'_>) {
        self.hosts.emit(event);
    }

    /// An upstream became ready: say so once when that makes all of them ready.
    pub fn note_ready(&self) {
        let all = self.slots.iter().all(|s| s.state.report().phase == Phase::Ready);
        if all && !self.all_ready.swap(true, Ordering::Relaxed) {
            let n = self.slots.len();
            tracing::info!("all {n} upstreams ready");
        }
    }

    /// An upstream went down: the next time all are ready is said again.
    pub fn note_down(&self) {
        self.all_ready.store(false, Ordering::Relaxed);
    }

    /// Wait until every upstream finished its first start attempt, but never past
    /// [`STARTUP_WAIT`] after the pool was made: a host arriving later is answered at once,
    /// whatever is still starting (or hung in its handshake).
    pub async fn wait_startup(&self) {
        let total = self.slots.len();
        let mut rx = self.started.clone();
        let _ = tokio::time::timeout_at(self.startup_deadline, rx.wait_for(|n| *n >= total)).await;
    }

    /// Whether every upstream finished its first start attempt.
    pub fn started_all(&self) -> bool {
        *self.started.borrow() >= self.slots.len()
    }

    /// Connection context for a new connection to the upstream of `slot`.
    pub fn connection_context(
        &self,
        slot: &UpstreamSlot,
        owner: Option<&Arc<dyn HostLink>>,
    ) -> ConnectionContext {
        ConnectionContext {
            server: slot.server.clone(),
            id: slot.id.clone(),
            naming: slot.naming.clone(),
            hosts: self.hosts.clone(),
            ties: self.ties.clone(),
            events: slot.events.clone(),
            owner: owner.map(Arc::downgrade),
            learned: slot.learned.clone(),
        }
    }

    /// The connection that serves `host` for upstream `id`, opening a per-session one on the
    /// session's first call (and again after it went down).
    pub async fn connection_for(
        &self,
        id: &UpstreamId,
        host: &Arc<dyn HostLink>,
    ) -> Result<UpstreamHandle, UpstreamError> {
        self.connection_to(self.slot(id)?, host).await
    }

    /// [`Upstreams::connection_for`] with the slot already looked up.
    pub async fn connection_to(
        &self,
        slot: &UpstreamSlot,
        host: &Arc<dyn HostLink>,
    ) -> Result<UpstreamHandle, UpstreamError> {
        if slot.server.isolation == Isolation::Shared {
            return match slot.shared.load_full() {
                Some(handle) => Ok((*handle).clone()),
                None => {
                    let reason = slot.down_reason.load_full().map(|r| (*r).clone());
                    Err(UpstreamError::unavailable(
                        slot.server.name.clone(),
                        reason.unwrap_or_else(|| "not connected".into()),
                    ))
                }
            };
        }
        let handle = self.ties.connection_or_open(host.key(), &slot.id, || {
            spawn_connection(self.connection_context(slot, Some(host)))
        });
        if host.is_closed() {
            // The session ended while this call was on its way: nothing will stop it later.
            self.ties.untie(host.key());
            return Err(UpstreamError::unavailable(
                slot.server.name.clone(),
                "the host session ended",
            ));
        }
        handle.wait_ready(CONNECT_WAIT).await?;
        Ok(handle)
    }

    /// Every open connection: the shared ones and every session's own.
    pub fn all_connections(&self) -> Vec<UpstreamHandle> {
        let shared = self.slots.iter().filter_map(|slot| slot.shared.load_full());
        let mut all: Vec<UpstreamHandle> = shared.map(|h| (*h).clone()).collect();
        all.extend(self.ties.all_connections());
        all
    }
}
