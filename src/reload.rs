//! Putting a re-read configuration in force while the gateway runs (SIGHUP, or an edit of the
//! file seen by [`watch_file`]).
//!
//! The new file is validated whole first: one that does not load, or asks what the running
//! gateway cannot honour, changes nothing (the error is logged and shown by `/status`).
//!
//! Then `[servers]` is applied by diff: added ones start, removed ones stop, and a changed one
//! restarts only when a field that needs a new process or connection changed (`command`,
//! `args`, `env`, `cwd`, `inherit_env`, `url`, `headers`, `transport`, `era`, `isolation`,
//! `namespace`); its timeouts, `max_in_flight` and health checks change live (the next call or
//! check reads them), `handshake_timeout_secs` and `max_line_bytes` at its next connect, and its
//! shaping in the catalog, without a restart (`upstream::tunables` classifies every field). The
//! others are untouched: same process, connection and calls in flight; a call in flight keeps
//! the timeout it started with.
//!
//! The configuration is then swapped, so what is read per request applies to the next one:
//! `[[policy]]`, profiles, gateway timeouts and limits, page size, `allowed_hosts`,
//! `allowed_origins`, `public_url`, `allow_unauthenticated`, and `[auth]`: its authenticator
//! (JWT verifier, JWKS cache, introspection client) is rebuilt when `[auth]` or `public_url`
//! changed. No session is dropped; one whose API key was removed is refused 401 at its next
//! request, as any request with that key is. A configuration without `[auth]` on the running
//! non-loopback listener without `allow_unauthenticated` is refused.
//!
//! What is bound or built at start keeps its running value, is named in the log as needing a
//! restart and listed in the reload's outcome (`/status`, `last_reload.needs_restart`):
//! `gateway.listen`, `admin_listen`, `path`, `separator` (every exposed name),
//! `max_body_bytes` (the body limit of the host faces' router), `[audit]` (its writer),
//! `[cluster]` (the sealer is built once, so a new key, or new `previous_keys`,
//! needs a (rolling) restart), `telemetry.log_format` (the log subscriber) and
//! `telemetry.otlp_endpoint`/`service_name` (the tracer); `telemetry.access_log` applies to the
//! next request. Hosts get one `list_changed` per list that changed, once the
//! added and changed servers loaded their lists (or [`LIST_WAIT`] passed).

use crate::catalog::ListKind;
use crate::config::Config;
use crate::core::hub::Hub;
use crate::status_doc::ReloadStatus;
use crate::upstream::host::{HostEvent, HostEvents};
use crate::upstream::reconcile::ServerDiff;
use std::path::{Path, PathBuf};
use std::sync::Arc;
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

/// How long a reload waits for the servers it started to load their lists before it tells
/// hosts what changed (a server slower than that announces its lists itself when they come).
pub const LIST_WAIT: Duration = Duration::from_secs(10);

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// Whether the `[[policy]]` rules changed (they are in force either way).
    pub policy_changed: bool,
    /// Whether `[auth]` changed (the next request is authenticated by the new one).
    pub auth_changed: bool,
    /// How `[servers]` changed (in force now).
    pub servers: ServerDiff,
    /// The lists hosts were told changed.
    pub lists_changed: Vec<ListKind>,
    /// The parts of the file that changed but keep their running value until a restart.
    pub needs_restart: Vec<&'static str>,
}

/// Re-read the file at `path` and put it in force ([`apply`]); the outcome is what `/status`
/// shows as the last reload.
pub async fn reload_file(hub: &Hub, path: &Path) -> Result<Reloaded, String> {
    let (loaded, _files) = Config::load_tracked(path);
    reload_loaded(hub, loaded.map_err(|err| err.to_string()), file_digest(path)).await
}

/// Put a configuration just loaded (or why it did not load) in force, and note the outcome with
/// the main file's `digest` for `/status`.
pub async fn reload_loaded(
    hub: &Hub,
    loaded: Result<Config, String>,
    digest: Option<String>,
) -> Result<Reloaded, String> {
    let result = match loaded {
        Ok(config) => apply(hub, config).await,
        Err(err) => Err(err),
    };
    record(hub, &result, digest);
    result
}

/// Note how a reload went, for `/status`: a good one is also the new last good load.
pub fn record(hub: &Hub, result: &Result<Reloaded, String>, digest: Option<String>) {
    let now = crate::core::hub::unix_seconds();
    let mut status = hub.config_status.lock();
    if result.is_ok() {
        status.loaded_at_unix = now;
        status.digest = digest.clone();
    }
    status.last_reload = Some(ReloadStatus {
        outcome: if result.is_ok() { "ok" } else { "error" }.into(),
        at_unix: now,
        error: result.as_ref().err().cloned(),
        digest,
        needs_restart: (result.as_ref())
            .map(|done| done.needs_restart.iter().map(|s| s.to_string()).collect())
            .unwrap_or_default(),
    });
}

/// Put `new` in force on `hub` (see the module doc); refuse, changing nothing, what the
/// running gateway cannot honour: `audit_arguments` when it was started without `[audit]`, no
/// `[auth]` on the running non-loopback listener without `allow_unauthenticated`.
pub async fn apply(hub: &Hub, new: Config) -> Result<Reloaded, String> {
    let _one_at_a_time = hub.reloading.lock().await;
    let old = hub.config();
    if old.audit.is_none() {
        if let Some(rule) = new.policy.iter().find(|rule| rule.audit_arguments) {
            return Err(format!(
                "[[policy]] at {}: audit_arguments needs the audit log, and this gateway was \
                 started without [audit] (adding it needs a restart)",
                rule.site()
            ));
        }
    }
    let (in_force, needs_restart) = in_force(&old, new);
    let gateway = &in_force.gateway;
    if in_force.auth.is_none() && !gateway.listen.ip().is_loopback() && !gateway.allow_unauthenticated {
        return Err(format!(
            "the gateway listens on {} (not loopback) and the new configuration has no [auth]: \
             add [auth], or set gateway.allow_unauthenticated = true (e.g. behind an \
             authenticating proxy)",
            gateway.listen
        ));
    }
    let auth_changed = in_force.auth != old.auth;
    // Built before anything changes (no I/O: keys are fetched when a token needs them); the
    // running one (its JWKS cache) stays unless `[auth]` or the resource it names changed.
    let rebuild = auth_changed || in_force.gateway.public_url != old.gateway.public_url;
    let authenticator = rebuild.then(|| crate::auth::Authenticator::from_config(&in_force));
    let policy_changed = in_force.policy != old.policy;
    let profiles_changed = in_force.profiles != old.profiles;
    let hold = hub.upstreams.hold_lists();
    let before = hub.catalog.snapshot();
    let (servers, started) = hub.upstreams.reconcile(&old.servers, &in_force.servers);
    drop(old);
    hub.replace_config(Arc::new(in_force));
    if let Some(authenticator) = authenticator {
        hub.auth.replace(authenticator);
    }
    let first_loads = started.iter().map(|slot| slot.first_start.cancelled());
    let all_loaded = futures_util::future::join_all(first_loads);
    if tokio::time::timeout(LIST_WAIT, all_loaded).await.is_err() {
        tracing::warn!(
            wait_secs = LIST_WAIT.as_secs(),
            "servers started by the reload are still loading their lists; hosts hear of them when they come"
        );
    }
    drop(hold);
    let after = hub.catalog.snapshot();
    let lists_changed: Vec<ListKind> = if policy_changed {
        // What a principal may see may have changed: every host re-lists.
        ListKind::ALL.to_vec()
    } else {
        (ListKind::ALL.into_iter())
            .filter(|&kind| after.list(kind).differs_from(before.list(kind)))
            .collect()
    };
    if policy_changed {
        // What a principal sees of any profile's view may have changed too.
        hub.sessions.views.forget();
    }
    hub.sessions.emit(HostEvent::ListsChanged(&lists_changed));
    if profiles_changed && !policy_changed {
        // A profile's view may have changed without the catalog: its hosts hear of it.
        hub.sessions.profiles_changed();
    }
    Ok(Reloaded {
        policy_changed,
        auth_changed,
        servers,
        lists_changed,
        needs_restart,
    })
}

/// The configuration to put in force: `new`, but for what keeps its running value until a
/// restart (taken from `old`), which is named.
fn in_force(old: &Config, new: Config) -> (Config, Vec<&'static str>) {
    let mut needs_restart = Vec::new();
    let (was, mut gateway) = (&old.gateway, new.gateway);
    macro_rules! kept {
        ($($field:ident),*) => {$(
            if gateway.$field != was.$field {
                needs_restart.push(concat!("gateway.", stringify!($field)));
                gateway.$field = was.$field.clone();
            }
        )*};
    }
    // The default `public_url` (and `[auth]` audience) follows `listen` and `path`: made from
    // the running ones while those wait for a restart.
    let defaulted = format!("http://{}{}", gateway.listen, gateway.path);
    kept!(listen, admin_listen, path, separator, max_body_bytes);
    let mut auth = new.auth;
    if gateway.public_url == defaulted {
        gateway.public_url = format!("http://{}{}", gateway.listen, gateway.path);
        if let Some(auth) = auth.as_mut().filter(|auth| auth.audience == [defaulted.clone()]) {
            auth.audience = vec![gateway.public_url.clone()];
        }
    }
    let mut keep = |name: &'static str, changed: bool| {
        if changed {
            needs_restart.push(name);
        }
    };
    keep("[audit]", new.audit != old.audit);
    keep("[cluster]", new.cluster != old.cluster);
    // The log format is the subscriber's and the tracer is made at start; the access log is
    // asked per request.
    keep(
        "telemetry.log_format",
        new.telemetry.log_format != old.telemetry.log_format,
    );
    keep(
        "telemetry.otlp_endpoint",
        new.telemetry.otlp_endpoint != old.telemetry.otlp_endpoint,
    );
    keep(
        "telemetry.service_name",
        new.telemetry.service_name != old.telemetry.service_name,
    );
    let telemetry = crate::config::TelemetryConfig {
        log_format: old.telemetry.log_format,
        otlp_endpoint: old.telemetry.otlp_endpoint.clone(),
        service_name: old.telemetry.service_name.clone(),
        ..new.telemetry
    };
    let config = Config {
        gateway,
        servers: new.servers,
        disabled: new.disabled,
        policy: new.policy,
        profiles: new.profiles,
        auth,
        audit: old.audit.clone(),
        cluster: old.cluster.clone(),
        telemetry,
    };
    (config, needs_restart)
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
    async fn the_policy_servers_and_per_request_settings_change_live_and_the_rest_waits() {
        let first = config(&format!("{KEYS}[[policy]]\nallow = [\"a__*\"]\n"));
        let (hub, _inputs) = Hub::new(Arc::new(first.clone()), CancellationToken::new(), None);
        let facts = crate::policy::PrincipalFacts::new("ci", [], []);
        assert!(hub.policy().decide(&facts, "a__x").allowed);

        let second_text = format!(
            "[gateway]\npage_size = 7\nseparator = \"_\"\n{KEYS}[[policy]]\nallow = [\"b__*\"]\n\
             [servers.s]\ncommand = \"mcpmux-surely-not-installed\"\n"
        );
        let done = apply(&hub, config(&second_text)).await.unwrap();
        assert_eq!(
            done,
            Reloaded {
                policy_changed: true,
                auth_changed: false,
                servers: ServerDiff {
                    added: vec!["s".into()],
                    ..ServerDiff::default()
                },
                lists_changed: ListKind::ALL.to_vec(),
                needs_restart: vec!["gateway.separator"],
            }
        );
        assert!(
            !hub.policy().decide(&facts, "a__x").allowed,
            "a removed allow is gone"
        );
        assert!(hub.policy().decide(&facts, "b__x").allowed);
        let in_force = hub.config();
        assert_eq!(in_force.gateway.page_size, 7, "read per request: in force");
        assert_eq!(
            in_force.gateway.separator, first.gateway.separator,
            "exposed names keep their running separator"
        );
        assert_eq!(in_force.servers.len(), 1);
        let started = hub
            .upstreams
            .get(&"s".into())
            .expect("the added server has a slot");
        assert!(
            started.first_start.is_cancelled(),
            "its first attempt is over (it failed)"
        );

        // Arguments to audit, but no audit log running: refused, nothing changes.
        let audited = config(&format!(
            "{KEYS}[[policy]]\nallow = [\"c__*\"]\naudit_arguments = true\n[audit]\npath = \"-\"\n"
        ));
        let refused = apply(&hub, audited).await.unwrap_err();
        assert!(
            refused.starts_with("[[policy]] at line 4: audit_arguments needs the audit log"),
            "{refused}"
        );
        assert!(hub.policy().decide(&facts, "b__x").allowed);
        assert_eq!(hub.upstreams.len(), 1);

        // The same file again: nothing changed, nobody is told anything.
        let again = apply(&hub, config(&second_text)).await.unwrap();
        assert!(!again.policy_changed && again.servers.is_empty());
        assert!(again.lists_changed.is_empty());
        assert!(
            Arc::ptr_eq(&started, &hub.upstreams.get(&"s".into()).unwrap()),
            "the same slot"
        );

        // Without the server: its slot is retired and gone.
        let done = apply(&hub, config(&format!("{KEYS}[[policy]]\nallow = [\"b__*\"]\n")))
            .await
            .unwrap();
        assert_eq!(done.servers.removed, vec![crate::config::UpstreamId::new("s")]);
        assert!(hub.upstreams.is_empty());
        assert!(started
            .retired()
            .is_some_and(|why| why.contains("removed from the configuration")));
        assert!(started.stop.is_cancelled());
    }

    #[tokio::test]
    async fn a_reload_is_recorded_for_status_with_the_error_or_the_new_last_good_load() {
        let dir = std::env::temp_dir().join(format!("mcpmux-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("mcpmux.toml");
        let (hub, _inputs) = Hub::new(Arc::new(config("")), CancellationToken::new(), None);
        std::fs::write(&file, "[gateway]\npage_size = 9\n").unwrap();
        reload_file(&hub, &file).await.unwrap();
        let good = hub.config_status.lock().clone();
        let last = good.last_reload.clone().unwrap();
        assert_eq!((last.outcome.as_str(), last.error), ("ok", None));
        assert_eq!(good.digest, file_digest(&file));
        assert_eq!(last.digest, good.digest);
        std::fs::write(&file, "[gateway]\npage_size = \"many\"\n").unwrap();
        let err = reload_file(&hub, &file).await.unwrap_err();
        let after = hub.config_status.lock().clone();
        let last = after.last_reload.clone().unwrap();
        assert_eq!(
            (last.outcome.as_str(), last.error.as_deref()),
            ("error", Some(err.as_str()))
        );
        assert!(err.contains("mcpmux.toml:2:"), "{err}");
        assert_eq!(last.digest, file_digest(&file));
        assert_eq!(
            (after.loaded_at_unix, &after.digest),
            (good.loaded_at_unix, &good.digest),
            "the last good load stays"
        );
        assert_eq!(hub.config().gateway.page_size, 9, "nothing changed");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn the_access_log_switches_live_and_the_log_format_waits_for_a_restart() {
        let first = config("");
        let (hub, _inputs) = Hub::new(Arc::new(first), CancellationToken::new(), None);
        let second = config("[telemetry]\nlog_format = \"json\"\naccess_log = false\n");
        let done = apply(&hub, second).await.unwrap();
        assert_eq!(done.needs_restart, vec!["telemetry.log_format"]);
        let telemetry = &hub.config().telemetry;
        assert!(!telemetry.access_log);
        assert_eq!(telemetry.log_format, crate::config::LogFormat::Text);
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
        let done = apply(&hub, second).await.unwrap();
        assert_eq!(done.needs_restart, vec!["[cluster]"]);
        assert_eq!(hub.config().cluster, first.cluster);
        // The running sealer is the one built at start: it still opens (and seals) under the old key.
        assert_eq!(hub.sealer.open(Purpose::Cursor, b"", &sealed), Ok(b"x".to_vec()));
        let again = hub.sealer.seal(Purpose::Cursor, b"", b"y");
        let old_only = crate::seal::Sealer::new(&crate::seal::ClusterKey::parse(OLD).unwrap(), &[]);
        assert_eq!(old_only.open(Purpose::Cursor, b"", &again), Ok(b"y".to_vec()));
    }

    #[tokio::test]
    async fn auth_changes_for_the_next_request_unless_it_would_leave_a_public_listener_open() {
        let public = "[gateway]\nlisten = \"0.0.0.0:8080\"\n";
        let first = config(&format!("{public}{KEYS}"));
        let (hub, _inputs) = Hub::new(Arc::new(first), CancellationToken::new(), None);
        let knows = |hub: &Hub, key: &'static str| {
            let auth = hub.auth.current();
            async move {
                match auth {
                    Some(auth) => auth.verify(key).await.is_ok(),
                    None => false,
                }
            }
        };
        assert!(knows(&hub, "k").await && !knows(&hub, "k2").await);
        let other = "[[auth.api_keys]]\nname = \"two\"\nkey = \"k2\"\n";
        let done = apply(&hub, config(&format!("{public}{other}"))).await.unwrap();
        assert!(done.auth_changed && done.needs_restart.is_empty(), "{done:?}");
        assert!(knows(&hub, "k2").await && !knows(&hub, "k").await);
        // No [auth] on the running public listener (the file's own listen is loopback): refused.
        let refused = apply(&hub, config("")).await.unwrap_err();
        assert!(refused.contains("no [auth]"), "{refused}");
        assert!(
            knows(&hub, "k2").await && hub.config().auth.is_some(),
            "nothing changed"
        );
        // With allow_unauthenticated (read live), it goes: nobody is authenticated any more.
        let open = config("[gateway]\nallow_unauthenticated = true\nmax_body_bytes = 1024\n");
        let done = apply(&hub, open).await.unwrap();
        assert_eq!(
            done.needs_restart,
            vec!["gateway.listen", "gateway.max_body_bytes"]
        );
        assert!(!hub.auth.is_on());
        // The default public_url follows the running listen, not the file's.
        assert_eq!(hub.config().gateway.public_url, "http://0.0.0.0:8080/mcp");
    }
}
