//! The supervisor of an upstream whose connections are per principal (see [`super::personal`]):
//! it opens no connection itself. It gives the catalog what a principal without a connection
//! of its own sees (an `oauth` upstream's authorize tool, else nothing), and keeps the phase
//! `/status` shows: `needs_authorization` while no principal holds a grant of an `oauth`
//! upstream, else ready (each principal's connection opens on its first request).

use super::host::HostEvent;
use super::pool::{UpstreamSlot, Upstreams};
use super::ConnectionEvent;
use crate::catalog::ListKind;
use crate::config::UpstreamAuth;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How often the grant count is read again without a change being announced (another
/// process's sign-in or logout).
const RECOUNT_EVERY: Duration = Duration::from_secs(10);

/// Run until the gateway stops or a reload retires the upstream.
pub(super) async fn supervise(
    pool: Arc<Upstreams>,
    slot: Arc<UpstreamSlot>,
    mut events: mpsc::Receiver<ConnectionEvent>,
) {
    let oauth = matches!(slot.server.auth, UpstreamAuth::OAuth(_));
    let mut changed = Vec::new();
    for kind in ListKind::ALL {
        let items = match kind {
            ListKind::Tools if oauth => vec![super::sign_in_wait::authorize_tool(&slot)],
            _ => Vec::new(),
        };
        if (pool.catalog).replace_while(&slot.id, kind, items, &|| !slot.stop.is_cancelled()) {
            changed.push(kind);
        }
    }
    pool.emit(HostEvent::ListsChanged(&changed));
    slot.first_start.cancel();
    let mut changes = pool.credentials.changes();
    loop {
        let grants = match oauth {
            true => pool.credentials.grant_count(&slot.server.name).await,
            false => 0,
        };
        slot.set_grant_count(grants);
        if oauth && grants == 0 {
            slot.state.needs_authorization();
        } else if slot.state.report().phase != super::state::Phase::Ready {
            slot.state.ready();
            pool.note_ready();
        }
        tokio::select! {
            _ = changes.changed() => {}
            _ = tokio::time::sleep(RECOUNT_EVERY) => {}
            // Its connections report to queues of their own; nothing arrives here.
            Some(_) = events.recv() => {}
            _ = slot.stop.cancelled() => break,
        }
    }
    slot.state.stopped();
}
