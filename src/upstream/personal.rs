//! The connections of an upstream that acts for each principal on its own (an `oauth`,
//! `token_exchange` or `forward` upstream behind `[auth]`): one per principal, opened on the
//! principal's first request, authenticated as that principal alone, its lists kept as that
//! principal's own (`catalog::personal`), its notifications told to that principal's hosts
//! only, and closed after [`IDLE_CLOSE`] unused. No upstream session carries two principals.
//!
//! An `oauth` upstream's connection for a principal without a grant does not open: the
//! principal sees the upstream's authorize tool (what the store holds for everyone) until it
//! signs in; then its own tools replace it, for it alone.

use super::host::{HostEvent, HostEvents};
use super::pool::{UpstreamSlot, Upstreams};
use super::supervisor::{fetch_list, load_lists, stop_connection, FetchedList};
use super::{spawn_connection, ConnectionEvent, UpstreamHandle};
use crate::catalog::ListKind;
use crate::config::UpstreamAuth;
use crate::error::UpstreamError;
use crate::protocol::RawObject;
use arc_swap::ArcSwapOption;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// The most principals with a connection to one upstream at once; one more is refused (with a
/// clear error) until one closes.
pub const MAX_CONNECTIONS: usize = 1000;
/// A principal's connection unused this long closes; its next request opens it again.
pub const IDLE_CLOSE: Duration = Duration::from_secs(15 * 60);
/// How long a failed open answers that principal's requests before the next one tries again.
const RETRY_AFTER: Duration = Duration::from_secs(5);
/// How often a principal's connection looks at the vault's generation for a grant another
/// process or replica wrote or removed.
const SIGN_IN_POLL: Duration = Duration::from_secs(2);
/// How long a call to a per-principal upstream waits for its principal's connection to open.
pub const OPEN_WAIT: Duration = Duration::from_secs(30);
/// How long a request that reads the catalog waits for its principal's connections still
/// opening: a slow or hung upstream does not hold the principal's every request (its lists
/// join later, announced with `list_changed`), as [`super::pool::STARTUP_WAIT`] for shared ones.
pub const LISTS_WAIT: Duration = Duration::from_secs(10);
/// Beyond the handshake's own bound, how long an open may take before it counts as failed.
const READY_MARGIN: Duration = Duration::from_secs(15);
/// Capacity of one connection's list-change queue (changes beyond it are coalesced away: a
/// full queue already holds a re-fetch).
const EVENTS: usize = 16;

/// Where a principal's connection is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PersonalState {
    Opening,
    Ready,
    /// An `oauth` upstream the principal holds no grant for (or must consent to more scope).
    NeedsSignIn,
    /// The open failed (the reason answers its calls for a few seconds).
    Failed(String),
}

/// One principal's connection to one upstream.
pub struct Personal {
    principal: Arc<str>,
    handle: ArcSwapOption<UpstreamHandle>,
    state: watch::Sender<PersonalState>,
    used: Mutex<Instant>,
}

impl Personal {
    pub fn state(&self) -> PersonalState {
        self.state.borrow().clone()
    }

    /// Its connection, while ready.
    pub fn handle(&self) -> Option<UpstreamHandle> {
        self.handle.load_full().map(|h| (*h).clone())
    }

    fn set(&self, state: PersonalState) {
        self.state.send_replace(state);
    }

    fn touch(&self) {
        *self.used.lock() = Instant::now();
    }

    /// Wait (bounded) until it is no longer opening.
    async fn settled(&self, limit: Duration) -> PersonalState {
        let mut rx = self.state.subscribe();
        let waited = tokio::time::timeout(limit, rx.wait_for(|s| *s != PersonalState::Opening)).await;
        match waited {
            Ok(Ok(state)) => state.clone(),
            _ => self.state(),
        }
    }
}

/// Every principal's connection to one upstream.
#[derive(Default)]
pub struct PersonalConnections {
    by_principal: Mutex<HashMap<String, Arc<Personal>>>,
}

impl PersonalConnections {
    /// Every principal's ready connection.
    pub fn handles(&self) -> Vec<UpstreamHandle> {
        let map = self.by_principal.lock();
        (map.values().filter_map(|me| me.handle.load_full()))
            .map(|h| (*h).clone())
            .collect()
    }

    /// `principal`'s, if it has one.
    pub fn of(&self, principal: &str) -> Option<Arc<Personal>> {
        self.by_principal.lock().get(principal).cloned()
    }

    /// Forget `me` (its task ended), unless a newer one took its place.
    fn forget(&self, me: &Arc<Personal>) {
        let mut map = self.by_principal.lock();
        if map.get(&*me.principal).is_some_and(|held| Arc::ptr_eq(held, me)) {
            map.remove(&*me.principal);
        }
    }
}

impl Upstreams {
    /// `principal`'s connection to `slot`'s upstream, started if it has none (`None`: the
    /// upstream's connections are not per principal, or [`MAX_CONNECTIONS`] are open).
    pub fn personal_for(
        self: &Arc<Self>,
        slot: &Arc<UpstreamSlot>,
        principal: &str,
    ) -> Option<Arc<Personal>> {
        let connections = slot.personal.as_ref()?;
        let mut map = connections.by_principal.lock();
        if let Some(me) = map.get(principal) {
            me.touch();
            return Some(me.clone());
        }
        if map.len() >= MAX_CONNECTIONS || slot.stop.is_cancelled() {
            return None;
        }
        let me = Arc::new(Personal {
            principal: principal.into(),
            handle: ArcSwapOption::empty(),
            state: watch::channel(PersonalState::Opening).0,
            used: Mutex::new(Instant::now()),
        });
        map.insert(principal.to_string(), me.clone());
        drop(map);
        self.supervisors
            .spawn(run(self.clone(), slot.clone(), me.clone()));
        Some(me)
    }

    /// Start `principal`'s connections to every per-principal upstream it has none to and
    /// `may` use (its policy leaves it something there: no token is fetched for an upstream it
    /// may not use), and wait (bounded by `limit`) until those opening have loaded its lists or
    /// failed.
    pub async fn open_personal(
        self: &Arc<Self>,
        principal: &str,
        may: impl Fn(&UpstreamSlot) -> bool,
        limit: Duration,
    ) {
        let opening: Vec<Arc<Personal>> = (self.iter())
            .filter(|slot| slot.personal.is_some() && may(slot))
            .filter_map(|slot| self.personal_for(&slot, principal))
            .filter(|me| me.state() == PersonalState::Opening)
            .collect();
        futures_util::future::join_all(opening.iter().map(|me| me.settled(limit))).await;
    }

    /// The connection that serves `principal` at `slot`'s (per-principal) upstream, opened if
    /// needed; or why there is none.
    pub async fn personal_connection(
        self: &Arc<Self>,
        slot: &Arc<UpstreamSlot>,
        principal: Option<&str>,
    ) -> Result<UpstreamHandle, UpstreamError> {
        let name = &slot.server.name;
        let Some(principal) = principal else {
            let why = "its connections act for an authenticated principal, and this request has none";
            return Err(UpstreamError::unavailable(name.clone(), why));
        };
        let Some(me) = self.personal_for(slot, principal) else {
            let why = format!("{MAX_CONNECTIONS} principals are connected to it; try again later");
            return Err(UpstreamError::unavailable(name.clone(), why));
        };
        match me.settled(OPEN_WAIT).await {
            PersonalState::Ready => match me.handle.load_full() {
                Some(handle) => Ok((*handle).clone()),
                None => Err(UpstreamError::unavailable(name.clone(), "its connection closed")),
            },
            PersonalState::Opening => Err(UpstreamError::unavailable(name.clone(), "still connecting")),
            PersonalState::NeedsSignIn => Err(UpstreamError::unavailable(
                name.clone(),
                format!(
                    "sign in first: call {}",
                    slot.naming.expose_name(super::sign_in_wait::AUTHORIZE_TOOL)
                ),
            )),
            PersonalState::Failed(why) => Err(UpstreamError::unavailable(name.clone(), why)),
        }
    }
}

/// Why a principal's ready connection stopped serving.
enum Ended {
    /// The gateway stops or a reload retired the upstream.
    Stop,
    /// Unused for [`IDLE_CLOSE`].
    Idle,
    /// Its grant is gone: sign in again.
    GrantLost,
    /// The connection died.
    Closed,
}

/// Run `me` (principal's connection to `slot`'s upstream) until it is idle, fails, or the
/// upstream stops; then forget it.
async fn run(pool: Arc<Upstreams>, slot: Arc<UpstreamSlot>, me: Arc<Personal>) {
    serve(&pool, &slot, &me).await;
    me.handle.store(None);
    if let Some(connections) = &slot.personal {
        connections.forget(&me);
    }
    drop_lists(&pool, &slot, &me.principal);
}

async fn serve(pool: &Arc<Upstreams>, slot: &Arc<UpstreamSlot>, me: &Arc<Personal>) {
    let principal = &*me.principal;
    let oauth = matches!(slot.server.auth, UpstreamAuth::OAuth(_));
    let bearer = pool.credentials.bearer(&slot.server, principal);
    loop {
        if oauth && needs_sign_in(pool, slot, principal).await {
            drop_lists(pool, slot, principal);
            me.set(PersonalState::NeedsSignIn);
            if !await_sign_in(pool, slot, me).await {
                return;
            }
        }
        me.set(PersonalState::Opening);
        let (events_tx, mut events) = mpsc::channel(EVENTS);
        let mut ctx = pool.connection_context(slot, None);
        ctx.bearer = bearer.clone();
        ctx.events = events_tx;
        ctx.hosts = Arc::new(PrincipalHosts {
            inner: ctx.hosts.clone(),
            principal: me.principal.clone(),
        });
        let handshake = slot.tunables.load().handshake_timeout;
        let handle = spawn_connection(ctx);
        let ready = tokio::select! {
            ready = handle.wait_ready(super::startup::opening_bound(handshake) + READY_MARGIN) => ready,
            _ = slot.stop.cancelled() => {
                stop_connection(slot, &handle).await;
                return;
            }
        };
        let facts = match ready {
            Ok(facts) => facts,
            Err(err) => {
                handle.shutdown();
                if oauth && needs_sign_in(pool, slot, principal).await {
                    continue;
                }
                tracing::warn!(upstream = %slot.server.name, principal, "connecting for the principal failed: {}", err.detail());
                return fail(slot, me, err.detail()).await;
            }
        };
        if slot.facts.load().is_none() {
            // What the upstream offers, for the capabilities mcpmux declares.
            slot.facts.store(Some(facts.clone()));
        }
        let mut changed = Vec::new();
        load_lists(slot, &handle, &facts, |kind, items| {
            if put_list(pool, slot, principal, kind, items) {
                changed.push(kind);
            }
        })
        .await;
        tell(pool, principal, &changed);
        if oauth && needs_sign_in(pool, slot, principal).await {
            // Its lists were refused for want of a grant or of scope: sign in first.
            handle.shutdown();
            continue;
        }
        me.handle.store(Some(Arc::new(handle.clone())));
        me.set(PersonalState::Ready);
        let ended = tokio::select! {
            _ = refetch_on_change(pool, slot, principal, &mut events) => Ended::Closed,
            _ = handle.closed() => Ended::Closed,
            _ = grant_lost(pool, slot, principal), if oauth => Ended::GrantLost,
            _ = idle(me) => Ended::Idle,
            _ = slot.stop.cancelled() => Ended::Stop,
        };
        me.handle.store(None);
        stop_connection(slot, &handle).await;
        drop_lists(pool, slot, principal);
        match ended {
            Ended::Stop | Ended::Idle => return,
            Ended::GrantLost => continue,
            Ended::Closed => {
                let why = match handle.status() {
                    super::Status::Down(reason) => reason,
                    _ => "connection ended".to_string(),
                };
                tracing::warn!(upstream = %slot.server.name, principal, "the principal's connection ended: {why}");
                return fail(slot, me, why).await;
            }
        }
    }
}

/// Answer the principal's requests with `why` for a while, then let the next one try again.
async fn fail(slot: &UpstreamSlot, me: &Personal, why: String) {
    me.set(PersonalState::Failed(why));
    tokio::select! {
        _ = tokio::time::sleep(RETRY_AFTER) => {}
        _ = slot.stop.cancelled() => {}
    }
}

/// Wait until the principal holds a grant (true), or it is idle or the upstream stops (false).
async fn await_sign_in(pool: &Upstreams, slot: &UpstreamSlot, me: &Personal) -> bool {
    tokio::select! {
        _ = until_signed_in_is(pool, slot, &me.principal, true) => true,
        _ = idle(me) => false,
        _ = slot.stop.cancelled() => false,
    }
}

/// Resolves when the principal's grant is gone (revoked, refused, logged out).
async fn grant_lost(pool: &Upstreams, slot: &UpstreamSlot, principal: &str) {
    until_signed_in_is(pool, slot, principal, false).await
}

/// Resolves once whether `principal` is signed in to `slot`'s upstream is `wanted`. The vault is
/// read only when something may have changed (this process announced a change, or the vault's
/// generation moved: another process or replica wrote), not every few seconds for each principal.
async fn until_signed_in_is(pool: &Upstreams, slot: &UpstreamSlot, principal: &str, wanted: bool) {
    let credentials = &pool.credentials;
    let generation = || credentials.vault().map(|v| v.generation());
    let mut changes = credentials.changes();
    let mut seen = generation();
    loop {
        let announced = tokio::select! {
            _ = changes.changed() => true,
            _ = tokio::time::sleep(SIGN_IN_POLL) => false,
        };
        let now = generation();
        if (announced || now != seen) && credentials.signed_in(&slot.server.name, principal).await == wanted {
            return;
        }
        seen = now;
    }
}

/// Whether `principal` holds no grant for `slot`'s `oauth` upstream, or must consent to more
/// scope.
pub(super) async fn needs_sign_in(pool: &Upstreams, slot: &UpstreamSlot, principal: &str) -> bool {
    !pool.credentials.signed_in(&slot.server.name, principal).await
}

/// Resolves once `me` went unused for [`IDLE_CLOSE`].
async fn idle(me: &Personal) {
    loop {
        let since = *me.used.lock();
        if since.elapsed() >= IDLE_CLOSE {
            return;
        }
        tokio::time::sleep_until((since + IDLE_CLOSE).into()).await;
    }
}

/// Re-fetch a list the principal's connection says changed (until the connection ends).
async fn refetch_on_change(
    pool: &Upstreams,
    slot: &UpstreamSlot,
    principal: &str,
    events: &mut mpsc::Receiver<ConnectionEvent>,
) {
    while let Some(ConnectionEvent::ListChanged { kind, via }) = events.recv().await {
        match fetch_list(&via, kind).await {
            Ok(FetchedList { items, .. }) => {
                crate::telemetry::record::list_refreshed(&slot.server.name, kind.field());
                if put_list(pool, slot, principal, kind, items) {
                    tell(pool, principal, &[kind]);
                }
            }
            Err(err) => {
                tracing::warn!(upstream = %slot.server.name, list = %kind.method(), %err, "re-fetching a list failed")
            }
        }
    }
}

fn put_list(
    pool: &Upstreams,
    slot: &UpstreamSlot,
    principal: &str,
    kind: ListKind,
    items: Vec<RawObject>,
) -> bool {
    let current = || !slot.stop.is_cancelled();
    (pool.catalog).replace_personal((principal, &slot.id), kind, items, &current)
}

/// The principal sees everyone's lists of the upstream again (its connection is gone). A
/// retired upstream's lists are the reload's to drop (its id may be its replacement's now).
fn drop_lists(pool: &Upstreams, slot: &UpstreamSlot, principal: &str) {
    if slot.stop.is_cancelled() {
        return;
    }
    let changed = pool.catalog.drop_personal(principal, &slot.id);
    tell(pool, principal, &changed);
}

/// Tell the principal's hosts that these lists changed for them.
fn tell(pool: &Upstreams, principal: &str, kinds: &[ListKind]) {
    if !kinds.is_empty() {
        pool.emit(HostEvent::Personal {
            principal,
            event: &HostEvent::ListsChanged(kinds),
        });
    }
}

/// What a principal's connection tells hosts reaches that principal's hosts only.
struct PrincipalHosts {
    inner: Arc<dyn HostEvents>,
    principal: Arc<str>,
}

impl HostEvents for PrincipalHosts {
    fn emit(&self, event: HostEvent<'_>) {
        self.inner.emit(HostEvent::Personal {
            principal: &self.principal,
            event: &event,
        });
    }
}
