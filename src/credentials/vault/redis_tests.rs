//! The Redis backend against a real `redis-server`: two replicas' vaults share grants, the
//! store holds no token in the clear, and a store down fails the call.

use super::tests::grant;
use super::*;
use crate::seal::ClusterKey;
use crate::shared_store::test_server::TestRedis;
use crate::util::secret_url::SecretUrl;

fn replica(redis: &TestRedis, dir: &std::path::Path) -> Vault {
    let config = VaultConfig {
        path: dir.join("never-written"),
        cluster_key: Some(ClusterKey::from_bytes([9; 32])),
        store: Some(SecretUrl::new(redis.url())),
        ..VaultConfig::default()
    };
    Vault::open(&config).expect("a vault on the store")
}

/// `vault`'s generation once it differs from `before` (the store's counter is read by a task
/// of its own: asked again until it is, boundedly).
async fn generation_after(vault: &Vault, before: u64) -> u64 {
    for _ in 0..500 {
        let now = vault.generation();
        if now != before {
            return now;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    vault.generation()
}

#[tokio::test]
async fn a_grant_kept_through_one_replica_is_used_by_another_and_never_in_the_clear() {
    let mut redis = TestRedis::start();
    let dir = std::env::temp_dir().join(format!("mcpmux-vault-redis-{}", std::process::id()));
    let (a, b) = (replica(&redis, &dir), replica(&redis, &dir));
    assert_eq!(a.describe(), redis.url());
    let key = GrantKey::new("alice@example.com", "github");
    assert_eq!(b.get(&key).await.unwrap(), None);
    let before = generation_after(&b, u64::MAX).await;

    a.put(&key, &grant(1)).await.unwrap();
    assert_eq!(b.get(&key).await.unwrap(), Some(grant(1)));
    let listed = b.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].0, key);
    assert_ne!(generation_after(&b, before).await, before, "b sees a's write");

    let reg = ClientRegistration {
        client_id: "cid-1".into(),
        client_secret: Some("secret-PLAINTEXT".into()),
        auth_method: "client_secret_post".into(),
        issuer: Some("https://as.example".into()),
    };
    a.put_registration("github", &reg).await.unwrap();
    let got = b.registration("github", "https://as.example").await.unwrap();
    assert_eq!(got.map(|r| r.client_id), Some("cid-1".to_string()));

    // Nothing in the store shows a token or a secret; no key names a principal (the records
    // do, as the vault file's do, for listing).
    let dump = redis.dump();
    assert!(!dump.contains("PLAINTEXT"), "a secret in the store:\n{dump}");
    for key in dump.lines().filter(|l| l.starts_with("mcpmux:")) {
        assert!(!key.contains("alice") && !key.contains("github"), "{key}");
    }
    assert!(
        dump.contains("mcpmux:grant:") && dump.contains("mcpmux:vault:gen"),
        "{dump}"
    );

    let seen = b.generation();
    assert!(b.remove(&key).await.unwrap());
    assert_ne!(b.generation(), seen, "its own write, at once");
    assert_eq!(a.get(&key).await.unwrap(), None);
    assert!(a.list().await.unwrap().is_empty());
    a.put(&key, &grant(2)).await.unwrap();

    // The store down: every call fails, naming the store; nothing falls back to a file.
    redis.kill();
    let err = b.get(&key).await.expect_err("fails closed").to_string();
    assert!(err.starts_with("vault: shared store redis://127.0.0.1:"), "{err}");
    assert!(b.list().await.is_err());
    assert!(b.put(&key, &grant(3)).await.is_err());
    assert!(!dir.exists(), "no vault file was written");
}

#[tokio::test]
async fn a_sign_in_shared_by_one_replica_is_taken_once_by_another_and_sealed_meanwhile() {
    let redis = TestRedis::start();
    let dir = std::env::temp_dir().join(format!("mcpmux-vault-sign-in-{}", std::process::id()));
    let (a, b) = (replica(&redis, &dir), replica(&redis, &dir));
    let pending = serde_json::json!({ "verifier": "pkce-verifier-that-must-stay-secret" });
    let ttl = Duration::from_secs(60);
    assert!(a.share_sign_in("state-1", &pending, ttl).await.unwrap());
    assert!(!redis.dump().contains("pkce-verifier-that-must-stay-secret"));
    // Another state does not open it; the right one does, once, on any replica.
    assert_eq!(
        b.take_shared_sign_in::<serde_json::Value>("state-2")
            .await
            .unwrap(),
        None
    );
    assert_eq!(b.take_shared_sign_in("state-1").await.unwrap(), Some(pending));
    assert_eq!(
        a.take_shared_sign_in::<serde_json::Value>("state-1")
            .await
            .unwrap(),
        None
    );
    // A vault file shares nothing: the callback comes back to the process that started it.
    let file = Vault::open(&VaultConfig {
        path: dir.join("file-vault"),
        ..VaultConfig::default()
    })
    .unwrap();
    assert!(!file.share_sign_in("s", &1, ttl).await.unwrap());
    assert_eq!(file.take_shared_sign_in::<u32>("s").await.unwrap(), None);
}
