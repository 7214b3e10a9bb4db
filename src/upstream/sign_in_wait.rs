//! An `oauth` upstream nobody has signed in to yet: instead of failing to connect over and over,
//! its supervisor shows hosts one tool, `{namespace}__authorize` (calling it starts the
//! sign-in), marks it `needs_authorization`, and waits until a grant exists (a sign-in through
//! a host or the gateway's callback, or `mcpmux login` writing the vault from another process).
//! Then the real tools replace it (hosts hear `list_changed`).

use super::host::HostEvent;
use super::pool::{UpstreamSlot, Upstreams};
use crate::catalog::ListKind;
use crate::config::{TransportConfig, UpstreamAuth};
use crate::credentials::LOCAL_PRINCIPAL;
use crate::protocol::RawObject;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The upstream's own name of the tool that signs a person in.
pub const AUTHORIZE_TOOL: &str = "authorize";
/// How often a waiting upstream looks for a grant another process wrote to the vault.
const VAULT_POLL: Duration = Duration::from_secs(2);

/// Whether `slot` is an `oauth` upstream whose (local) principal holds no grant, or one the
/// upstream asked for more scope than it holds; its grant count is brought up to date on the
/// way.
pub(super) async fn needs_sign_in(pool: &Upstreams, slot: &UpstreamSlot) -> bool {
    if !matches!(slot.server.auth, UpstreamAuth::OAuth(_)) {
        return false;
    }
    let credentials = &pool.credentials;
    let has = credentials.has_grant(&slot.server.name, LOCAL_PRINCIPAL).await;
    slot.set_grant_count(u64::from(has));
    !has || credentials.step_up_pending(&slot.server.name, LOCAL_PRINCIPAL)
}

/// Show only the authorize tool and wait until a grant exists (or the slot stops).
pub(super) async fn await_sign_in(pool: &Arc<Upstreams>, slot: &UpstreamSlot) {
    let mut changes = pool.credentials.changes();
    slot.state.needs_authorization();
    slot.awaiting_sign_in.store(true, Ordering::Release);
    let mut changed = Vec::new();
    for kind in ListKind::ALL {
        let items = match kind {
            ListKind::Tools => vec![authorize_tool(slot)],
            _ => Vec::new(),
        };
        if (pool.catalog).replace_while(&slot.id, kind, items, &|| !slot.stop.is_cancelled()) {
            changed.push(kind);
        }
    }
    pool.emit(HostEvent::ListsChanged(&changed));
    let exposed = slot.naming.expose_name(AUTHORIZE_TOOL);
    tracing::warn!(
        upstream = %slot.server.name,
        "needs a sign-in: call the tool {exposed} from a host, or run `mcpmux login {}`",
        slot.server.name
    );
    loop {
        tokio::select! {
            _ = changes.changed() => {}
            _ = tokio::time::sleep(VAULT_POLL) => {}
            _ = slot.stop.cancelled() => return,
        }
        if !needs_sign_in(pool, slot).await {
            tracing::info!(upstream = %slot.server.name, "signed in: connecting");
            return;
        }
    }
}

/// The tool an `oauth` upstream shows before anyone signed in to it.
pub(super) fn authorize_tool(slot: &UpstreamSlot) -> RawObject {
    let url = match &slot.server.transport {
        TransportConfig::Http { url, .. } => url.as_str(),
        TransportConfig::Stdio { .. } => "",
    };
    let name = &slot.server.name;
    let tool = serde_json::json!({
        "name": AUTHORIZE_TOOL,
        "title": format!("Sign in to {name}"),
        "description": format!(
            "Sign in to the MCP server \"{name}\" ({url}) so that its tools become available. \
             Calling this starts the sign-in: open the link it gives (or accept the sign-in \
             request), approve access on the server's sign-in page, and the server's own tools \
             replace this one."
        ),
        "inputSchema": { "type": "object", "properties": {} },
        "annotations": { "readOnlyHint": true, "openWorldHint": true }
    });
    RawObject::parse(&tool.to_string()).unwrap_or_default()
}
