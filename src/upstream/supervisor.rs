//! One supervisor per configured upstream: connect, initialize, load its lists into the
//! catalog, re-fetch a list as soon as the upstream says it changed (events arriving during a
//! re-fetch are coalesced into one more, see [`super::coalesce`]) and tell every session when
//! what hosts see did change, and restart a shared connection with backoff when it dies.

use super::coalesce;
use super::host::HostEvent;
use super::pool::{UpstreamSlot, Upstreams};
use super::state::{Phase, CRASH_LOOP_FAILURES, CRASH_LOOP_WINDOW};
use super::{spawn_connection, CallFailure, ConnectionEvent, ServerFacts, Status, UpstreamHandle};
use crate::catalog::ListKind;
use crate::config::Isolation;
use crate::protocol::message::{json_string, raw};
use crate::protocol::modern_result::CacheHint;
use crate::protocol::RawObject;
use crate::util::Backoff;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Bounds on walking an upstream's pages.
const MAX_PAGES: usize = 1000;
const MAX_ITEMS: usize = 100_000;
const LIST_TIMEOUT: Duration = Duration::from_secs(30);
/// Beyond the server's handshake timeout, how long a start may take before it counts as failed.
const READY_MARGIN: Duration = Duration::from_secs(15);
/// How long stopping a connection may take at shutdown (a stdio child's staged stop runs inside).
const STOP_WAIT: Duration = Duration::from_secs(8);
const RESTART_MIN: Duration = Duration::from_secs(1);
const RESTART_MAX: Duration = Duration::from_secs(30);
/// The most a restart's random extra wait adds to its step.
const RESTART_JITTER_MAX: Duration = Duration::from_millis(250);
/// A connection that stayed up this long resets the restart backoff.
const STABLE_AFTER: Duration = Duration::from_secs(60);

/// Run the supervisor of upstream `slot` until the gateway stops or a reload retires it.
pub async fn supervise(
    pool: Arc<Upstreams>,
    slot: Arc<UpstreamSlot>,
    mut events: mpsc::Receiver<ConnectionEvent>,
) {
    if slot.personal.is_some() {
        return super::personal_upstream::supervise(pool, slot, events).await;
    }
    let slot = &*slot;
    let mut first_attempt = true;
    let mut backoff = Backoff::new(RESTART_MIN, RESTART_MAX).with_jitter_cap(RESTART_JITTER_MAX);
    // The connection reports its own handshake timeout; this only bounds a connection task
    // that would not (the stop of a stdio child takes a few seconds more).
    loop {
        if super::sign_in_wait::needs_sign_in(&pool, slot).await {
            if std::mem::take(&mut first_attempt) {
                slot.first_start.cancel();
            }
            super::sign_in_wait::await_sign_in(&pool, slot).await;
            if slot.stop.is_cancelled() {
                slot.state.stopped();
                return;
            }
        }
        // Read per attempt: a reload changes it for the next connect.
        let handshake = slot.tunables.load().handshake_timeout;
        let ready_wait = super::startup::opening_bound(handshake) + READY_MARGIN;
        slot.state.starting();
        let handle = spawn_connection(pool.connection_context(slot, None));
        let ready = tokio::select! {
            ready = handle.wait_ready(ready_wait) => ready,
            _ = slot.stop.cancelled() => {
                stop_connection(slot, &handle).await;
                slot.state.stopped();
                slot.first_start.cancel();
                return;
            }
        };
        let up_since = Instant::now();
        let mut failure = None;
        let opened = ready.is_ok();
        match ready {
            Ok(facts) => {
                slot.facts.store(Some(facts.clone()));
                slot.down_reason.store(None);
                tokio::select! {
                    _ = refresh_all(&pool, slot, &handle, &facts) => {}
                    _ = slot.stop.cancelled() => {}
                }
                if super::sign_in_wait::needs_sign_in(&pool, slot).await {
                    // Its lists were refused for want of a grant or of scope: sign in first.
                    handle.shutdown();
                    continue;
                }
                if slot.server.isolation == Isolation::PerSession {
                    // The catalog came from this probe connection; sessions open their own.
                    handle.shutdown();
                } else {
                    slot.shared.store(Some(Arc::new(handle.clone())));
                }
                slot.awaiting_sign_in
                    .store(false, std::sync::atomic::Ordering::Release);
                // Ready as `/status` says it: lists loaded, calls served.
                slot.state.ready();
                pool.note_ready();
            }
            Err(err) => {
                slot.down_reason.store(Some(Arc::new(err.detail())));
                failure = Some(err.detail());
                handle.shutdown();
            }
        }
        if first_attempt {
            first_attempt = false;
            slot.first_start.cancel();
        }
        let shared_up = slot.shared.load().is_some();
        let probe_ok = slot.server.isolation == Isolation::PerSession && slot.facts.load().is_some();
        if shared_up || probe_ok {
            tokio::select! {
                _ = watch_events(&pool, slot, &mut events) => {}
                _ = handle.closed(), if shared_up => {}
                _ = grant_lost(&pool, slot) => {
                    tracing::warn!(upstream = %slot.server.name, "the grant is gone: closing the connection until a sign-in");
                }
                _ = slot.stop.cancelled() => {}
            }
        }
        if slot.stop.is_cancelled() {
            slot.shared.store(None);
            stop_connection(slot, &handle).await;
            slot.state.stopped();
            return;
        }
        if let Status::Down(reason) = handle.status() {
            failure.get_or_insert_with(|| reason.clone());
            slot.down_reason.store(Some(Arc::new(reason)));
        }
        slot.shared.store(None);
        slot.list_freshness.clear();
        pool.note_down();
        let changed = pool.catalog.clear_while(&slot.id, &|| !slot.stop.is_cancelled());
        pool.emit(HostEvent::ListsChanged(&changed));
        if up_since.elapsed() > STABLE_AFTER {
            backoff.reset();
        }
        if super::sign_in_wait::needs_sign_in(&pool, slot).await {
            // Not a failure of the server: nobody may use it until someone signs in.
            handle.shutdown();
            continue;
        }
        let reason = failure.unwrap_or_else(|| "connection ended".into());
        let phase = slot.state.failed(&reason, Instant::now());
        if phase == Phase::CrashLoop {
            backoff.jump_to_max();
        }
        let delay = backoff.next_delay();
        report_failure(&slot.server.name, &reason, opened, phase, delay);
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = slot.stop.cancelled() => {
                slot.state.stopped();
                return;
            }
        }
    }
}

/// Resolves when an `oauth` upstream's grant is gone (revoked, refused, `mcpmux logout`);
/// never for other upstreams.
async fn grant_lost(pool: &Upstreams, slot: &UpstreamSlot) {
    if !matches!(slot.server.auth, crate::config::UpstreamAuth::OAuth(_)) {
        return std::future::pending().await;
    }
    let mut changes = pool.credentials.changes();
    loop {
        tokio::select! {
            _ = changes.changed() => {}
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
        if super::sign_in_wait::needs_sign_in(pool, slot).await {
            return;
        }
    }
}

/// Stop a connection and wait (bounded) until its task has closed it. When a reload retired
/// the upstream, a ready connection is given up with the reason, so its calls in flight say why.
pub(super) async fn stop_connection(slot: &UpstreamSlot, handle: &UpstreamHandle) {
    if let (Some(reason), Status::Ready(_)) = (slot.retired(), handle.status()) {
        handle.abandon((*reason).clone());
        if tokio::time::timeout(STOP_WAIT, handle.closed()).await.is_ok() {
            return;
        }
    }
    handle.shutdown();
    if tokio::time::timeout(STOP_WAIT, handle.closed()).await.is_err() {
        tracing::warn!(upstream = %handle.name(), "upstream did not stop in time");
    }
}

/// One log line per failure: what happened, why, and when the next attempt comes.
fn report_failure(name: &str, reason: &str, opened: bool, phase: Phase, delay: Duration) {
    let retry_in_ms = delay.as_millis() as u64;
    if phase == Phase::CrashLoop {
        tracing::error!(
            upstream = %name,
            %reason,
            retry_in_ms,
            "upstream is crash-looping ({CRASH_LOOP_FAILURES} failures within {} s); restarting",
            CRASH_LOOP_WINDOW.as_secs(),
        );
    } else if opened {
        tracing::warn!(upstream = %name, %reason, retry_in_ms, "upstream connection lost; restarting");
    } else {
        tracing::error!(upstream = %name, %reason, retry_in_ms, "upstream failed to start; restarting");
    }
}

/// Serve list_changed events (from the shared connection or any per-session one) forever: the
/// first of a burst is re-fetched at once; those arriving meanwhile make one more round, one
/// fetch per (list, upstream), with the connection that reported last.
async fn watch_events(
    pool: &Arc<Upstreams>,
    slot: &UpstreamSlot,
    events: &mut mpsc::Receiver<ConnectionEvent>,
) {
    let key = |event: &ConnectionEvent| match event {
        ConnectionEvent::ListChanged { kind, via } => (*kind, via.upstream_id().clone()),
    };
    coalesce::serve(events, key, |batch| refetch(pool, slot, batch)).await;
}

/// Re-fetch the lists of one round together, then tell sessions once about those that changed.
async fn refetch(pool: &Arc<Upstreams>, slot: &UpstreamSlot, batch: Vec<ConnectionEvent>) {
    let fetches = batch
        .into_iter()
        .map(|ConnectionEvent::ListChanged { kind, via }| async move {
            let fetched = fetch_list(&via, kind).await;
            (kind, via, fetched)
        });
    let mut changed = Vec::new();
    for (kind, via, fetched) in futures_util::future::join_all(fetches).await {
        match fetched {
            Ok(FetchedList { items, hint }) => {
                crate::telemetry::record::list_refreshed(&slot.server.name, kind.field());
                slot.list_freshness.record(kind, hint, Instant::now());
                // A retired slot's id may belong to its replacement now: its lists are not ours.
                if pool
                    .catalog
                    .replace_while(&slot.id, kind, items, &|| !slot.stop.is_cancelled())
                {
                    changed.push(kind);
                }
            }
            Err(err) => {
                tracing::warn!(upstream = %via.name(), list = %kind.method(), %err, "re-fetching a list failed")
            }
        }
    }
    pool.emit(HostEvent::ListsChanged(&changed));
}

/// Load every list the server offers into the catalog and tell sessions what changed.
async fn refresh_all(
    pool: &Arc<Upstreams>,
    slot: &UpstreamSlot,
    handle: &UpstreamHandle,
    facts: &ServerFacts,
) {
    let mut changed = Vec::new();
    // What the server no longer offers goes (a server restarted by a reload may offer less).
    let put = |kind: ListKind, items: Vec<RawObject>| {
        if (pool.catalog).replace_while(&slot.id, kind, items, &|| !slot.stop.is_cancelled()) {
            changed.push(kind);
        }
    };
    load_lists(slot, handle, facts, put).await;
    pool.emit(HostEvent::ListsChanged(&changed));
}

/// Fetch every list the server offers through `handle` and `put` each (an empty one for a list
/// it does not offer); a list that fails to load is logged and not put.
pub(super) async fn load_lists(
    slot: &UpstreamSlot,
    handle: &UpstreamHandle,
    facts: &ServerFacts,
    mut put: impl FnMut(ListKind, Vec<RawObject>),
) {
    for kind in ListKind::ALL {
        if !facts.has(kind.capability()) {
            put(kind, Vec::new());
            continue;
        }
        match fetch_list(handle, kind).await {
            Ok(FetchedList { items, hint }) => {
                tracing::info!(upstream = %handle.name(), list = %kind.method(), count = items.len(), "loaded list");
                crate::telemetry::record::list_refreshed(&slot.server.name, kind.field());
                slot.list_freshness.record(kind, hint, Instant::now());
                put(kind, items);
            }
            // An older server that announces `resources` may still not serve templates.
            Err(err) if err.is_method_not_found() => {
                tracing::debug!(upstream = %handle.name(), list = %kind.method(), "the server does not serve this list");
                put(kind, Vec::new());
            }
            Err(err) => {
                tracing::warn!(upstream = %handle.name(), list = %kind.method(), %err, "loading a list failed")
            }
        }
    }
}

/// One upstream list, every page walked.
pub struct FetchedList {
    pub items: Vec<RawObject>,
    /// A modern upstream's cache hint: the shortest lifetime and most private scope of the pages.
    pub hint: Option<CacheHint>,
}

/// Walk every page of one list (bounded).
pub async fn fetch_list(handle: &UpstreamHandle, kind: ListKind) -> Result<FetchedList, CallFailure> {
    let modern = handle.facts().is_some_and(|f| f.is_modern());
    let mut items = Vec::new();
    let mut hint: Option<CacheHint> = None;
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor
            .as_ref()
            .map(|c| raw(format!("{{\"cursor\":{}}}", json_string(c))));
        let result = handle.request(kind.method(), params, LIST_TIMEOUT).await?;
        let page = RawObject::parse(result.get()).map_err(|e| protocol_error(handle, e.to_string()))?;
        if modern {
            let page_hint = CacheHint::of_result(&page);
            hint = Some(hint.map_or(page_hint, |h| h.combine(page_hint)));
        }
        for item in page.get_array(kind.field()).unwrap_or_default() {
            match RawObject::parse(item.get()) {
                Ok(obj) if items.len() < MAX_ITEMS => items.push(obj),
                Ok(_) => {
                    tracing::warn!(upstream = %handle.name(), list = %kind.method(), "list truncated at {MAX_ITEMS} items");
                    return Ok(FetchedList { items, hint });
                }
                Err(err) => {
                    tracing::warn!(upstream = %handle.name(), %err, "skipping a list item that is not an object")
                }
            }
        }
        cursor = page.get_str("nextCursor");
        if cursor.is_none() {
            return Ok(FetchedList { items, hint });
        }
    }
    tracing::warn!(upstream = %handle.name(), list = %kind.method(), "stopped after {MAX_PAGES} pages");
    Ok(FetchedList { items, hint })
}

fn protocol_error(handle: &UpstreamHandle, detail: String) -> CallFailure {
    CallFailure::Upstream(crate::error::UpstreamError::Protocol {
        name: handle.name().to_string(),
        detail,
    })
}
