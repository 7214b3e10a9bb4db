//! Tests of putting a re-read configuration in force: file watching, what changes live, what
//! waits for a restart, and what `/status` records.

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
        "[gateway]\npage_size = 7\nseparator = \"_\"\nname_reserve = 24\n{KEYS}[[policy]]\nallow = [\"b__*\"]\n\
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
            // No host is open: nobody's view changed, nobody is told.
            lists_changed: Vec::new(),
            needs_restart: vec!["gateway.separator", "gateway.name_reserve"],
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
    assert_eq!(
        in_force.gateway.name_budget(),
        64,
        "and their running name budget"
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

#[tokio::test]
async fn vault_settings_wait_for_a_restart() {
    const KEY: &str = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
    let first = config("");
    let (hub, _inputs) = Hub::new(Arc::new(first.clone()), CancellationToken::new(), None);
    let second = config(&format!("[vault]\npath = \"elsewhere\"\nkey = \"{KEY}\"\n"));
    let done = apply(&hub, second).await.unwrap();
    assert_eq!(done.needs_restart, vec!["[vault]"]);
    assert_eq!(hub.config().vault, first.vault);
}

#[tokio::test]
async fn tls_paths_wait_for_a_restart_and_the_running_public_url_stays() {
    let first = config("[gateway]\nhttp2 = true\n");
    let (hub, _inputs) = Hub::new(Arc::new(first.clone()), CancellationToken::new(), None);
    let second = config("[gateway]\ntls = { cert = \"/etc/s.pem\", key = \"/etc/k.pem\" }\n");
    let done = apply(&hub, second).await.unwrap();
    assert_eq!(done.needs_restart, vec!["gateway.tls"]);
    // The listener still serves plain HTTP: its URL says so until the restart.
    assert_eq!(hub.config().gateway.tls, None);
    assert_eq!(hub.config().gateway.public_url, "http://127.0.0.1:8080/mcp");
}
