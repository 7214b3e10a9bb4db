//! What the admin page shows, as JSON: the gateway's state (upstreams, sessions, recent
//! errors: upstream failures and failed host requests) and the catalog per server with each item as hosts see it (a tool's schema included).
//! Built from the same sources as `/status`; never a credential, an argument or a whole session id.

use super::status;
use crate::catalog::{Catalog, ListKind};
use crate::core::hub::Hub;
use crate::session::Session;
use crate::status_doc::{SessionStatus, StatusDocument};

use serde::Serialize;
use serde_json::value::RawValue;
use std::time::{SystemTime, UNIX_EPOCH};

/// How many recent errors the page lists, newest first.
pub const RECENT_ERRORS: usize = 50;

/// The page's view of the gateway, sent whenever it changes.
#[derive(Serialize)]
pub struct Overview {
    #[serde(flatten)]
    pub status: StatusDocument,
    /// The sessions with who opened them (the status document's `session_list` without it).
    pub session_rows: Vec<SessionRow>,
    pub recent_errors: Vec<RecentError>,
    /// The catalog's epoch: the page asks for the catalog again when it moves.
    pub catalog_epoch: u64,
    /// Sign-ins to `oauth` upstreams waiting for a person, with their links.
    pub signing_in: Vec<super::grants::SigningIn>,
    /// Tools whose definition changed since it was pinned (`[pinning]`), with their diffs.
    pub pin_drifts: Vec<super::pins::DriftLine>,
}

#[derive(Serialize)]
pub struct SessionRow {
    #[serde(flatten)]
    pub status: SessionStatus,
    /// `session` or `stateless`.
    pub era: &'static str,
    /// The digest logs and audit records name the session by (its access lines' `session`).
    pub log_id: String,
    /// The principal that opened it: `name` (an API key) or `name @ issuer` (a token).
    pub principal: Option<String>,
}

#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct RecentError {
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// What failed: the upstream's name (`mcpmux` for a request that reached none).
    pub source: String,
    pub message: String,
}

/// The catalog per server, in configuration order.
#[derive(Serialize)]
pub struct CatalogView<'a> {
    pub epoch: u64,
    pub servers: Vec<ServerItems<'a>>,
}

#[derive(Serialize)]
pub struct ServerItems<'a> {
    pub name: String,
    pub tools: Vec<&'a RawValue>,
    pub prompts: Vec<&'a RawValue>,
    pub resources: Vec<&'a RawValue>,
    pub resource_templates: Vec<&'a RawValue>,
}

/// The overview now.
pub fn overview(hub: &Hub) -> Overview {
    let mut status = status::report(hub);
    // The rows below carry the same entries with more in them.
    status.session_list = Vec::new();
    let mut sessions = hub.sessions.all();
    sessions.sort_by_key(|s| std::cmp::Reverse(s.age()));
    let session_rows = (sessions.iter())
        .map(|session| SessionRow {
            status: status::session_entry(session),
            era: if session.is_modern() {
                "stateless"
            } else {
                "session"
            },
            principal: principal_label(session),
            log_id: session.log_id().to_string(),
        })
        .collect();
    Overview {
        status,
        session_rows,
        recent_errors: recent_errors(hub),
        catalog_epoch: hub.catalog.snapshot().epoch,
        signing_in: super::grants::signing_in(hub),
        pin_drifts: super::pins::report(hub).drifts,
    }
}

/// Who opened `session`, for people (its owner key without the separators).
fn principal_label(session: &Session) -> Option<String> {
    let owner = session.owner()?;
    let mut parts = owner.split('\u{0}');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("jwt"), Some(issuer), Some(name)) => Some(format!("{name} @ {issuer}")),
        (Some("key"), Some(name), None) => Some(name.to_string()),
        _ => None,
    }
}

/// Every upstream's latest failures and the latest failed host requests, newest first, at most
/// [`RECENT_ERRORS`].
fn recent_errors(hub: &Hub) -> Vec<RecentError> {
    let upstreams = (hub.upstreams.iter()).flat_map(|slot| {
        let source = slot.server.name.clone();
        (slot.state.failure_history().into_iter()).map(move |(at, message)| RecentError {
            at_ms: unix_ms(at),
            source: source.clone(),
            message,
        })
    });
    let requests = hub.recent_errors.all().into_iter().map(|failed| {
        let what = match &failed.name {
            Some(name) => format!("{} {name}", failed.method),
            None => failed.method.to_string(),
        };
        RecentError {
            at_ms: unix_ms(failed.at),
            source: failed.upstream.unwrap_or_else(|| "mcpmux".into()),
            message: format!("{what} failed: {}", describe(&failed.error)),
        }
    });
    let mut errors: Vec<RecentError> = upstreams.chain(requests).collect();
    errors.sort_by_key(|e| std::cmp::Reverse(e.at_ms));
    errors.truncate(RECENT_ERRORS);
    errors
}

/// An `error.type` in words.
fn describe(error: &str) -> String {
    match error {
        "tool_error" => "the tool reported an error (isError)".into(),
        "timeout" => "timed out".into(),
        code => match code.parse::<i64>().ok().and_then(crate::protocol::codes::name) {
            Some(name) => format!("JSON-RPC error {code} ({name})"),
            None => format!("JSON-RPC error {code}"),
        },
    }
}

fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The catalog of `catalog` per server of `hub`, each item as hosts see it.
pub fn catalog<'a>(hub: &Hub, catalog: &'a Catalog) -> CatalogView<'a> {
    let items = |upstream: &crate::config::UpstreamId, kind: ListKind| -> Vec<&'a RawValue> {
        (catalog.list(kind).items.iter())
            .filter(|item| item.upstream == *upstream)
            .map(|item| &*item.json)
            .collect()
    };
    let servers = (hub.upstreams.iter())
        .map(|slot| ServerItems {
            name: slot.server.name.clone(),
            tools: items(&slot.id, ListKind::Tools),
            prompts: items(&slot.id, ListKind::Prompts),
            resources: items(&slot.id, ListKind::Resources),
            resource_templates: items(&slot.id, ListKind::Templates),
        })
        .collect();
    CatalogView {
        epoch: catalog.epoch,
        servers,
    }
}
