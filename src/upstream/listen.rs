//! A modern upstream's change notifications: with no GET stream in 2026-07-28, mcpmux keeps one
//! `subscriptions/listen` request open per connection for the lists the server offers and the
//! resources hosts watch, and opens it again (with backoff) whenever it ends while the
//! connection lives.

use super::{CallFailure, ServerFacts, Status, UpstreamHandle};
use crate::catalog::ListKind;
use crate::error::codes;
use crate::protocol::message::to_raw;
use crate::protocol::RawObject;
use crate::util::Backoff;
use serde_json::value::RawValue;
use std::collections::BTreeSet;
use std::time::Duration;

/// The longest one listen request is left open before mcpmux renews it.
const LISTEN_RENEW_AFTER: Duration = Duration::from_secs(24 * 3600);
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A listen that lasted this long was healthy: the next failure starts the backoff over.
const HEALTHY_FOR: Duration = Duration::from_secs(60);

/// The listen filter for what a server offers.
fn wanted(facts: &ServerFacts) -> serde_json::Map<String, serde_json::Value> {
    let mut flags = serde_json::Map::new();
    for (kind, flag) in [
        (ListKind::Tools, "toolsListChanged"),
        (ListKind::Prompts, "promptsListChanged"),
        (ListKind::Resources, "resourcesListChanged"),
    ] {
        if facts.has(kind.capability()) {
            flags.insert(flag.into(), true.into());
        }
    }
    flags
}

fn error_code(error: &serde_json::value::RawValue) -> Option<i64> {
    let obj = RawObject::parse(error.get()).ok()?;
    serde_json::from_str(obj.get("code")?.get()).ok()
}

/// The listen request's params: the lists wanted and the watched resources.
fn listen_params(
    flags: &serde_json::Map<String, serde_json::Value>,
    uris: &BTreeSet<String>,
) -> Box<RawValue> {
    let mut filter = flags.clone();
    if !uris.is_empty() {
        filter.insert(
            "resourceSubscriptions".into(),
            uris.iter().map(String::as_str).collect::<Vec<_>>().into(),
        );
    }
    to_raw(&serde_json::json!({ "notifications": filter }))
}

/// Keep a listen request open on `handle` for as long as the connection is up; it reopens
/// at once when the set of watched resources changes.
pub fn keep_listening(handle: UpstreamHandle, facts: &ServerFacts) {
    let flags = wanted(facts);
    let mut watched = handle.watched_resources();
    tokio::spawn(async move {
        let mut backoff = Backoff::new(FIRST_BACKOFF, MAX_BACKOFF);
        loop {
            let uris = watched.borrow_and_update().clone();
            if flags.is_empty() && uris.is_empty() {
                tokio::select! {
                    changed = watched.changed() => match changed {
                        Ok(()) => continue,
                        Err(_) => return,
                    },
                    _ = handle.closed() => return,
                }
            }
            let started = tokio::time::Instant::now();
            let params = listen_params(&flags, &uris);
            // Dropping the request when the filter changes cancels it upstream.
            let outcome = tokio::select! {
                outcome = handle.request("subscriptions/listen", Some(params), LISTEN_RENEW_AFTER) => outcome,
                _ = watched.changed() => continue,
            };
            if matches!(handle.status(), Status::Down(_)) {
                return;
            }
            match outcome {
                Ok(_) => tracing::debug!(upstream = %handle.name(), "upstream ended its listen stream"),
                Err(CallFailure::Rpc(error)) if error_code(&error) == Some(codes::METHOD_NOT_FOUND) => {
                    tracing::info!(upstream = %handle.name(), "upstream does not serve subscriptions/listen; its changes will not be seen");
                    return;
                }
                Err(err) => tracing::debug!(upstream = %handle.name(), %err, "upstream listen stream failed"),
            }
            if started.elapsed() >= HEALTHY_FOR {
                backoff.reset();
            }
            tokio::select! {
                _ = tokio::time::sleep(backoff.next_delay()) => {}
                _ = handle.closed() => return,
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listens_for_the_lists_offered() {
        let facts = ServerFacts {
            protocol_version: "2026-07-28".into(),
            capabilities: serde_json::json!({"tools":{"listChanged":true},"resources":{}}),
            instructions: None,
            server_info: serde_json::Value::Null,
        };
        let flags = wanted(&facts);
        assert_eq!(
            serde_json::Value::from(flags.clone()),
            serde_json::json!({"toolsListChanged":true,"resourcesListChanged":true})
        );
        let uris = BTreeSet::from(["file:///b".to_string(), "file:///a".to_string()]);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(listen_params(&flags, &uris).get()).ok(),
            Some(serde_json::json!({"notifications": {
                "toolsListChanged": true,
                "resourcesListChanged": true,
                "resourceSubscriptions": ["file:///a", "file:///b"]
            }}))
        );
    }
}
