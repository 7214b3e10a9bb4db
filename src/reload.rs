//! Putting a re-read configuration in force while the gateway runs (SIGHUP, or an edit of the
//! file seen by [`watch_file`]).
//!
//! What can change live changes for the next request: today the `[[policy]]` rules, so a removed
//! `allow` takes effect at once, not at token expiry (and hosts are told their lists changed).
//! Everything else keeps its running value and is named in the log as needing a restart (reload
//! by diff of servers and gateway settings is issue 17's; until then the configuration in force is
//! the old one with the new policy). `[cluster]` keys are among them: the sealer is built once at
//! start, so a new key, or a new `previous_keys`, needs a restart (a rolling one, for a rotation).

use crate::catalog::ListKind;
use crate::config::Config;
use crate::core::hub::Hub;
use crate::upstream::host::{HostEvent, HostEvents};
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// How often [`watch_file`] looks at the file.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(1);
/// How long a changed file must stay the same before it counts (an editor writes in steps).
const SETTLE: Duration = Duration::from_millis(250);
/// Files larger than this are not compared byte for byte but by size and time.
const MAX_FINGERPRINT_BYTES: u64 = 4 << 20;

/// What the file looks like now: its SHA-256 (a file that cannot be read has none).
fn fingerprint(path: &std::path::Path) -> Option<Vec<u8>> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.len() > MAX_FINGERPRINT_BYTES {
        let modified = meta.modified().ok()?;
        return Some(format!("{}:{modified:?}", meta.len()).into_bytes());
    }
    let bytes = std::fs::read(path).ok()?;
    Some(
        ring::digest::digest(&ring::digest::SHA256, &bytes)
            .as_ref()
            .to_vec(),
    )
}

/// The first 16 hex digits of the SHA-256 of the file at `path`: logged with each reload, so an
/// operator (or a test) can tell which version of the file is in force.
pub fn file_digest(path: &std::path::Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
    Some(digest.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect())
}

/// A message each time the file at `path` changes content (checked every `interval`, once it has
/// settled), until `stop` fires. The path is followed, so a Kubernetes ConfigMap's symlink swap
/// counts as a change.
pub fn watch_file(path: PathBuf, interval: Duration, stop: CancellationToken) -> mpsc::Receiver<()> {
    let (files, watched) = watch::channel(vec![path]);
    let changes = watch_files(watched, interval, stop.clone());
    // The set never changes: keep its sender as long as the watch runs.
    tokio::spawn(async move {
        stop.cancelled().await;
        drop(files);
    });
    changes
}

/// A message each time any of the files in `files` changes content (the file, its includes, its
/// `mcp_json` files: the set is replaced after each reload), checked every `interval`; changes
/// to several files at once (or an editor's steps) settle into one message. Each path is
/// followed (a symlink swap is a change); a file that is gone for a moment (a rename in
/// progress) is no change, one that stays gone (a removed `mcp_json` file) is; a file new to the
/// set is taken as it is when it joins.
pub fn watch_files(
    mut files: watch::Receiver<Vec<PathBuf>>,
    interval: Duration,
    stop: CancellationToken,
) -> mpsc::Receiver<()> {
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(async move {
        let mut seen: Vec<(PathBuf, Option<Vec<u8>>)> = Vec::new();
        let mut update = true;
        loop {
            if update {
                let now: Vec<PathBuf> = files.borrow_and_update().clone();
                seen.retain(|(path, _)| now.contains(path));
                for path in now {
                    if !seen.iter().any(|(p, _)| *p == path) {
                        let print = fingerprint(&path);
                        seen.push((path, print));
                    }
                }
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            update = files.has_changed().unwrap_or(false);
            if update {
                continue;
            }
            let changed: Vec<(usize, Option<Vec<u8>>)> = (seen.iter().enumerate())
                .map(|(i, (path, was))| (i, was, fingerprint(path)))
                .filter(|(_, was, now)| now != *was)
                .map(|(i, _, now)| (i, now))
                .collect();
            if changed.is_empty() {
                continue;
            }
            tokio::time::sleep(SETTLE).await;
            if changed.iter().any(|(i, now)| fingerprint(&seen[*i].0) != *now) {
                continue; // still being written (or back after a rename): look again
            }
            for (i, now) in changed {
                seen[i].1 = now;
            }
            // One pending reload is enough: it reads the files as they are then.
            if let Err(mpsc::error::TrySendError::Closed(())) = tx.try_send(()) {
                return;
            }
        }
    });
    rx
}

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
    if new.servers != old.servers || new.disabled != old.disabled {
        needs_restart.push("[servers]");
    }
    if new.auth != old.auth {
        needs_restart.push("[auth]");
    }
    if new.audit != old.audit {
        needs_restart.push("[audit]");
    }
    if new.cluster != old.cluster {
        needs_restart.push("[cluster]");
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

    #[test]
    fn the_digest_names_the_content() {
        let dir = std::env::temp_dir().join(format!("mcpmux-digest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("c.toml");
        std::fs::write(&file, "").unwrap();
        // SHA-256 of nothing: e3b0c44298fc1c14…
        assert_eq!(file_digest(&file).as_deref(), Some("e3b0c44298fc1c14"));
        assert_eq!(file_digest(&dir.join("missing")), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn an_edit_is_seen_once_and_a_rewrite_of_the_same_text_not_at_all() {
        let dir = std::env::temp_dir().join(format!("mcpmux-watch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("mcpmux.toml");
        std::fs::write(&file, "a = 1\n").unwrap();
        let stop = CancellationToken::new();
        let mut changes = watch_file(file.clone(), Duration::from_millis(20), stop.clone());
        let quiet = |changes: &mut mpsc::Receiver<()>| changes.try_recv().is_err();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(quiet(&mut changes), "no change yet");
        std::fs::write(&file, "a = 1\n").unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(quiet(&mut changes), "the same text again is no change");
        std::fs::write(&file, "a = 2\n").unwrap();
        let seen = tokio::time::timeout(Duration::from_secs(5), changes.recv()).await;
        assert_eq!(seen, Ok(Some(())));
        // Gone for a moment (a rename in progress): not a change; back with new text: one.
        std::fs::remove_file(&file).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(quiet(&mut changes));
        std::fs::write(&file, "a = 3\n").unwrap();
        let seen = tokio::time::timeout(Duration::from_secs(5), changes.recv()).await;
        assert_eq!(seen, Ok(Some(())));
        stop.cancel();
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(5), changes.recv()).await,
            Ok(None)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn every_file_of_the_set_is_watched_and_the_set_follows_the_reloads() {
        let dir = std::env::temp_dir().join(format!("mcpmux-watch-set-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (main, team, json) = (dir.join("main.toml"), dir.join("team.toml"), dir.join("mcp.json"));
        for file in [&main, &team] {
            std::fs::write(file, "a = 1\n").unwrap();
        }
        let _ = std::fs::remove_file(&json);
        let stop = CancellationToken::new();
        let (set, watched) = watch::channel(vec![main.clone(), team.clone(), json.clone()]);
        let mut changes = watch_files(watched, Duration::from_millis(20), stop.clone());
        async fn next(changes: &mut mpsc::Receiver<()>) -> Option<()> {
            tokio::time::timeout(Duration::from_secs(5), changes.recv())
                .await
                .ok()
                .flatten()
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(changes.try_recv().is_err(), "no change yet");
        std::fs::write(&team, "a = 2\n").unwrap();
        assert_eq!(next(&mut changes).await, Some(()), "an included file");
        std::fs::write(&json, "{}").unwrap();
        assert_eq!(
            next(&mut changes).await,
            Some(()),
            "a missing mcp_json file that appears"
        );
        std::fs::remove_file(&json).unwrap();
        assert_eq!(next(&mut changes).await, Some(()), "one that is removed for good");
        // The reload found team.toml is no longer included: its edits are not watched.
        set.send(vec![main.clone()]).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        std::fs::write(&team, "a = 3\n").unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(changes.try_recv().is_err(), "a file out of the set");
        std::fs::write(&main, "a = 4\n").unwrap();
        assert_eq!(next(&mut changes).await, Some(()));
        stop.cancel();
        let _ = std::fs::remove_dir_all(&dir);
    }

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

    #[tokio::test]
    async fn cluster_keys_wait_for_a_restart() {
        use crate::seal::Purpose;
        const OLD: &str = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
        const NEW: &str = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=";
        let first = config(&format!("[cluster]\nkey = \"{OLD}\"\n"));
        let (hub, _inputs) = Hub::new(Arc::new(first.clone()), CancellationToken::new(), None);
        let sealed = hub.sealer.seal(Purpose::Cursor, b"", b"x");
        let second = config(&format!("[cluster]\nkey = \"{NEW}\"\n"));
        let done = apply(&hub, second).unwrap();
        assert_eq!(done.needs_restart, vec!["[cluster]"]);
        assert_eq!(hub.config().cluster, first.cluster);
        // The running sealer is the one built at start: it still opens (and seals) under the old key.
        assert_eq!(hub.sealer.open(Purpose::Cursor, b"", &sealed), Ok(b"x".to_vec()));
        let again = hub.sealer.seal(Purpose::Cursor, b"", b"y");
        let old_only = crate::seal::Sealer::new(&crate::seal::ClusterKey::parse(OLD).unwrap(), &[]);
        assert_eq!(old_only.open(Purpose::Cursor, b"", &again), Ok(b"y".to_vec()));
    }
}
