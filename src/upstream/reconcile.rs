//! A reload's `[servers]` put in force by diff: servers added start (slot, supervisor, catalog
//! entry), removed ones stop, changed ones (their `ServerConfig` differs) restart, those whose
//! only change is their shaping (`tools`, `prompts`, `resources`, `rename`, `descriptions`) are
//! reshaped in the catalog without a restart, and the others keep their slot, connections and
//! calls in flight untouched.

use super::pool::{SupervisorInputs, UpstreamSlot, Upstreams};
use crate::config::{IdMap, ServerConfig, UpstreamId};
use std::sync::Arc;

/// How the servers of a new configuration differ from those running, by id, in the order of
/// the new configuration (removed ones in the old order).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ServerDiff {
    pub added: Vec<UpstreamId>,
    pub removed: Vec<UpstreamId>,
    pub changed: Vec<UpstreamId>,
    /// Only their shaping changed: the catalog applies the new one, the server runs on.
    pub reshaped: Vec<UpstreamId>,
    pub unchanged: Vec<UpstreamId>,
}

impl ServerDiff {
    /// Compare the running servers with the new ones (only enabled servers are in either: one
    /// turned off with `enabled = false` counts as removed).
    pub fn between<'a>(
        running: impl IntoIterator<Item = &'a ServerConfig>,
        new: &[ServerConfig],
    ) -> ServerDiff {
        let running: Vec<&ServerConfig> = running.into_iter().collect();
        let by_id: IdMap<&ServerConfig> = running.iter().map(|s| (s.id.clone(), *s)).collect();
        let mut diff = ServerDiff::default();
        for server in new {
            let list = match by_id.get(&server.id) {
                None => &mut diff.added,
                Some(old) if *old == server => &mut diff.unchanged,
                Some(old) if only_shaping_differs(old, server) => &mut diff.reshaped,
                Some(_) => &mut diff.changed,
            };
            list.push(server.id.clone());
        }
        let kept: IdMap<()> = new.iter().map(|s| (s.id.clone(), ())).collect();
        (diff.removed).extend(
            running
                .iter()
                .filter(|s| !kept.contains_key(&s.id))
                .map(|s| s.id.clone()),
        );
        diff
    }

    /// Whether the servers are the same.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.changed.is_empty()
            && self.reshaped.is_empty()
    }

    /// Whether the server `id` keeps running as it is (unchanged, or only reshaped).
    fn keeps(&self, id: &UpstreamId) -> bool {
        self.unchanged.contains(id) || self.reshaped.contains(id)
    }
}

/// Whether `old` and `new` differ in their shaping and in nothing else.
fn only_shaping_differs(old: &ServerConfig, new: &ServerConfig) -> bool {
    let reshaped = ServerConfig {
        shaping: new.shaping.clone(),
        ..old.clone()
    };
    old.shaping != new.shaping && reshaped == *new
}

/// What a reload told the calls in flight on a removed server.
pub fn removed_reason(name: &str) -> String {
    format!("server {name:?} was removed from the configuration (reload)")
}

/// What a reload told the calls in flight on a server whose configuration changed.
pub fn changed_reason(name: &str) -> String {
    format!("server {name:?} is restarting: its configuration changed (reload)")
}

impl Upstreams {
    /// Put `servers` in force by diff (see the module doc) against `in_force`, the servers of the
    /// configuration in force (a reshaped slot keeps the shaping it started with; the
    /// configuration and the catalog hold the one in force). The slots started for added and
    /// changed servers are returned with the diff (their `first_start` fires once their lists
    /// are loaded, or their first attempt failed). Config order still decides name clashes.
    pub fn reconcile(
        self: &Arc<Self>,
        in_force: &[ServerConfig],
        servers: &[ServerConfig],
    ) -> (ServerDiff, Vec<Arc<UpstreamSlot>>) {
        let diff = ServerDiff::between(in_force, servers);
        if diff.is_empty() {
            return (diff, Vec::new());
        }
        let running: Vec<Arc<UpstreamSlot>> = self.iter().collect();
        let by_id: IdMap<&Arc<UpstreamSlot>> = running.iter().map(|s| (s.id.clone(), s)).collect();
        let separator = self.separator().to_string();
        let mut slots = Vec::with_capacity(servers.len());
        let mut namings = Vec::with_capacity(servers.len());
        let mut inputs = SupervisorInputs { events: Vec::new() };
        for server in servers {
            match by_id.get(&server.id) {
                Some(slot) if diff.keeps(&server.id) => {
                    let mut naming = slot.naming.clone();
                    naming.shaping = server.shaping.clone();
                    namings.push((slot.id.clone(), naming));
                    slots.push((*slot).clone());
                }
                _ => {
                    let (slot, events) = self.new_slot(server, &separator);
                    namings.push((slot.id.clone(), slot.naming.clone()));
                    slots.push(slot.clone());
                    inputs.events.push((slot, events));
                }
            }
        }
        // Retired first, then replaced: a call that still finds an old slot is refused with the
        // reason, and a per-session connection it opens meanwhile is stopped.
        for slot in &running {
            let reason = if diff.keeps(&slot.id) {
                continue;
            } else if diff.changed.contains(&slot.id) {
                changed_reason(&slot.server.name)
            } else {
                removed_reason(&slot.server.name)
            };
            tracing::info!(upstream = %slot.server.name, %reason, "stopping an upstream");
            slot.retire(&self.ties, &reason);
        }
        let started: Vec<Arc<UpstreamSlot>> = inputs.events.iter().map(|(s, _)| s.clone()).collect();
        self.replace_slots(slots);
        self.catalog.set_upstreams(namings);
        self.supervise(inputs);
        (diff, started)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn servers(text: &str) -> Vec<ServerConfig> {
        Config::from_toml_str(text, "t.toml", &|_| None).unwrap().servers
    }

    fn ids(names: &[&str]) -> Vec<UpstreamId> {
        names.iter().map(|n| UpstreamId::new(n)).collect()
    }

    #[test]
    fn the_diff_names_added_removed_changed_and_unchanged_servers_by_id() {
        let old = servers(
            "[servers.keep]\ncommand = \"k\"\n[servers.gone]\ncommand = \"g\"\n\
             [servers.edit]\ncommand = \"e\"\n[servers.off]\ncommand = \"o\"\n",
        );
        let new = servers(
            "[servers.fresh]\ncommand = \"f\"\n[servers.edit]\ncommand = \"e\"\nargs = [\"-v\"]\n\
             [servers.keep]\ncommand = \"k\"\n[servers.off]\ncommand = \"o\"\nenabled = false\n",
        );
        let diff = ServerDiff::between(&old, &new);
        assert_eq!(
            diff,
            ServerDiff {
                added: ids(&["fresh"]),
                removed: ids(&["gone", "off"]),
                changed: ids(&["edit"]),
                reshaped: Vec::new(),
                unchanged: ids(&["keep"]),
            }
        );
        assert!(!diff.is_empty());
        // Moving a server in the file is no change to it; the same file is no change at all.
        let moved = servers(
            "[servers.edit]\ncommand = \"e\"\n[servers.keep]\ncommand = \"k\"\n\
             [servers.off]\ncommand = \"o\"\n[servers.gone]\ncommand = \"g\"\n",
        );
        assert!(ServerDiff::between(&old, &moved).is_empty());
        // Any other key of a server's table counts: a timeout, the namespace, an argument.
        for edit in ["request_timeout_secs = 5\n", "namespace = \"other\"\n"] {
            let new = servers(&format!("[servers.keep]\ncommand = \"k\"\n{edit}"));
            assert_eq!(
                ServerDiff::between(&old[..1], &new).changed,
                ids(&["keep"]),
                "{edit}"
            );
        }
        // The shaping alone is applied without a restart; with another change, it restarts.
        for shaping in [
            "tools = { exclude = [\"x\"] }\n",
            "rename = { echo = \"say\" }\n",
            "descriptions = { echo = \"Says.\" }\n",
            "resources = { include = [\"a://*\"] }\n",
        ] {
            let new = servers(&format!("[servers.keep]\ncommand = \"k\"\n{shaping}"));
            let diff = ServerDiff::between(&old[..1], &new);
            assert_eq!(
                (diff.reshaped.clone(), diff.changed.clone()),
                (ids(&["keep"]), vec![]),
                "{shaping}"
            );
            assert!(!diff.is_empty());
            let both = servers(&format!(
                "[servers.keep]\ncommand = \"k\"\nargs = [\"x\"]\n{shaping}"
            ));
            assert_eq!(ServerDiff::between(&old[..1], &both).changed, ids(&["keep"]));
        }
    }
}
