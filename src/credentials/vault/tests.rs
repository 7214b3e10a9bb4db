use super::*;
use crate::seal::ClusterKey;
use std::path::Path;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpmux-vault-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    dir
}

fn key(byte: u8) -> ClusterKey {
    ClusterKey::from_bytes([byte; 32])
}

fn config(path: &Path, key: Option<ClusterKey>, previous: Vec<ClusterKey>) -> VaultConfig {
    VaultConfig {
        path: path.to_path_buf(),
        key,
        previous_keys: previous,
        ..VaultConfig::default()
    }
}

/// A grant whose secrets say `PLAINTEXT` (what a test greps stores for).
pub(super) fn grant(n: u32) -> Grant {
    Grant {
        access_token: format!("access-PLAINTEXT-{n}"),
        token_type: "Bearer".into(),
        refresh_token: Some(format!("refresh-PLAINTEXT-{n}")),
        expires_at: Some(2_000_000_000),
        scope: Some("read".into()),
        obtained_at: 1_700_000_000,
        token_endpoint: Some("https://as.example/token".into()),
        resource: Some("https://mcp.example/mcp".into()),
        client: Some(ClientRegistration {
            client_id: "cid".into(),
            client_secret: Some(format!("client-secret-PLAINTEXT-{n}")),
            auth_method: "client_secret_post".into(),
            issuer: Some("https://as.example".into()),
        }),
    }
}

/// The file is its owner's only: mode 0600 on Unix (Windows has no mode bits to check).
fn assert_owner_only(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
    }
    #[cfg(not(unix))]
    let _ = path;
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn a_grant_round_trips_and_a_restart_opens_it_with_the_generated_key() {
    let dir = scratch("restart");
    let path = dir.join("mcpmux-vault");
    let vault = Vault::open(&config(&path, None, vec![])).unwrap();
    let alice = GrantKey::new("local", "linear");
    assert_eq!(vault.get(&alice).await.unwrap(), None);
    assert!(vault.list().await.unwrap().is_empty());
    // Nothing is created before the first write.
    assert!(!path.exists() && !dir.join("mcpmux-vault.key").exists());
    vault.put(&alice, &grant(1)).await.unwrap();
    assert_eq!(vault.get(&alice).await.unwrap(), Some(grant(1)));
    assert_owner_only(&path);
    assert_owner_only(&dir.join("mcpmux-vault.key"));
    // A new process (a new Vault on the same path) opens what the last one sealed.
    let again = Vault::open(&config(&path, None, vec![])).unwrap();
    assert_eq!(again.get(&alice).await.unwrap(), Some(grant(1)));
    let listed = again.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].0, alice);
    assert_eq!(listed[0].1.scope.as_deref(), Some("read"));
    assert!(listed[0].1.refreshable);
    // The listing names a grant as the grant's own summary does (audit lines use that one).
    assert_eq!(listed[0].1, grant(1).summary());
    // Replacing keeps one record; removing says whether there was one.
    again.put(&alice, &grant(2)).await.unwrap();
    assert_eq!(vault.get(&alice).await.unwrap(), Some(grant(2)));
    assert_eq!(vault.list().await.unwrap().len(), 1);
    assert_ne!(vault.list().await.unwrap()[0].1.id, listed[0].1.id);
    assert!(vault.remove(&alice).await.unwrap());
    assert!(!vault.remove(&alice).await.unwrap());
    assert_eq!(again.get(&alice).await.unwrap(), None);
    assert_owner_only(&path);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn the_file_holds_no_plaintext_token_refresh_token_or_secret() {
    let dir = scratch("plaintext");
    let path = dir.join("v");
    let vault = Vault::open(&config(&path, Some(key(1)), vec![])).unwrap();
    vault.put(&GrantKey::new("local", "a"), &grant(7)).await.unwrap();
    let reg = grant(8).client.unwrap();
    vault.put_registration("a", &reg).await.unwrap();
    let bytes = std::fs::read(&path).unwrap();
    for secret in [
        "access-PLAINTEXT-7",
        "refresh-PLAINTEXT-7",
        "client-secret-PLAINTEXT-8",
        "PLAINTEXT",
    ] {
        assert!(!contains(&bytes, secret), "{secret} in the vault file");
    }
    // Neither does a listing or a summary.
    let listed = format!("{:?}", vault.list().await.unwrap());
    assert!(!listed.contains("PLAINTEXT"), "{listed}");
    // With a configured key, no key file is made.
    assert!(!dir.join("v.key").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn registrations_are_kept_per_upstream_and_issuer() {
    let dir = scratch("registrations");
    let vault = Vault::open(&config(&dir.join("v"), Some(key(1)), vec![])).unwrap();
    let reg = grant(1).client.unwrap();
    assert_eq!(vault.registration("a", "https://as.example").await.unwrap(), None);
    vault.put_registration("a", &reg).await.unwrap();
    assert_eq!(
        vault.registration("a", "https://as.example").await.unwrap(),
        Some(reg.clone())
    );
    assert_eq!(
        vault.registration("a", "https://other.example").await.unwrap(),
        None
    );
    assert_eq!(vault.registration("b", "https://as.example").await.unwrap(), None);
    let mut changed = reg.clone();
    changed.client_id = "cid-2".into();
    vault.put_registration("a", &changed).await.unwrap();
    assert_eq!(
        vault.registration("a", "https://as.example").await.unwrap(),
        Some(changed)
    );
    // Registrations are no grants.
    assert!(vault.list().await.unwrap().is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn previous_keys_open_and_the_next_write_seals_with_the_current_key() {
    let dir = scratch("rotation");
    let path = dir.join("v");
    let (k, other) = (GrantKey::new("local", "a"), GrantKey::new("local", "b"));
    let with_a = Vault::open(&config(&path, Some(key(0xA)), vec![])).unwrap();
    with_a.put(&k, &grant(1)).await.unwrap();
    with_a.put(&other, &grant(2)).await.unwrap();
    let rotated = Vault::open(&config(&path, Some(key(0xB)), vec![key(0xA)])).unwrap();
    assert_eq!(rotated.get(&k).await.unwrap(), Some(grant(1)));
    assert_eq!(rotated.list().await.unwrap().len(), 2);
    rotated.put(&k, &grant(3)).await.unwrap();
    let b_only = Vault::open(&config(&path, Some(key(0xB)), vec![])).unwrap();
    assert_eq!(b_only.get(&k).await.unwrap(), Some(grant(3)));
    // The grant not written since is still sealed with A: B alone does not open it.
    let err = b_only.get(&other).await.unwrap_err().to_string();
    assert!(err.contains("previous_keys"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_wrong_key_is_a_clear_error_naming_the_file() {
    let dir = scratch("wrong-key");
    let path = dir.join("v");
    let k = GrantKey::new("alice", "linear");
    Vault::open(&config(&path, Some(key(1)), vec![]))
        .unwrap()
        .put(&k, &grant(1))
        .await
        .unwrap();
    let wrong = Vault::open(&config(&path, Some(key(2)), vec![])).unwrap();
    for err in [wrong.get(&k).await.unwrap_err(), wrong.list().await.unwrap_err()] {
        let text = err.to_string();
        assert!(matches!(err, VaultError::WrongKey { .. }), "{text}");
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(
            text.contains("\"alice\"") && text.contains("\"linear\""),
            "{text}"
        );
        assert!(
            text.contains("sealed under a key this gateway does not hold"),
            "{text}"
        );
    }
    // Without any key (no configured key, the generated key file gone) it says so.
    let none = Vault::open(&config(&path, None, vec![])).unwrap();
    let err = none.get(&k).await.unwrap_err().to_string();
    assert!(err.contains("v.key") && err.contains("is missing"), "{err}");
    // A key file that is not a key is refused at open.
    std::fs::write(dir.join("v.key"), "not a key\n").unwrap();
    let err = Vault::open(&config(&path, None, vec![])).unwrap_err().to_string();
    assert!(err.contains("v.key") && err.contains("not base64"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_record_moved_to_another_grant_key_does_not_open() {
    let dir = scratch("moved");
    let path = dir.join("v");
    let vault = Vault::open(&config(&path, Some(key(1)), vec![])).unwrap();
    vault
        .put(&GrantKey::new("alice", "linear"), &grant(1))
        .await
        .unwrap();
    vault
        .put_registration("linear", &grant(1).client.unwrap())
        .await
        .unwrap();
    // Someone with write access to the file copies alice's sealed grant under bob, and the
    // registration under another upstream.
    let text = std::fs::read_to_string(&path).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut copied = doc["grants"][0].clone();
    copied["principal"] = "bob".into();
    doc["grants"].as_array_mut().unwrap().push(copied);
    let mut moved = doc["registrations"][0].clone();
    moved["upstream"] = "github".into();
    doc["registrations"].as_array_mut().unwrap().push(moved);
    std::fs::write(&path, serde_json::to_string(&doc).unwrap()).unwrap();
    assert_eq!(
        vault.get(&GrantKey::new("alice", "linear")).await.unwrap(),
        Some(grant(1))
    );
    let err = vault
        .get(&GrantKey::new("bob", "linear"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"bob\"") && err.contains("failed authentication"),
        "{err}"
    );
    let err = vault
        .registration("github", "https://as.example")
        .await
        .unwrap_err();
    assert!(matches!(err, VaultError::WrongKey { .. }), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_file_over_the_limit_or_not_a_vault_is_refused_clearly() {
    let dir = scratch("bounded");
    let path = dir.join("v");
    let vault = Vault::open(&config(&path, Some(key(1)), vec![])).unwrap();
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(MAX_VAULT_BYTES + 1).unwrap();
    let err = vault.list().await.unwrap_err().to_string();
    assert!(
        err.contains(&path.display().to_string()) && err.contains("over the limit"),
        "{err}"
    );
    // A write refuses it too, and leaves it as it was.
    assert!(vault.put(&GrantKey::new("a", "b"), &grant(1)).await.is_err());
    assert_eq!(std::fs::metadata(&path).unwrap().len(), MAX_VAULT_BYTES + 1);
    std::fs::write(&path, "{\"not\": \"a vault\"}").unwrap();
    let err = vault.list().await.unwrap_err().to_string();
    assert!(err.contains("is not a vault file"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn the_cluster_key_seals_without_a_vault_key_and_still_opens_once_one_is_set() {
    let dir = scratch("cluster");
    let path = dir.join("v");
    let k = GrantKey::new("local", "a");
    let clustered = VaultConfig {
        cluster_key: Some(key(5)),
        ..config(&path, None, vec![])
    };
    Vault::open(&clustered).unwrap().put(&k, &grant(1)).await.unwrap();
    assert!(!dir.join("v.key").exists());
    // Another replica with the same cluster key opens it.
    assert_eq!(
        Vault::open(&clustered).unwrap().get(&k).await.unwrap(),
        Some(grant(1))
    );
    let keyed = VaultConfig {
        key: Some(key(6)),
        ..clustered.clone()
    };
    assert_eq!(
        Vault::open(&keyed).unwrap().get(&k).await.unwrap(),
        Some(grant(1))
    );
    // And a generated key keeps opening once a key is configured.
    let path2 = dir.join("w");
    Vault::open(&config(&path2, None, vec![]))
        .unwrap()
        .put(&k, &grant(2))
        .await
        .unwrap();
    let configured = Vault::open(&config(&path2, Some(key(7)), vec![])).unwrap();
    assert_eq!(configured.get(&k).await.unwrap(), Some(grant(2)));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn two_processes_writing_at_once_lose_no_write() {
    let dir = scratch("two-writers");
    let path = dir.join("v");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .max_blocking_threads(8)
        .build()
        .unwrap();
    // Two vaults on one file, each with its own lock file handle: as two processes are.
    let first = Vault::open(&config(&path, None, vec![])).unwrap();
    let second = Vault::open(&config(&path, None, vec![])).unwrap();
    const EACH: u32 = 25;
    runtime.block_on(async {
        let mut tasks = Vec::new();
        for n in 0..EACH {
            for (who, vault) in [("first", &first), ("second", &second)] {
                let vault = vault.clone();
                tasks.push(tokio::spawn(async move {
                    vault.put(&GrantKey::new(who, format!("s{n}")), &grant(n)).await
                }));
            }
        }
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        let listed = first.list().await.unwrap();
        assert_eq!(listed.len(), 2 * EACH as usize);
        // Both opened the one generated key (the second found the first's key file).
        assert_eq!(second.list().await.unwrap().len(), 2 * EACH as usize);
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn the_generation_changes_with_this_vaults_writes_and_another_processs() {
    let dir = scratch("generation");
    let path = dir.join("v");
    let mine = Vault::open(&config(&path, Some(key(1)), vec![])).unwrap();
    let theirs = Vault::open(&config(&path, Some(key(1)), vec![])).unwrap();
    let start = mine.generation();
    assert_eq!(mine.generation(), start);
    mine.put(&GrantKey::new("a", "b"), &grant(1)).await.unwrap();
    let after_mine = mine.generation();
    assert_ne!(after_mine, start);
    assert_eq!(mine.generation(), after_mine);
    theirs.put(&GrantKey::new("c", "d"), &grant(2)).await.unwrap();
    assert_ne!(mine.generation(), after_mine);
    // A remove of nothing writes nothing.
    let now = mine.generation();
    assert!(!mine.remove(&GrantKey::new("x", "y")).await.unwrap());
    assert_eq!(mine.generation(), now);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn logout_takes_a_principals_full_name_or_the_key_name_or_subject_it_stands_for() {
    let path = scratch("logout-named").join("vault");
    let vault = Vault::open(&config(&path, Some(key(3)), vec![])).unwrap();
    let (alice, bob_a, bob_b) = (
        GrantKey::new("key:alice", "up"),
        GrantKey::new("bob@https://a.example", "up"),
        GrantKey::new("bob@https://b.example", "up"),
    );
    for k in [&alice, &bob_a, &bob_b] {
        vault.put(k, &grant(1)).await.unwrap();
    }
    assert!(alice.named_by("alice") && alice.named_by("key:alice") && !alice.named_by("ali"));
    assert_eq!(vault.remove_named("alice", "up").await.unwrap(), Some(alice));
    // Two subjects "bob" at two issuers: the bare name is ambiguous, the full one is not.
    assert_eq!(vault.remove_named("bob", "up").await.unwrap(), None);
    assert_eq!(
        vault.remove_named("bob@https://b.example", "up").await.unwrap(),
        Some(bob_b)
    );
    assert_eq!(vault.remove_named("bob", "up").await.unwrap(), Some(bob_a));
    assert_eq!(vault.remove_named("bob", "up").await.unwrap(), None);
}
