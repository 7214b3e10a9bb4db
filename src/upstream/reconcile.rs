//! A reload's `[servers]` put in force by diff: servers added start (slot, supervisor, catalog
//! entry), removed ones stop, changed ones restart (a field that needs a new process or
//! connection differs: `FieldChanges`), those whose only changes are their shaping (`tools`,
//! `prompts`, `resources`, `rename`, `descriptions`) or their live settings (timeouts, limits,
//! health checks: `Tunables`) are reshaped in the catalog and retuned in their slot without a
//! restart, and the others keep their slot, connections and calls in flight untouched.

use super::pool::{SupervisorInputs, UpstreamSlot, Upstreams};
use super::tunables::{FieldChanges, Tunables};
use crate::config::{IdMap, ServerConfig, UpstreamId};
use std::sync::Arc;

/// How the servers of a new configuration differ from those running, by id, in the order of
/// the new configuration (removed ones in the old order).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ServerDiff {
    pub added: Vec<UpstreamId>,
    pub removed: Vec<UpstreamId>,
    pub changed: Vec<UpstreamId>,
    /// Their shaping changed (and nothing that needs a restart): the catalog applies the new
    /// one, the server runs on.
    pub reshaped: Vec<UpstreamId>,
    /// Their live settings changed (and nothing that needs a restart): the next call, check or
    /// connect reads the new ones, the server runs on (a server may be reshaped too).
    pub retuned: Vec<UpstreamId>,
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
            let id = server.id.clone();
            match by_id.get(&server.id) {
                None => diff.added.push(id),
                Some(old) if *old == server => diff.unchanged.push(id),
                Some(old) => {
                    let changes = FieldChanges::between(old, server);
                    if changes.needs_restart() {
                        diff.changed.push(id);
                        continue;
                    }
                    if !changes.catalog.is_empty() {
                        diff.reshaped.push(id.clone());
                    }
                    if !changes.live.is_empty() {
                        diff.retuned.push(id);
                    }
                }
            }
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
            && self.retuned.is_empty()
    }

    /// Whether the server `id` keeps running (unchanged, reshaped or retuned).
    fn keeps(&self, id: &UpstreamId) -> bool {
        self.unchanged.contains(id) || self.reshaped.contains(id) || self.retuned.contains(id)
    }

    /// Whether nothing but live settings changed (the slots and the catalog stay as they are).
    fn only_retuned(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.changed.is_empty()
            && self.reshaped.is_empty()
    }
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
    /// `authenticated`: whether the new configuration has `[auth]` (a server whose connections
    /// become, or stop being, per principal with it restarts).
    pub fn reconcile(
        self: &Arc<Self>,
        in_force: &[ServerConfig],
        (servers, authenticated): (&[ServerConfig], bool),
    ) -> (ServerDiff, Vec<Arc<UpstreamSlot>>) {
        let mut diff = ServerDiff::between(in_force, servers);
        for slot in self.iter() {
            let flips = (servers.iter().find(|s| s.id == slot.id))
                .is_some_and(|s| super::pool::per_principal(s, authenticated) != slot.personal.is_some());
            if flips && diff.keeps(&slot.id) {
                for kept in [&mut diff.unchanged, &mut diff.reshaped, &mut diff.retuned] {
                    kept.retain(|id| *id != slot.id);
                }
                diff.changed.push(slot.id.clone());
            }
        }
        let running: Vec<Arc<UpstreamSlot>> = self.iter().collect();
        // Retuned first: the next call on a kept server reads its new settings.
        for server in servers.iter().filter(|s| diff.retuned.contains(&s.id)) {
            if let Some(slot) = running.iter().find(|slot| slot.id == server.id) {
                tracing::info!(upstream = %server.name, "live settings changed; the server runs on");
                slot.tunables.store(Arc::new(Tunables::of(server)));
            }
        }
        if diff.only_retuned() {
            return (diff, Vec::new());
        }
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
                    let (slot, events) = self.new_slot(server, (&separator, authenticated));
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
            // Its principals' own lists came from connections that stop now.
            for principal in self.catalog.drop_personal_upstream(&slot.id) {
                self.emit(super::host::HostEvent::Personal {
                    principal: &principal,
                    event: &super::host::HostEvent::ListsChanged(&crate::catalog::ListKind::ALL),
                });
            }
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
                retuned: Vec::new(),
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
        // A key that needs a new process or connection restarts it: the namespace, the era.
        for edit in ["namespace = \"other\"\n", "era = \"session\"\n"] {
            let new = servers(&format!("[servers.keep]\ncommand = \"k\"\n{edit}"));
            assert_eq!(
                ServerDiff::between(&old[..1], &new).changed,
                ids(&["keep"]),
                "{edit}"
            );
        }
        // A live setting is retuned, the server runs on; with shaping too, it is both.
        for edit in ["request_timeout_secs = 5\n", "max_in_flight = 1\n"] {
            let new = servers(&format!("[servers.keep]\ncommand = \"k\"\n{edit}"));
            let diff = ServerDiff::between(&old[..1], &new);
            assert_eq!(
                (diff.retuned.clone(), diff.changed.clone(), diff.reshaped.clone()),
                (ids(&["keep"]), vec![], vec![]),
                "{edit}"
            );
            assert!(!diff.is_empty() && diff.only_retuned());
            let shaped = servers(&format!(
                "[servers.keep]\ncommand = \"k\"\n{edit}tools = {{ exclude = [\"x\"] }}\n"
            ));
            let diff = ServerDiff::between(&old[..1], &shaped);
            assert_eq!((diff.retuned, diff.reshaped), (ids(&["keep"]), ids(&["keep"])));
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

#[cfg(test)]
mod auth_flip_tests {
    use super::*;
    use crate::config::Config;
    use crate::credentials::Credentials;

    #[tokio::test]
    async fn turning_auth_on_restarts_an_oauth_server_with_connections_per_principal() {
        let text = "[servers.up]\nurl = \"https://mcp.example.com/mcp\"\nauth = { mode = \"oauth\" }\n";
        let config = Config::from_toml_str(text, "t.toml", &|_| None).unwrap();
        let (pool, _inputs) = Upstreams::new(
            &config,
            Arc::new(super::super::host::NoHosts),
            Arc::new(super::super::ties::HostTies::new()),
            tokio_util::sync::CancellationToken::new(),
            Credentials::new(&config, None),
        );
        let before = pool.get(&UpstreamId::new("up")).unwrap();
        assert!(before.personal.is_none(), "one local user: one shared connection");
        let (diff, started) = pool.reconcile(&config.servers, (&config.servers, true));
        assert_eq!(diff.changed, vec![UpstreamId::new("up")]);
        assert!(before.stop.is_cancelled(), "the shared one stops");
        assert!(started.len() == 1 && started[0].personal.is_some());
        // The same servers with the same [auth]: nothing restarts.
        let (diff, started) = pool.reconcile(&config.servers, (&config.servers, true));
        assert!(diff.changed.is_empty() && started.is_empty());
        pool.shutdown.cancel();
    }
}
