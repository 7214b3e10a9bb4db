//! Putting a re-read configuration in force while the gateway runs (SIGHUP).
//!
//! What can change live changes for the next request: today the `[[policy]]` rules, so a removed
//! `allow` takes effect at once, not at token expiry (and hosts are told their lists changed). Everything else keeps its running value and
//! is named in the log as needing a restart (reload by diff of servers and gateway settings is
//! issue 17's; until then the configuration in force is the old one with the new policy).

use crate::catalog::ListKind;
use crate::config::Config;
use crate::core::hub::Hub;
use crate::upstream::host::{HostEvent, HostEvents};

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// Whether the `[[policy]]` rules changed (they are in force either way).
    pub policy_changed: bool,
    /// The parts of the file that changed but keep their running value until a restart.
    pub needs_restart: Vec<&'static str>,
}

/// Put what can change live of `new` in force on `hub`; refuse (changing nothing) rules the
/// running gateway cannot honour: `audit_arguments` when it was started without `[audit]`.
pub fn apply(hub: &Hub, new: Config) -> Result<Reloaded, String> {
    let old = hub.config();
    if old.audit.is_none() {
        if let Some(rule) = new.policy.iter().find(|rule| rule.audit_arguments) {
            return Err(format!(
                "[[policy]] at line {}: audit_arguments needs the audit log, and this gateway was \
                 started without [audit] (adding it needs a restart)",
                rule.line
            ));
        }
    }
    let mut needs_restart = Vec::new();
    if new.gateway != old.gateway {
        needs_restart.push("[gateway]");
    }
    if new.servers != old.servers {
        needs_restart.push("[servers]");
    }
    if new.auth != old.auth {
        needs_restart.push("[auth]");
    }
    if new.audit != old.audit {
        needs_restart.push("[audit]");
    }
    let policy_changed = new.policy != old.policy;
    let in_force = Config {
        policy: new.policy,
        ..Config::clone(&old)
    };
    drop(old);
    hub.replace_config(std::sync::Arc::new(in_force));
    if policy_changed {
        // What a principal may see may have changed: every host re-lists.
        hub.sessions.emit(HostEvent::ListsChanged(&ListKind::ALL));
    }
    Ok(Reloaded {
        policy_changed,
        needs_restart,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio_util::sync::CancellationToken;

    fn config(text: &str) -> Config {
        Config::from_toml_str(text, "t.toml", &|_| None).unwrap()
    }

    const KEYS: &str = "[[auth.api_keys]]\nname = \"ci\"\nkey = \"k\"\n";

    #[tokio::test]
    async fn the_policy_changes_live_and_the_rest_waits_for_a_restart() {
        let first = config(&format!("{KEYS}[[policy]]\nallow = [\"a__*\"]\n"));
        let (hub, _inputs) = Hub::new(Arc::new(first.clone()), CancellationToken::new(), None);
        let facts = crate::policy::PrincipalFacts::new("ci", [], []);
        assert!(hub.policy().decide(&facts, "a__x").allowed);

        let second = config(&format!(
            "[gateway]\npage_size = 7\n{KEYS}[[policy]]\nallow = [\"b__*\"]\n[servers.s]\ncommand = \"s\"\n"
        ));
        let done = apply(&hub, second).unwrap();
        assert_eq!(
            done,
            Reloaded {
                policy_changed: true,
                needs_restart: vec!["[gateway]", "[servers]"],
            }
        );
        assert!(
            !hub.policy().decide(&facts, "a__x").allowed,
            "a removed allow is gone"
        );
        assert!(hub.policy().decide(&facts, "b__x").allowed);
        let in_force = hub.config();
        assert_eq!(
            in_force.gateway, first.gateway,
            "gateway settings keep their running value"
        );
        assert!(in_force.servers.is_empty());

        // Arguments to audit, but no audit log running: refused, nothing changes.
        let audited = config(&format!(
            "{KEYS}[[policy]]\nallow = [\"c__*\"]\naudit_arguments = true\n[audit]\npath = \"-\"\n"
        ));
        let refused = apply(&hub, audited).unwrap_err();
        assert!(
            refused.starts_with("[[policy]] at line 4: audit_arguments needs the audit log"),
            "{refused}"
        );
        assert!(hub.policy().decide(&facts, "b__x").allowed);

        // The same file again: nothing changed.
        let again = config(&format!(
            "[gateway]\npage_size = 7\n{KEYS}[[policy]]\nallow = [\"b__*\"]\n[servers.s]\ncommand = \"s\"\n"
        ));
        assert!(!apply(&hub, again).unwrap().policy_changed);
    }
}
