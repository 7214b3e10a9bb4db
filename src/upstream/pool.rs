//! Every configured upstream of a gateway: one slot per server (its shared connection, last known
//! facts, phase and list freshness), the catalog their lists feed, the ties to host sessions, and
//! where connections report to hosts. Connections are opened here, shared or per session.

use super::host::{HostEvent, HostEvents, HostLink};
use super::state::{Phase, UpstreamState};
use super::ties::HostTies;
use super::{spawn_connection, ConnectionContext, ConnectionEvent, Learned, ServerFacts, UpstreamHandle};
use crate::catalog::freshness::ListFreshness;
use crate::catalog::{CatalogStore, Naming};
use crate::config::{Config, IdMap, Isolation, ServerConfig, UpstreamAuth, UpstreamId};
use crate::credentials::bearer::Bearer;
use crate::credentials::{Credentials, LOCAL_PRINCIPAL};
use crate::error::UpstreamError;
use arc_swap::{ArcSwap, ArcSwapOption};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

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
    /// Its configuration as it started; the settings a reload changes live are read from
    /// `tunables` instead (they may have changed since).
    pub server: Arc<ServerConfig>,
    /// Its settings in force that change without a restart (shared with its connections).
    pub tunables: super::tunables::LiveTunables,
    /// Its identity (the config name), which survives a reload.
    pub id: UpstreamId,
    /// How its names are exposed, with the shaping it started with (a reload that changes only
    /// the shaping gives the catalog the new one and keeps the slot).
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
    /// Fires when its supervisor is to stop: the gateway stops (a child of the pool's
    /// `shutdown`), or a reload removed or replaced it ([`UpstreamSlot::retire`]).
    pub stop: CancellationToken,
    /// Why a reload retired it (what its calls in flight are answered with).
    retired: ArcSwapOption<String>,
    /// Fires once its first start attempt is over (its lists loaded, or the attempt failed).
    pub first_start: CancellationToken,
    /// The identity its shared connection acts as at the upstream (`auth = {...}`).
    pub bearer: Option<Arc<dyn Bearer>>,
    /// While set, its catalog is only its `authorize` tool: calling it signs a person in.
    pub awaiting_sign_in: AtomicBool,
    /// Its connections, one per principal, when they act for each principal on its own (see
    /// [`super::personal`]); then it has no shared connection.
    pub personal: Option<super::personal::PersonalConnections>,
    /// How many principals hold a grant for it (`oauth`), as its supervisor last counted.
    grants: AtomicU64,
}

impl UpstreamSlot {
    /// A slot for `server`, not yet supervised; its supervisor reads the returned queue.
    fn new(
        server: &ServerConfig,
        (separator, authenticated): (&str, bool),
        shutdown: &CancellationToken,
        credentials: &Arc<Credentials>,
    ) -> (Arc<UpstreamSlot>, mpsc::Receiver<ConnectionEvent>) {
        let (tx, rx) = mpsc::channel(SUPERVISOR_EVENTS);
        let personal = per_principal(server, authenticated);
        // The shared connection acts as mcpmux itself (client credentials) or as the one local
        // user (an `oauth` upstream of a gateway without [auth]).
        let bearer = match server.auth {
            _ if personal => None,
            UpstreamAuth::ClientCredentials(_) | UpstreamAuth::OAuth(_) => {
                credentials.bearer(server, LOCAL_PRINCIPAL)
            }
            _ => None,
        };
        let slot = UpstreamSlot {
            server: Arc::new(server.clone()),
            tunables: super::tunables::live(server),
            id: server.id.clone(),
            naming: Naming {
                namespace: server.namespace.clone(),
                separator: separator.to_string(),
                shaping: server.shaping.clone(),
            },
            shared: ArcSwapOption::empty(),
            facts: ArcSwapOption::empty(),
            down_reason: ArcSwapOption::empty(),
            list_freshness: ListFreshness::default(),
            state: UpstreamState::default(),
            learned: Arc::default(),
            events: tx,
            stop: shutdown.child_token(),
            retired: ArcSwapOption::empty(),
            first_start: CancellationToken::new(),
            bearer,
            awaiting_sign_in: AtomicBool::new(false),
            personal: personal.then(Default::default),
            grants: AtomicU64::new(0),
        };
        (Arc::new(slot), rx)
    }

    /// A reload removed or replaced this upstream: calls in flight on its connections (shared
    /// and per session) end with `reason`, the connections close (a stdio child is stopped and
    /// reaped; the shared one by its supervisor, which stops without touching the catalog), and
    /// a call that still finds the slot is refused with `reason`.
    pub fn retire(&self, ties: &HostTies, reason: &str) {
        self.retired.store(Some(Arc::new(reason.to_string())));
        self.stop.cancel();
        for connection in ties.forget_upstream(&self.id) {
            connection.abandon(reason.to_string());
        }
    }

    /// Why a reload retired it, if one did.
    pub fn retired(&self) -> Option<Arc<String>> {
        self.retired.load_full()
    }

    /// How many principals hold a grant for it (`oauth`).
    pub fn grant_count(&self) -> u64 {
        self.grants.load(Ordering::Relaxed)
    }

    pub(super) fn set_grant_count(&self, n: u64) {
        self.grants.store(n, Ordering::Relaxed);
    }
}

/// Whether `server`'s connections act for each principal on its own: an upstream that signs
/// in as the principal (`oauth`, `token_exchange`, `forward`) of a gateway that authenticates
/// its hosts (`[auth]`; without it there is one user, served by the shared connection).
pub fn per_principal(server: &ServerConfig, authenticated: bool) -> bool {
    authenticated
        && matches!(
            server.auth,
            UpstreamAuth::OAuth(_) | UpstreamAuth::TokenExchange(_) | UpstreamAuth::Forward
        )
}

/// The upstreams in force: in configuration order (earlier ones win a clash of exposed names),
/// with their index by id. Swapped whole by a reload; a request reads the set it started with.
#[derive(Default)]
struct SlotSet {
    slots: Vec<Arc<UpstreamSlot>>,
    by_id: IdMap<usize>,
    /// Whether any is an `oauth` upstream (calls may then need a sign-in first).
    any_oauth: bool,
    /// Whether any has connections per principal.
    any_personal: bool,
}

impl SlotSet {
    fn new(slots: Vec<Arc<UpstreamSlot>>) -> SlotSet {
        let by_id = slots.iter().enumerate().map(|(i, s)| (s.id.clone(), i)).collect();
        let any_oauth = (slots.iter()).any(|s| matches!(s.server.auth, UpstreamAuth::OAuth(_)));
        let any_personal = slots.iter().any(|s| s.personal.is_some());
        SlotSet {
            slots,
            by_id,
            any_oauth,
            any_personal,
        }
    }
}

/// The upstreams of a gateway.
pub struct Upstreams {
    set: ArcSwap<SlotSet>,
    pub catalog: Arc<CatalogStore>,
    pub ties: Arc<HostTies>,
    hosts: Arc<dyn HostEvents>,
    pub shutdown: CancellationToken,
    /// Every supervisor task, those a reload started included (a stop waits for them).
    pub supervisors: TaskTracker,
    /// `gateway.separator` as it was at start (a new one needs a restart).
    separator: String,
    /// Until when a host's first request may wait for upstreams on their first start.
    startup_deadline: tokio::time::Instant,
    /// Whether "all upstreams ready" was logged since the last failure.
    all_ready: AtomicBool,
    /// Reloads running: while there is one, the supervisors' `list_changed` are held back (the
    /// reload tells hosts once, from the catalog before and after).
    holding_lists: AtomicUsize,
    /// The outbound identities: what connections of `auth = {...}` upstreams authenticate with.
    pub credentials: Arc<Credentials>,
}

/// What the supervisors of new slots start with: each slot and its event queue.
pub struct SupervisorInputs {
    pub events: Vec<(Arc<UpstreamSlot>, mpsc::Receiver<ConnectionEvent>)>,
}

/// Holds hosts' `list_changed` back while it lives (see [`Upstreams::hold_lists`]).
pub struct ListHold<'a>(&'a Upstreams);

impl Drop for ListHold<'_> {
    fn drop(&mut self) {
        self.0.holding_lists.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Upstreams {
    /// One slot per configured server; connections report to `hosts`.
    pub fn new(
        config: &Config,
        hosts: Arc<dyn HostEvents>,
        ties: Arc<HostTies>,
        shutdown: CancellationToken,
        credentials: Arc<Credentials>,
    ) -> (Arc<Upstreams>, SupervisorInputs) {
        let separator = &config.gateway.separator;
        let naming = (separator.as_str(), config.auth.is_some());
        let (slots, events): (Vec<_>, Vec<_>) = (config.servers.iter())
            .map(|server| {
                let (slot, rx) = UpstreamSlot::new(server, naming, &shutdown, &credentials);
                (slot.clone(), (slot, rx))
            })
            .unzip();
        let upstreams = Upstreams {
            catalog: Arc::new(CatalogStore::with_name_budget(
                slots.iter().map(|s| (s.id.clone(), s.naming.clone())).collect(),
                config.gateway.name_budget(),
            )),
            set: ArcSwap::from_pointee(SlotSet::new(slots)),
            ties,
            hosts,
            shutdown,
            supervisors: TaskTracker::new(),
            separator: separator.clone(),
            startup_deadline: tokio::time::Instant::now() + STARTUP_WAIT,
            all_ready: AtomicBool::new(false),
            holding_lists: AtomicUsize::new(0),
            credentials,
        };
        (Arc::new(upstreams), SupervisorInputs { events })
    }

    /// Start the supervisor of each slot in `inputs` (on the current runtime).
    pub fn supervise(self: &Arc<Self>, inputs: SupervisorInputs) {
        for (slot, events) in inputs.events {
            (self.supervisors).spawn(super::supervisor::supervise(self.clone(), slot, events));
        }
    }

    /// A slot for `server` and its event queue (not yet in force, not yet supervised).
    /// `authenticated`: whether the configuration has `[auth]` (see [`per_principal`]).
    pub(super) fn new_slot(
        &self,
        server: &ServerConfig,
        (separator, authenticated): (&str, bool),
    ) -> (Arc<UpstreamSlot>, mpsc::Receiver<ConnectionEvent>) {
        UpstreamSlot::new(
            server,
            (separator, authenticated),
            &self.shutdown,
            &self.credentials,
        )
    }

    /// Put `slots` in force (in this order), replacing the whole set.
    pub(super) fn replace_slots(&self, slots: Vec<Arc<UpstreamSlot>>) {
        self.set.store(Arc::new(SlotSet::new(slots)));
        self.all_ready.store(false, Ordering::Relaxed);
    }

    /// The separator of exposed names (`gateway.separator` at start).
    pub fn separator(&self) -> &str {
        &self.separator
    }

    /// The upstream `id`, if it is configured.
    pub fn get(&self, id: &UpstreamId) -> Option<Arc<UpstreamSlot>> {
        let set = self.set.load();
        set.by_id.get(id).and_then(|&i| set.slots.get(i)).cloned()
    }

    /// The upstream `id`, or why a call to it cannot be served.
    pub fn slot(&self, id: &UpstreamId) -> Result<Arc<UpstreamSlot>, UpstreamError> {
        (self.get(id)).ok_or_else(|| UpstreamError::unavailable(id.as_str(), "not configured"))
    }

    /// The upstreams in force, in configuration order.
    pub fn iter(&self) -> impl Iterator<Item = Arc<UpstreamSlot>> {
        let set = self.set.load_full();
        (0..set.slots.len()).map(move |i| set.slots[i].clone())
    }

    pub fn len(&self) -> usize {
        self.set.load().slots.len()
    }

    /// Whether any upstream in force is an `oauth` one.
    pub fn any_oauth(&self) -> bool {
        self.set.load().any_oauth
    }

    /// Whether any upstream in force has connections per principal.
    pub fn any_personal(&self) -> bool {
        self.set.load().any_personal
    }

    pub fn is_empty(&self) -> bool {
        self.set.load().slots.is_empty()
    }

    /// Tell every host (a list change waits while a reload holds them, see
    /// [`Upstreams::hold_lists`]).
    pub fn emit(&self, event: HostEvent<'_>) {
        if matches!(event, HostEvent::ListsChanged(_)) && self.holding_lists.load(Ordering::Acquire) > 0 {
            return;
        }
        self.hosts.emit(event);
    }

    /// Hold the supervisors' list changes back until the returned guard drops: whoever holds
    /// it tells hosts what changed.
    pub fn hold_lists(&self) -> ListHold<'_> {
        self.holding_lists.fetch_add(1, Ordering::AcqRel);
        ListHold(self)
    }

    /// An upstream became ready: say so once when that makes all of them ready.
    pub fn note_ready(&self) {
        let set = self.set.load();
        let all = set.slots.iter().all(|s| s.state.report().phase == Phase::Ready);
        if all && !self.all_ready.swap(true, Ordering::Relaxed) {
            let n = set.slots.len();
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
        let set = self.set.load_full();
        let all = futures_util::future::join_all(set.slots.iter().map(|s| s.first_start.cancelled()));
        let _ = tokio::time::timeout_at(self.startup_deadline, all).await;
    }

    /// Whether every upstream finished its first start attempt.
    pub fn started_all(&self) -> bool {
        self.set.load().slots.iter().all(|s| s.first_start.is_cancelled())
    }

    /// Connection context for a new connection to the upstream of `slot`.
    pub fn connection_context(
        &self,
        slot: &UpstreamSlot,
        owner: Option<&Arc<dyn HostLink>>,
    ) -> ConnectionContext {
        ConnectionContext {
            server: slot.server.clone(),
            tunables: slot.tunables.clone(),
            id: slot.id.clone(),
            naming: slot.naming.clone(),
            hosts: self.hosts.clone(),
            ties: self.ties.clone(),
            events: slot.events.clone(),
            owner: owner.map(Arc::downgrade),
            learned: slot.learned.clone(),
            bearer: slot.bearer.clone(),
        }
    }

    /// The connection that serves `host` for upstream `id`, opening a per-session one on the
    /// session's first call (and again after it went down).
    pub async fn connection_for(
        self: &Arc<Self>,
        id: &UpstreamId,
        (host, principal): (&Arc<dyn HostLink>, Option<&str>),
    ) -> Result<UpstreamHandle, UpstreamError> {
        let slot = self.slot(id)?;
        self.connection_to(&slot, (host, principal)).await
    }

    /// [`Upstreams::connection_for`] with the slot already looked up; `principal` (the
    /// request's, as `Principal::grant_principal` names it) picks the connection of an upstream
    /// whose connections are per principal.
    pub async fn connection_to(
        self: &Arc<Self>,
        slot: &Arc<UpstreamSlot>,
        (host, principal): (&Arc<dyn HostLink>, Option<&str>),
    ) -> Result<UpstreamHandle, UpstreamError> {
        if let Some(reason) = slot.retired() {
            return Err(UpstreamError::unavailable(
                slot.server.name.clone(),
                (*reason).clone(),
            ));
        }
        if slot.personal.is_some() {
            return self.personal_connection(slot, principal).await;
        }
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
        if let Some(reason) = slot.retired() {
            // A reload retired the upstream while this call opened its connection.
            if self.ties.forget(host.key(), &slot.id, handle.connection_id()) {
                handle.shutdown();
            }
            return Err(UpstreamError::unavailable(
                slot.server.name.clone(),
                (*reason).clone(),
            ));
        }
        handle.wait_ready(CONNECT_WAIT).await?;
        Ok(handle)
    }

    /// Every open connection: the shared ones and every session's own.
    pub fn all_connections(&self) -> Vec<UpstreamHandle> {
        let set = self.set.load();
        let shared = set.slots.iter().filter_map(|slot| slot.shared.load_full());
        let mut all: Vec<UpstreamHandle> = shared.map(|h| (*h).clone()).collect();
        for connections in set.slots.iter().filter_map(|slot| slot.personal.as_ref()) {
            all.extend(connections.handles());
        }
        all.extend(self.ties.all_connections());
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::ListKind;

    /// Counts the list changes hosts were told of.
    #[derive(Default)]
    struct Counting(parking_lot::Mutex<Vec<ListKind>>);

    impl HostEvents for Counting {
        fn emit(&self, event: HostEvent<'_>) {
            if let HostEvent::ListsChanged(kinds) = event {
                self.0.lock().extend_from_slice(kinds);
            }
        }
    }

    #[tokio::test]
    async fn a_hold_keeps_list_changes_from_hosts_until_it_drops() {
        let config = Config::from_toml_str("", "t.toml", &|_| None).unwrap();
        let hosts = Arc::new(Counting::default());
        let (pool, _inputs) = Upstreams::new(
            &config,
            hosts.clone(),
            Arc::new(HostTies::new()),
            CancellationToken::new(),
            Credentials::new(&config, None),
        );
        pool.emit(HostEvent::ListsChanged(&[ListKind::Tools]));
        {
            let _first = pool.hold_lists();
            let second = pool.hold_lists();
            pool.emit(HostEvent::ListsChanged(&[ListKind::Prompts]));
            drop(second);
            pool.emit(HostEvent::ListsChanged(&[ListKind::Resources]));
        }
        pool.emit(HostEvent::ListsChanged(&[ListKind::Templates]));
        assert_eq!(*hosts.0.lock(), vec![ListKind::Tools, ListKind::Templates]);
    }

    #[tokio::test]
    async fn a_retired_slot_refuses_calls_with_its_reason_and_its_sessions_connections_stop() {
        let config = Config::from_toml_str(
            "[servers.u]\ncommand = \"x\"\nisolation = \"per-session\"\n",
            "t.toml",
            &|_| None,
        )
        .unwrap();
        let ties = Arc::new(HostTies::new());
        let (pool, _inputs) = Upstreams::new(
            &config,
            Arc::new(super::super::host::NoHosts),
            ties.clone(),
            CancellationToken::new(),
            Credentials::new(&config, None),
        );
        let slot = pool.get(&UpstreamId::new("u")).unwrap();
        let open = ties.connection_or_open(7, &slot.id, || UpstreamHandle::detached("u"));
        slot.retire(&ties, "server \"u\" was removed");
        assert!(slot.stop.is_cancelled() && open.is_stopping());
        assert!(ties.connection(7, &slot.id).is_none());
        let host = super::super::host::TestHost::link(7);
        let refused = pool
            .connection_to(&slot, (&host, None))
            .await
            .err()
            .map(|e| e.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|e| e.contains("server \"u\" was removed")),
            "{refused:?}"
        );
        assert!(
            ties.connection(7, &slot.id).is_none(),
            "no connection opened for it"
        );
    }
}
