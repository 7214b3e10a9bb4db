//! A server's settings that a reload changes without a restart ([`Tunables`], kept in its slot
//! behind an atomic swap shared with its connections, read per request, per check or per
//! connect, never captured at start), and how each `ServerConfig` field is put in force
//! ([`FieldChanges::between`]: restart, live, or catalog only).

use crate::config::{GatewayConfig, ServerConfig};
use arc_swap::ArcSwap;
use std::sync::Arc;
use std::time::Duration;

/// The settings of a server that change live: a call reads them when it starts (a call already
/// in flight keeps the timeout it started with), a health check when it runs, a connection
/// when it opens (`handshake_timeout`, `max_line_bytes`: the next connect).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tunables {
    /// `request_timeout_secs` (the gateway's when unset): the next call.
    pub request_timeout: Option<Duration>,
    /// `timeout_resets_on_progress`: the next call.
    pub timeout_resets_on_progress: bool,
    /// `max_in_flight`: the next call is refused as overloaded beyond it.
    pub max_in_flight: usize,
    /// `health_check_interval_secs`: from the next check on (a check disabled by `0` stops).
    pub health_check_interval: Option<Duration>,
    /// `health_check_timeout_secs`: the next check.
    pub health_check_timeout: Duration,
    /// `handshake_timeout_secs`: the next connect (start, restart, reconnect).
    pub handshake_timeout: Duration,
    /// `max_line_bytes`: the next connect (a transport's reader is sized when it opens).
    pub max_line_bytes: usize,
}

impl Tunables {
    /// The live settings of `server`.
    pub fn of(server: &ServerConfig) -> Tunables {
        Tunables {
            request_timeout: server.request_timeout,
            timeout_resets_on_progress: server.timeout_resets_on_progress,
            max_in_flight: server.max_in_flight,
            health_check_interval: server.health_check_interval,
            health_check_timeout: server.health_check_timeout,
            handshake_timeout: server.handshake_timeout,
            max_line_bytes: server.max_line_bytes,
        }
    }

    /// The per-request timeout: the server's own, else the gateway's, never above the
    /// gateway's hard maximum.
    pub fn effective_request_timeout(&self, gateway: &GatewayConfig) -> Duration {
        (self.request_timeout)
            .unwrap_or(gateway.request_timeout)
            .min(gateway.max_request_timeout)
    }
}

/// The live settings of one server, shared by its slot and every connection to it; a reload
/// stores the new ones.
pub type LiveTunables = Arc<ArcSwap<Tunables>>;

/// The live settings of `server`, ready to share.
pub fn live(server: &ServerConfig) -> LiveTunables {
    Arc::new(ArcSwap::from_pointee(Tunables::of(server)))
}

/// How a change of one `ServerConfig` field is put in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// A new process or connection: the server restarts (its calls in flight end).
    Restart,
    /// Read per request, check or connect from the slot's [`Tunables`]: no restart.
    Live,
    /// Only what hosts see changes (the catalog reshapes it): no restart.
    Catalog,
}

/// The fields that differ between two configurations of one server, by [`Effect`] (TOML key
/// names; `transport` stands for `command`, `args`, `env`, `cwd`, `inherit_env`, `url`,
/// `headers` and `transport`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FieldChanges {
    pub restart: Vec<&'static str>,
    pub live: Vec<&'static str>,
    pub catalog: Vec<&'static str>,
}

impl FieldChanges {
    /// What differs between `old` and `new`. Every field is named here (the destructuring has
    /// no `..`): a field added to `ServerConfig` does not compile until it is given an effect.
    pub fn between(old: &ServerConfig, new: &ServerConfig) -> FieldChanges {
        let ServerConfig {
            name,
            id,
            namespace,
            isolation,
            era,
            request_timeout,
            timeout_resets_on_progress,
            max_in_flight,
            health_check_interval,
            health_check_timeout,
            handshake_timeout,
            max_line_bytes,
            transport,
            auth,
            shaping,
        } = old;
        let mut changes = FieldChanges::default();
        let mut note = |key: &'static str, effect: Effect, differs: bool| {
            if differs {
                match effect {
                    Effect::Restart => changes.restart.push(key),
                    Effect::Live => changes.live.push(key),
                    Effect::Catalog => changes.catalog.push(key),
                }
            }
        };
        // Identity: a server's id is its name, so these never differ for the same server.
        note("name", Effect::Restart, *name != new.name);
        note("id", Effect::Restart, *id != new.id);
        // Every exposed name changes: the server is listed afresh under the new prefix.
        note("namespace", Effect::Restart, *namespace != new.namespace);
        // Shared or per-session connections: a different set of connections.
        note("isolation", Effect::Restart, *isolation != new.isolation);
        // How the connection is opened.
        note("era", Effect::Restart, *era != new.era);
        note("transport", Effect::Restart, *transport != new.transport);
        // Another identity at the upstream: its connections and grants are another's.
        note("auth", Effect::Restart, *auth != new.auth);
        note(
            "request_timeout_secs",
            Effect::Live,
            *request_timeout != new.request_timeout,
        );
        note(
            "timeout_resets_on_progress",
            Effect::Live,
            *timeout_resets_on_progress != new.timeout_resets_on_progress,
        );
        note("max_in_flight", Effect::Live, *max_in_flight != new.max_in_flight);
        note(
            "health_check_interval_secs",
            Effect::Live,
            *health_check_interval != new.health_check_interval,
        );
        note(
            "health_check_timeout_secs",
            Effect::Live,
            *health_check_timeout != new.health_check_timeout,
        );
        note(
            "handshake_timeout_secs",
            Effect::Live,
            *handshake_timeout != new.handshake_timeout,
        );
        note(
            "max_line_bytes",
            Effect::Live,
            *max_line_bytes != new.max_line_bytes,
        );
        note("shaping", Effect::Catalog, *shaping != new.shaping);
        changes
    }

    /// Whether the server must restart for the new configuration.
    pub fn needs_restart(&self) -> bool {
        !self.restart.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn server(extra: &str) -> ServerConfig {
        let text = format!("[gateway]\nmax_request_timeout_secs = 600\n[servers.s]\n{extra}");
        let config = Config::from_toml_str(&text, "t.toml", &|_| None).unwrap();
        config.servers[0].clone()
    }

    /// Every key of a server's table, its edit, and the effect it has: one row per
    /// `ServerConfig` field (the exhaustive destructuring in `between` keeps the two in step).
    #[test]
    fn every_server_field_has_an_effect() {
        use Effect::*;
        let stdio = "command = \"a\"\n";
        let http = "url = \"http://127.0.0.1:1/mcp\"\n";
        let rows: &[(&str, &str, &str, &str, Effect)] = &[
            (stdio, "command = \"b\"\n", "transport", "command", Restart),
            (
                stdio,
                "command = \"a\"\nargs = [\"-v\"]\n",
                "transport",
                "args",
                Restart,
            ),
            (
                stdio,
                "command = \"a\"\nenv = { A = \"1\" }\n",
                "transport",
                "env",
                Restart,
            ),
            (
                stdio,
                "command = \"a\"\ncwd = \"/tmp\"\n",
                "transport",
                "cwd",
                Restart,
            ),
            (
                stdio,
                "command = \"a\"\ninherit_env = true\n",
                "transport",
                "inherit_env",
                Restart,
            ),
            (
                http,
                "url = \"http://127.0.0.1:2/mcp\"\n",
                "transport",
                "url",
                Restart,
            ),
            (
                http,
                "url = \"http://127.0.0.1:1/mcp\"\nheaders = { A = \"1\" }\n",
                "transport",
                "headers",
                Restart,
            ),
            (
                http,
                "url = \"http://127.0.0.1:1/mcp\"\ntransport = \"sse\"\n",
                "transport",
                "transport",
                Restart,
            ),
            (
                stdio,
                "command = \"a\"\nnamespace = \"t\"\n",
                "namespace",
                "namespace",
                Restart,
            ),
            (
                stdio,
                "command = \"a\"\nisolation = \"per-session\"\n",
                "isolation",
                "isolation",
                Restart,
            ),
            (
                stdio,
                "command = \"a\"\nera = \"session\"\n",
                "era",
                "era",
                Restart,
            ),
            (
                stdio,
                "command = \"a\"\nrequest_timeout_secs = 3\n",
                "request_timeout_secs",
                "",
                Live,
            ),
            (
                stdio,
                "command = \"a\"\ntimeout_resets_on_progress = true\n",
                "timeout_resets_on_progress",
                "",
                Live,
            ),
            (
                stdio,
                "command = \"a\"\nmax_in_flight = 2\n",
                "max_in_flight",
                "",
                Live,
            ),
            (
                stdio,
                "command = \"a\"\nhealth_check_interval_secs = 0\n",
                "health_check_interval_secs",
                "",
                Live,
            ),
            (
                stdio,
                "command = \"a\"\nhealth_check_timeout_secs = 1\n",
                "health_check_timeout_secs",
                "",
                Live,
            ),
            (
                stdio,
                "command = \"a\"\nhandshake_timeout_secs = 1\n",
                "handshake_timeout_secs",
                "",
                Live,
            ),
            (
                stdio,
                "command = \"a\"\nmax_line_bytes = 1024\n",
                "max_line_bytes",
                "",
                Live,
            ),
            (
                stdio,
                "command = \"a\"\ntools = { exclude = [\"x\"] }\n",
                "shaping",
                "tools",
                Catalog,
            ),
            (
                stdio,
                "command = \"a\"\nprompts = { exclude = [\"x\"] }\n",
                "shaping",
                "prompts",
                Catalog,
            ),
            (
                stdio,
                "command = \"a\"\nresources = { exclude = [\"x\"] }\n",
                "shaping",
                "resources",
                Catalog,
            ),
            (
                stdio,
                "command = \"a\"\nrename = { x = \"y\" }\n",
                "shaping",
                "rename",
                Catalog,
            ),
            (
                stdio,
                "command = \"a\"\ndescriptions = { x = \"y\" }\n",
                "shaping",
                "descriptions",
                Catalog,
            ),
        ];
        for (before, after, field, key, effect) in rows {
            let changes = FieldChanges::between(&server(before), &server(after));
            let want = match effect {
                Restart => FieldChanges {
                    restart: vec![field],
                    ..FieldChanges::default()
                },
                Live => FieldChanges {
                    live: vec![field],
                    ..FieldChanges::default()
                },
                Catalog => FieldChanges {
                    catalog: vec![field],
                    ..FieldChanges::default()
                },
            };
            assert_eq!(changes, want, "{field} ({key}): {after}");
            assert_eq!(changes.needs_restart(), *effect == Restart, "{after}");
        }
        // The same table is no change; the identity fields never differ for one server.
        let same = FieldChanges::between(&server(stdio), &server(stdio));
        assert_eq!(same, FieldChanges::default());
        // Every field is covered by a row (the ones `between` names, less the identity).
        let covered: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.2).collect();
        assert_eq!(covered.len(), 14 - 2, "{covered:?}");
    }

    #[test]
    fn the_live_settings_are_read_from_the_server_and_the_gateway() {
        let s = server("command = \"a\"\nrequest_timeout_secs = 500\nmax_in_flight = 3\n");
        let t = Tunables::of(&s);
        assert_eq!(
            (t.max_in_flight, t.request_timeout),
            (3, Some(Duration::from_secs(500)))
        );
        let gateway = GatewayConfig::default();
        assert_eq!(
            t.effective_request_timeout(&gateway),
            s.effective_request_timeout(&gateway)
        );
    }
}
