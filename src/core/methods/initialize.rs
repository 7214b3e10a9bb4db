//! `initialize` (session era): the negotiated version, the capabilities mcpmux can honour given
//! its upstreams, and their instructions; the same capabilities and instructions serve
//! `server/discover`. It waits a few seconds at most for upstreams still starting
//! ([`crate::upstream::pool::STARTUP_WAIT`]): it answers with what is ready, and the rest is
//! announced with `list_changed` when it comes.

use crate::config::Profile;
use crate::core::hub::Hub;
use crate::protocol::message::to_raw;
use crate::protocol::{version, ClientCaps, RawObject};
use crate::session::{Session, SessionState};
use std::sync::Arc;

/// mcpmux's `serverInfo`.
pub fn server_info() -> serde_json::Value {
    serde_json::json!({ "name": "mcpmux", "version": env!("CARGO_PKG_VERSION") })
}

/// Open a session for an `initialize` request (to the endpoint of `profile`, or the main one),
/// its id made by `session_id` from its state; returns it with the result to send.
pub async fn initialize(
    hub: &Arc<Hub>,
    params: Option<&RawObject>,
    profile: Option<&Profile>,
    session_id: impl FnOnce(&SessionState) -> String,
) -> (Arc<Session>, Box<serde_json::value::RawValue>) {
    hub.wait_startup().await;
    let requested = params
        .and_then(|p| p.get_str("protocolVersion"))
        .unwrap_or_default();
    let negotiated = version::negotiate(&requested);
    let caps = ClientCaps::from_capabilities(params.and_then(|p| p.get_object("capabilities")).as_ref());
    let client_info = params
        .and_then(|p| p.get("clientInfo"))
        .and_then(|info| serde_json::from_str(info.get()).ok());
    let state = (SessionState::new(negotiated, caps).with_client_info(client_info))
        .in_profile(profile.map(|p| p.name.as_str()));
    let session = hub.open_session(session_id(&state), state);
    let mut result = serde_json::json!({
        "protocolVersion": negotiated,
        "capabilities": merged_capabilities(hub, profile),
        "serverInfo": server_info(),
    });
    if let Some(text) = combined_instructions(hub, profile) {
        result["instructions"] = text.into();
    }
    (session, to_raw(&result))
}

/// The capabilities mcpmux can honour given what its upstreams offer. An upstream that never
/// answered yet may bring prompts and resources: their lists are advertised (empty until it
/// comes, then announced with `list_changed`), so a host that reads capabilities once still
/// hears of them. On a profile's endpoint only the profile's servers count.
pub fn merged_capabilities(hub: &Hub, profile: Option<&Profile>) -> serde_json::Value {
    let served = || (hub.upstreams.iter()).filter(|s| profile.is_none_or(|p| p.has_server(&s.id)));
    let facts: Vec<_> = served().filter_map(|s| s.facts.load_full()).collect();
    let pending = served().any(|s| s.facts.load().is_none());
    let any = |cap: &str| facts.iter().any(|f| f.has(cap));
    let mut caps = serde_json::json!({ "tools": { "listChanged": true } });
    if pending || any("prompts") {
        caps["prompts"] = serde_json::json!({ "listChanged": true });
    }
    if pending || any("resources") {
        let subscribe = facts.iter().any(|f| {
            f.capabilities
                .pointer("/resources/subscribe")
                .and_then(|v| v.as_bool())
                == Some(true)
        });
        caps["resources"] = serde_json::json!({ "listChanged": true, "subscribe": subscribe });
    }
    if any("logging") {
        caps["logging"] = serde_json::json!({});
    }
    if any("completions") {
        caps["completions"] = serde_json::json!({});
    }
    caps
}

/// The instructions of the upstreams (of `profile`'s servers on its endpoint), each under its
/// server's name.
pub fn combined_instructions(hub: &Hub, profile: Option<&Profile>) -> Option<String> {
    let parts: Vec<String> = (hub.upstreams.iter())
        .filter(|s| profile.is_none_or(|p| p.has_server(&s.id)))
        .filter_map(|slot| {
            let facts = slot.facts.load_full()?;
            let text = facts.instructions.as_deref()?.trim();
            (!text.is_empty()).then(|| format!("## {}\n{}", slot.server.name, text))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}
