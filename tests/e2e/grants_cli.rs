//! `mcpmux grants` and `mcpmux logout` end to end: grants put in the vault a configuration names
//! (through the library, as a sign-in does) are listed by `grants --config` (no gateway running)
//! and by `grants --url` against a running gateway's `/grants`; `logout` removes one either way,
//! says so when there is nothing to remove, and no output ever carries a token.

use crate::support::{run_client, scratch_dir, ClientRun};
use mcpmux::credentials::grant::{Grant, GrantKey};
use mcpmux::credentials::vault::Vault;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const RUN_TIMEOUT: Duration = Duration::from_secs(30);

fn grant(token: &str, scope: &str, refreshable: bool) -> Grant {
    Grant {
        access_token: format!("{token}-access"),
        token_type: "Bearer".into(),
        refresh_token: refreshable.then(|| format!("{token}-refresh")),
        expires_at: Some(4_000_000_000),
        scope: Some(scope.into()),
        obtained_at: 1_700_000_000,
        token_endpoint: Some("https://as.example/token".into()),
        resource: Some("https://mcp.example/mcp".into()),
        client: None,
    }
}

/// Run `mcpmux ARGS` off the runtime (an in-process gateway may be answering it).
async fn mcpmux(args: &[&str]) -> ClientRun {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpmux"));
        cmd.args(&args);
        run_client(cmd, RUN_TIMEOUT)
    })
    .await
    .expect("mcpmux ran")
}

/// No output of any run shows a token.
fn assert_no_token(run: &ClientRun) {
    let all = format!("{}{}", run.stdout, run.stderr);
    for secret in [
        "SECRET-local-access",
        "SECRET-local-refresh",
        "SECRET-alice-access",
    ] {
        assert!(!all.contains(secret), "a token in the output:\n{run}");
    }
    assert!(!all.contains("SECRET"), "a token in the output:\n{run}");
}

/// The data rows of `mcpmux grants` (after the header), as columns.
fn rows(run: &ClientRun) -> Vec<Vec<String>> {
    (run.stdout.lines().skip(1))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_are_listed_and_removed_with_the_config_and_through_a_running_gateway() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("grants-cli");
    let config_path = dir.join("mcpmux.toml");
    std::fs::write(&config_path, "[gateway]\nlisten = \"127.0.0.1:0\"\n").expect("write config");
    let file = config_path.to_string_lossy().into_owned();
    let config = mcpmux::Config::load(&config_path).expect("config loads");
    // The default vault is beside the configuration file.
    assert_eq!(
        config.vault.path,
        std::path::absolute(dir.join("mcpmux-vault")).unwrap()
    );

    // Two sign-ins, as `mcpmux login` or the gateway would write them.
    let vault = Vault::open(&config.vault).expect("vault opens");
    let local = GrantKey::new("local", "linear");
    vault
        .put(&local, &grant("SECRET-local", "read write", true))
        .await
        .unwrap();
    let alice = GrantKey::new("alice", "github");
    vault
        .put(&alice, &grant("SECRET-alice", "repo", false))
        .await
        .unwrap();
    let ids: Vec<String> = vault
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|(_, s)| s.id)
        .collect();
    assert!(!std::fs::read_to_string(&config.vault.path)
        .unwrap()
        .contains("SECRET"));

    // No gateway runs: the file's vault is read directly.
    let listed = mcpmux(&["grants", "--config", &file]).await;
    assert!(listed.exited_ok(), "{listed}");
    assert_no_token(&listed);
    assert!(listed.stdout.starts_with("PRINCIPAL"), "{listed}");
    let table = rows(&listed);
    assert_eq!(table.len(), 2, "{listed}");
    // In key order: alice's github, then local's linear; id last, refreshable before it.
    assert_eq!(table[0][..3], ["alice", "github", "repo"], "{listed}");
    assert_eq!(
        table[0][table[0].len() - 2..],
        ["no", ids[0].as_str()],
        "{listed}"
    );
    assert_eq!(table[1][..4], ["local", "linear", "read", "write"], "{listed}");
    assert_eq!(
        table[1][table[1].len() - 2..],
        ["yes", ids[1].as_str()],
        "{listed}"
    );
    assert!(listed.stdout.contains("2096-10-02T07:06:40Z"), "{listed}");

    // A running gateway serves the same vault at /grants on its (loopback, no [auth]) listener.
    let gateway = mcpmux::start(config.clone()).await.expect("gateway starts");
    let url = format!("http://{}", gateway.local_addr());
    let remote = mcpmux(&["grants", "--url", &url]).await;
    assert!(remote.exited_ok(), "{remote}");
    assert_no_token(&remote);
    assert_eq!(remote.stdout, listed.stdout);

    // Logout through the gateway (the default principal is `local`), then through the file.
    let out = mcpmux(&["logout", "linear", "--url", &url]).await;
    assert!(out.exited_ok(), "{out}");
    assert!(out.stdout.contains("removed"), "{out}");
    assert_eq!(vault.get(&local).await.unwrap(), None);
    let again = mcpmux(&["logout", "linear", "--url", &url]).await;
    assert_eq!(again.status.code(), Some(1), "{again}");
    assert!(again.stderr.contains("nothing to remove"), "{again}");
    let none = mcpmux(&["logout", "linear", "--config", &file]).await;
    assert_eq!(none.status.code(), Some(1), "{none}");
    assert!(
        none.stderr
            .contains("no grant of principal \"local\" for server \"linear\""),
        "{none}"
    );
    let after = mcpmux(&["grants", "--config", &file]).await;
    assert_eq!(rows(&after).len(), 1, "{after}");
    assert_eq!(rows(&after)[0][..2], ["alice", "github"], "{after}");

    let out = mcpmux(&["logout", "github", "--principal", "alice", "--config", &file]).await;
    assert!(out.exited_ok(), "{out}");
    // The running gateway sees the other process's removal.
    let empty = mcpmux(&["grants", "--url", &url]).await;
    assert!(empty.exited_ok(), "{empty}");
    assert!(empty.stdout.starts_with("no grants"), "{empty}");
    for run in [&out, &again, &none, &after, &empty] {
        assert_no_token(run);
    }
    gateway.stop().await;
    remove(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_auth_grants_are_served_only_on_the_admin_listener() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("grants-cli-auth");
    let config_path = dir.join("mcpmux.toml");
    let auth = "[auth]\n[[auth.api_keys]]\nname = \"k\"\nkey = \"k-0123456789\"\n";
    let write = |admin: &str| {
        let text = format!("[gateway]\nlisten = \"127.0.0.1:0\"\n{admin}\n{auth}");
        std::fs::write(&config_path, text).expect("write config");
        mcpmux::Config::load(&config_path).expect("config loads")
    };
    let config = write("");
    let vault = Vault::open(&config.vault).expect("vault opens");
    let local = GrantKey::new("local", "linear");
    vault
        .put(&local, &grant("SECRET-local", "read", true))
        .await
        .unwrap();

    // [auth] on the main listener and no admin_listen: refused, nothing removed.
    let gateway = mcpmux::start(config).await.expect("gateway starts");
    let url = format!("http://{}", gateway.local_addr());
    let refused = mcpmux(&["grants", "--url", &url]).await;
    assert_eq!(refused.status.code(), Some(2), "{refused}");
    assert!(
        refused.stderr.contains("HTTP 403") && refused.stderr.contains("admin_listen"),
        "{refused}"
    );
    let refused = mcpmux(&["logout", "linear", "--url", &url]).await;
    assert_eq!(refused.status.code(), Some(2), "{refused}");
    assert!(refused.stderr.contains("HTTP 403"), "{refused}");
    assert!(vault.get(&local).await.unwrap().is_some());
    gateway.stop().await;

    // On the admin listener it is served (and not on the main one any more).
    let gateway = mcpmux::start(write("admin_listen = \"127.0.0.1:0\""))
        .await
        .expect("gateway starts");
    let admin = format!("http://{}", gateway.admin_addr().expect("an admin listener"));
    let listed = mcpmux(&["grants", "--url", &admin]).await;
    assert!(listed.exited_ok(), "{listed}");
    assert_eq!(rows(&listed)[0][..3], ["local", "linear", "read"], "{listed}");
    let main = mcpmux(&["grants", "--url", &format!("http://{}", gateway.local_addr())]).await;
    assert_eq!(main.status.code(), Some(2), "{main}");
    let out = mcpmux(&["logout", "linear", "--url", &admin]).await;
    assert!(out.exited_ok(), "{out}");
    assert_eq!(vault.get(&local).await.unwrap(), None);
    for run in [&listed, &main, &out] {
        assert_no_token(run);
    }
    gateway.stop().await;
    remove(&dir);
}

fn remove(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
}
