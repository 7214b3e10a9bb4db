//! `tools/list`, `prompts/list`, `resources/list`, `resources/templates/list` for both eras:
//! pages of the merged catalog with mcpmux's own sealed cursors, kept per snapshot and copied into
//! the reply; a modern host's page also carries the list's cache hint and mcpmux's `serverInfo`.
//! Under a policy a principal's cursors are bound to it (its list is its own).

use super::initialize::server_info;
use super::shape_reply;
use crate::catalog::cursor::Cursors;
use crate::catalog::ListKind;
use crate::core::access::Access;
use crate::core::context::{Era, RequestCtx};
use crate::core::hub::Hub;
use crate::error::RequestError;
use crate::protocol::message::{result_response, to_raw};
use crate::protocol::modern_result::{own_result_members, CacheHint};
use crate::protocol::{Message, RawObject, RequestId};
use crate::upstream::{ConnectionEvent, UpstreamSlot};
use std::time::Instant;

/// How long a session-era upstream's list may be reused when the upstream announces changes
/// (mcpmux re-fetches and notifies listeners as soon as it does).
const ANNOUNCED_LIST_TTL_MS: u64 = 60_000;

/// A page of a merged list, as the request's era wants it.
pub fn serve(hub: &Hub, ctx: &RequestCtx, id: RequestId, kind: ListKind, params: &RawObject) -> Message {
    let cursor = params.get_str("cursor");
    let page_size = hub.config().gateway.page_size;
    let catalog = hub.catalog_for(ctx);
    let access = Access::of(hub, ctx);
    if kind == ListKind::Tools && super::meta_tools::listed_instead(&catalog, &access) {
        return meta_tools_page(hub, ctx, id, &access, cursor.is_some());
    }
    let sealer = &*hub.sealer;
    // A profile's endpoint, or a principal under a policy or with upstream connections of its
    // own, has a list of its own: its cursor counts only that, and is bound to it.
    let personal = catalog.is_personal();
    let mut owner = access.cursor_owner();
    if let (true, true, Some(principal)) = (personal, access.policy_is_open(), &ctx.principal) {
        owner.push_str(&principal.owner());
    }
    let everything = access.sees_everything() && !personal;
    let own = Cursors::bound_to(sealer, owner.as_bytes());
    let page = match ctx.era {
        Era::Session if !everything => catalog.page_visible(
            kind,
            cursor.as_deref(),
            page_size,
            own,
            &[],
            access.item_filter(kind),
        ),
        Era::Session => catalog
            .page(kind, cursor.as_deref(), page_size, sealer)
            .map(|result| (*result).to_owned()),
        Era::Modern => {
            let mut hint = list_hint(hub, &access, kind);
            // A list filtered for one principal must not be shared by a cache with another.
            hint.private |= !access.policy_is_open() || personal;
            let members = own_result_members(Some(hint), &to_raw(&server_info()));
            match everything {
                true => catalog.page_with(kind, cursor.as_deref(), page_size, sealer, &members),
                false => catalog.page_visible(
                    kind,
                    cursor.as_deref(),
                    page_size,
                    own,
                    &members,
                    access.item_filter(kind),
                ),
            }
        }
    };
    match (page, ctx.era) {
        (Some(result), _) => result_response(id, result),
        (None, Era::Session) => invalid_cursor(id),
        (None, Era::Modern) => shape_reply(invalid_cursor(id), None),
    }
}

/// The meta-tools as the request's one page of `tools/list` (they have no second page: a
/// cursor is one this list never gave).
fn meta_tools_page(hub: &Hub, ctx: &RequestCtx, id: RequestId, access: &Access, cursor: bool) -> Message {
    let list = super::meta_tools::list_result;
    match (cursor, ctx.era) {
        (true, Era::Session) => invalid_cursor(id),
        (true, Era::Modern) => shape_reply(invalid_cursor(id), None),
        (false, Era::Session) => result_response(id, list(&[])),
        (false, Era::Modern) => {
            let mut hint = list_hint(hub, access, ListKind::Tools);
            hint.private |= !access.policy_is_open();
            result_response(id, list(&own_result_members(Some(hint), &to_raw(&server_info()))))
        }
    }
}

/// The answer to a list request whose cursor does not open (not sealed by a replica with the
/// cluster key, another list's, another principal's, forged, truncated).
pub fn invalid_cursor(id: RequestId) -> Message {
    RequestError::InvalidCursor.reply(id)
}

/// The cache hint of one merged list: the shortest lifetime and most private scope of its
/// parts. A modern upstream's part is what it said, less the list's age (and a list that
/// outlived it is fetched again in the background); a session-era upstream's part is
/// [`ANNOUNCED_LIST_TTL_MS`] public if it announces changes, else 0. Only the upstreams the
/// request's endpoint serves count.
pub fn list_hint(hub: &Hub, access: &Access, kind: ListKind) -> CacheHint {
    let public_for = |ttl_ms| CacheHint {
        ttl_ms,
        private: false,
    };
    let now = Instant::now();
    hub.upstreams
        .iter()
        .filter(|slot| access.has_server(&slot.id))
        .filter_map(|slot| {
            let facts = slot.facts.load_full()?;
            Some((slot, facts))
        })
        .filter(|(_, facts)| facts.has(kind.capability()))
        .map(|(slot, facts)| {
            if slot.list_freshness.is_stale(kind, now) {
                refetch(&slot, kind);
            }
            match slot.list_freshness.remaining(kind, now) {
                Some(hint) => hint,
                None if facts.announces_changes(kind) => public_for(ANNOUNCED_LIST_TTL_MS),
                None => public_for(0),
            }
        })
        .fold(public_for(ANNOUNCED_LIST_TTL_MS), CacheHint::combine)
}

/// Ask an upstream's supervisor to fetch a list again (on its shared connection).
fn refetch(slot: &UpstreamSlot, kind: ListKind) {
    if let Some(handle) = slot.shared.load_full() {
        let via = (*handle).clone();
        // A full queue already holds a refetch.
        let _ = slot.events.try_send(ConnectionEvent::ListChanged { kind, via });
    }
}
