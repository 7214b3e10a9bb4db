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
//! `gateway.listen`, `admin_listen`, `path`, `separator`, `max_name_length` and `name_reserve`
//! (every exposed name),
//! `max_body_bytes` (the body limit of the host faces' router), `http2` and `tls` (the
//! listeners'; the files of `tls` are re-read when they change, without a reload),
//! `[audit]` (its writer),
//! `[cluster]` (the sealer is built once, so a new key, or new `previous_keys`,
//! needs a (rolling) restart), `[vault]` (opened at start), `telemetry.log_format` (the log subscriber) and
//! `telemetry.otlp_endpoint`/`service_name` (the tracer); `telemetry.access_log` applies to the
//! next request. `[pinning]` applies at once, and the lock file is read again (an approval
//! written by another replica is in force here from this reload on); a lock that does not read
//! refuses the reload. Hosts get one `list_changed` per list that changed, once the
//! added and changed servers loaded their lists (or [`LIST_WAIT`] passed); when `[[policy]]` or
//! `[auth]` changed, each host only of the lists whose view changed for its endpoint and
//! principal ([`views`]).

mod views;

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
    /// The lists hosts were told changed (under a changed policy or `[auth]`: those whose view
    /// changed for some host, each host told of its own).
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
    // (The running listener's client certificates, `tls.client_ca`, authenticate too.)
    let client_certs = gateway.client_certificates();
    if in_force.auth.is_none()
        && !gateway.listen.ip().is_loopback()
        && !gateway.allow_unauthenticated
        && !client_certs
    {
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
    // `[pinning]` and the lock as it is now (another replica may have approved a drift); a lock
    // that does not read refuses the reload before anything changed.
    let pinning = &in_force.pinning;
    (hub.catalog.reload_pinning(pinning.mode, &pinning.path)).map_err(|err| err.to_string())?;
    // What hosts saw: compared with what they see once the new configuration is in force.
    let (old_config, old_policy) = (hub.config_full(), hub.policy());
    let (servers, started) = hub
        .upstreams
        .reconcile(&old.servers, (&in_force.servers, in_force.auth.is_some()));
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
    let lists_changed: Vec<ListKind> = if policy_changed || auth_changed {
        // What a principal may see may have changed (the rules, or what a key holds): each
        // host hears of the lists whose view changed for its endpoint and principal, no more.
        let (new_config, new_policy) = (hub.config_full(), hub.policy());
        let mut changes = views::ViewChanges::new(
            views::Side {
                catalog: &before,
                policy: &old_policy,
                config: &old_config,
            },
            views::Side {
                catalog: &after,
                policy: &new_policy,
                config: &new_config,
            },
        );
        let told = hub
            .sessions
            .tell_each(|profile, viewer| changes.of(profile, viewer));
        // The profiles' views as they are now: the next catalog change is compared with them.
        for kind in ListKind::ALL {
            hub.sessions.views.changed(kind);
        }
        told
    } else {
        let changed: Vec<ListKind> = (ListKind::ALL.into_iter())
            .filter(|&kind| after.list(kind).differs_from(before.list(kind)))
            .collect();
        hub.sessions.emit(HostEvent::ListsChanged(&changed));
        if profiles_changed {
            // A profile's view may have changed without the catalog: its hosts hear of it.
            hub.sessions.profiles_changed();
        }
        changed
    };
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
    let defaulted = format!("{}://{}{}", gateway.scheme(), gateway.listen, gateway.path);
    kept!(
        listen,
        admin_listen,
        path,
        separator,
        max_name_length,
        name_reserve,
        max_body_bytes,
        http2,
        tls
    );
    let mut auth = new.auth;
    if gateway.public_url == defaulted {
        gateway.public_url = format!("{}://{}{}", gateway.scheme(), gateway.listen, gateway.path);
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
    // (The cluster key the vault falls back to is `[cluster]`'s to report.)
    let vault = |v: &crate::config::VaultConfig| (v.path.clone(), v.key.clone(), v.previous_keys.clone());
    keep("[vault]", vault(&new.vault) != vault(&old.vault));
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
        vault: old.vault.clone(),
        telemetry,
        pinning: new.pinning,
    };
    (config, needs_restart)
}

#[cfg(test)]
mod tests;
