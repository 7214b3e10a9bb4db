//! Where grants live, sealed with AEAD at rest: [`Vault`], one file (see [`file`]) of records
//! each sealed on its own with [`crate::seal::Sealer`] and bound to its key (a record copied
//! under another principal or upstream does not open); with `[cluster] store`, the same records
//! in the replicas' shared store instead (see [`redis`]), so every replica uses every grant.
//!
//! Keys (see [`keys`]): `[vault] key` seals, else the `[cluster]` key, else a key generated once
//! and kept beside the vault. `previous_keys` still open what they sealed; the current key seals,
//! so a grant opened with an old key is sealed again with the current one on its next write
//! (a refresh or a new sign-in), and records not written stay as they are.

mod file;
mod keys;
mod redis;
#[cfg(test)]
mod redis_tests;
#[cfg(test)]
mod tests;

pub use file::MAX_VAULT_BYTES;

use self::redis::RedisVault;
use super::grant::{ClientRegistration, Grant, GrantKey, GrantSummary};
use crate::config::VaultConfig;
use crate::seal::{Purpose, Sealer};
use file::{Document, SealedGrant, SealedRegistration, Stamp, VaultFile};
use keys::Keys;
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often [`Vault::generation`] looks at the file for another process's writes (every time in
/// unit tests, which check that it sees them without waiting).
const STAMP_EVERY: Duration = if cfg!(test) {
    Duration::ZERO
} else {
    Duration::from_secs(1)
};

/// The largest record sealed (a grant's JSON); the sealer opens at most 64 KiB of token text.
const MAX_RECORD_BYTES: usize = 32 * 1024;

/// Why the vault could not do what was asked. Every one names the vault's file (or the shared
/// store, its password hidden); none shows a token or a key.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    #[error("vault {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("vault {path} is {size} bytes, over the limit of {limit}: refused (is it the right file?)")]
    TooLarge { path: PathBuf, size: u64, limit: u64 },
    #[error("vault {path} is not a vault file this mcpmux reads: {why}")]
    Corrupt { path: PathBuf, why: String },
    #[error("vault key file {path} {why}")]
    BadKeyFile { path: PathBuf, why: String },
    #[error(
        "vault {path}: the {what} does not open with the vault's keys ({why}); was [vault] key \
         (or the [cluster] key) changed without the old one in [vault] previous_keys?"
    )]
    WrongKey {
        path: PathBuf,
        what: String,
        why: String,
    },
    #[error(
        "vault {path} holds sealed records but no key opens them: no [vault] key or [cluster] key \
         is set and the generated key file {key_file} is missing"
    )]
    NoKey { path: PathBuf, key_file: PathBuf },
    #[error("vault {path}: the {what} is {size} bytes, over the limit of {MAX_RECORD_BYTES}")]
    RecordTooLarge {
        path: PathBuf,
        what: String,
        size: usize,
    },
    #[error("vault {path}: {why}")]
    Internal { path: PathBuf, why: String },
    /// The shared store failed (down, too slow): the call fails, nothing falls back to a file.
    #[error("vault: {0}")]
    Store(#[from] crate::shared_store::StoreError),
}

/// The grant store (cheap to clone: one shared state).
#[derive(Clone, Debug)]
pub struct Vault {
    backend: Backend,
}

/// Where the records are.
#[derive(Clone, Debug)]
enum Backend {
    File(Arc<Inner>),
    Redis(Arc<RedisVault>),
}

#[derive(Debug)]
struct Inner {
    file: VaultFile,
    keys: Keys,
    generation: AtomicU64,
    /// When the file was last looked at, and what it looked like.
    seen: Mutex<(Instant, Option<Stamp>)>,
}

impl Vault {
    /// The vault `config` names. Nothing is created before the first write; the key file is
    /// read now when it exists (an unreadable one is an error now, not at the first sign-in).
    /// With `config.store` (`[cluster] store`), the store's records; nothing is connected before
    /// the first call.
    pub fn open(config: &VaultConfig) -> Result<Vault, VaultError> {
        let keys = Keys::resolve(config)?;
        if let Some(url) = &config.store {
            let store = crate::shared_store::SharedStore::new(url.expose())?;
            return Ok(Vault {
                backend: Backend::Redis(Arc::new(RedisVault::new(store, keys))),
            });
        }
        let file = VaultFile::new(config.path.clone());
        let stamp = file.stamp();
        Ok(Vault {
            backend: Backend::File(Arc::new(Inner {
                file,
                keys,
                generation: AtomicU64::new(0),
                seen: Mutex::new((Instant::now(), stamp)),
            })),
        })
    }

    /// Where the records are, as may be shown: the vault file, or the shared store's URL with
    /// its password hidden.
    pub fn describe(&self) -> String {
        match &self.backend {
            Backend::File(inner) => inner.file.path.display().to_string(),
            Backend::Redis(redis) => redis.describe(),
        }
    }

    /// The grant of `key`, if there is one.
    pub async fn get(&self, key: &GrantKey) -> Result<Option<Grant>, VaultError> {
        if let Backend::Redis(redis) = &self.backend {
            return redis.get(key).await;
        }
        let key = key.clone();
        self.blocking(move |inner| inner.get(&key)).await
    }

    /// Keep `grant` as the grant of `key` (replacing any), sealed with the current key.
    pub async fn put(&self, key: &GrantKey, grant: &Grant) -> Result<(), VaultError> {
        if let Backend::Redis(redis) = &self.backend {
            return redis.put(key, grant).await;
        }
        let (key, grant) = (key.clone(), grant.clone());
        self.blocking(move |inner| inner.put(&key, &grant)).await
    }

    /// Forget the grant of principal `given` for `upstream`: its full name, else the one grant of
    /// that upstream [`GrantKey::named_by`] it (an API key's name, a token's subject); the key
    /// removed, none when nothing (or more than one grant) matched.
    pub async fn remove_named(&self, given: &str, upstream: &str) -> Result<Option<GrantKey>, VaultError> {
        let exact = GrantKey::new(given, upstream);
        if self.remove(&exact).await? {
            return Ok(Some(exact));
        }
        let matching: Vec<GrantKey> = (self.list().await?.into_iter())
            .map(|(key, _)| key)
            .filter(|key| key.upstream == upstream && key.named_by(given))
            .collect();
        match matching.as_slice() {
            [only] => Ok(self.remove(only).await?.then(|| only.clone())),
            _ => Ok(None),
        }
    }

    /// Forget the grant of `key`; whether there was one.
    pub async fn remove(&self, key: &GrantKey) -> Result<bool, VaultError> {
        if let Backend::Redis(redis) = &self.backend {
            return redis.remove(key).await;
        }
        let key = key.clone();
        self.blocking(move |inner| inner.remove(&key)).await
    }

    /// Every grant, as may be shown (no token), in key order. A grant that does not open is an
    /// error (a wrong key is the operator's to fix, not to hide).
    pub async fn list(&self) -> Result<Vec<(GrantKey, GrantSummary)>, VaultError> {
        if let Backend::Redis(redis) = &self.backend {
            return redis.list().await;
        }
        self.blocking(|inner| inner.list()).await
    }

    /// The client registration kept for `upstream` at the authorization server `issuer`.
    pub async fn registration(
        &self,
        upstream: &str,
        issuer: &str,
    ) -> Result<Option<ClientRegistration>, VaultError> {
        if let Backend::Redis(redis) = &self.backend {
            return redis.registration(upstream, issuer).await;
        }
        let (upstream, issuer) = (upstream.to_string(), issuer.to_string());
        self.blocking(move |inner| inner.registration(&upstream, &issuer))
            .await
    }

    /// Keep `reg` for `upstream` at its issuer (`reg.issuer`, "" when unknown), replacing any.
    pub async fn put_registration(&self, upstream: &str, reg: &ClientRegistration) -> Result<(), VaultError> {
        if let Backend::Redis(redis) = &self.backend {
            return redis.put_registration(upstream, reg).await;
        }
        let (upstream, reg) = (upstream.to_string(), reg.clone());
        self.blocking(move |inner| inner.put_registration(&upstream, &reg))
            .await
    }

    /// Share a sign-in waiting for its callback with every replica (sealed, for `ttl`), so that
    /// the callback may land on any of them; false for a vault file (nothing is shared: the
    /// callback comes back to the process that started the sign-in).
    pub async fn share_sign_in<T: serde::Serialize>(
        &self,
        state: &str,
        pending: &T,
        ttl: Duration,
    ) -> Result<bool, VaultError> {
        match &self.backend {
            Backend::Redis(redis) => redis.put_sign_in(state, pending, ttl).await.map(|()| true),
            Backend::File(_) => Ok(false),
        }
    }

    /// Take the sign-in another replica shared under `state` (once); none for a vault file.
    pub async fn take_shared_sign_in<T: serde::de::DeserializeOwned>(
        &self,
        state: &str,
    ) -> Result<Option<T>, VaultError> {
        match &self.backend {
            Backend::Redis(redis) => redis.take_sign_in(state).await,
            Backend::File(_) => Ok(None),
        }
    }

    /// A number that changes whenever the store changed: at once for this vault's own writes,
    /// within about a second for another process's (the file is looked at, never read, at most
    /// once a second; a caller busy elsewhere skips the look; the shared store's counter is read
    /// as often, without the caller waiting for it).
    pub fn generation(&self) -> u64 {
        let inner = match &self.backend {
            Backend::File(inner) => inner,
            Backend::Redis(redis) => return redis.generation(),
        };
        if let Some(mut seen) = inner.seen.try_lock() {
            if seen.0.elapsed() >= STAMP_EVERY {
                let stamp = inner.file.stamp();
                if stamp != seen.1 {
                    inner.generation.fetch_add(1, Ordering::Relaxed);
                }
                *seen = (Instant::now(), stamp);
            }
        }
        inner.generation.load(Ordering::Relaxed)
    }

    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Inner) -> Result<T, VaultError> + Send + 'static,
    ) -> Result<T, VaultError> {
        let inner = match &self.backend {
            Backend::File(inner) => inner.clone(),
            Backend::Redis(redis) => {
                return Err(VaultError::Internal {
                    path: PathBuf::from(redis.describe()),
                    why: "a file operation asked of the shared store".into(),
                })
            }
        };
        let path = inner.file.path.clone();
        tokio::task::spawn_blocking(move || work(&inner))
            .await
            .unwrap_or_else(|e| {
                Err(VaultError::Internal {
                    path,
                    why: format!("the vault's task failed: {e}"),
                })
            })
    }
}

/// The associated data binding a record to where it is kept: the parts, each length-prefixed.
/// `value` as JSON, sealed with `sealer` for `purpose` and bound to `aad` (refused over
/// [`MAX_RECORD_BYTES`]); `path` and `what` name it in errors.
fn seal_record<T: serde::Serialize>(
    sealer: &Sealer,
    (purpose, aad): (Purpose, &[u8]),
    (path, what): (PathBuf, String),
    value: &T,
) -> Result<String, VaultError> {
    let plain = serde_json::to_vec(value).map_err(|e| VaultError::Internal {
        path: path.clone(),
        why: e.to_string(),
    })?;
    if plain.len() > MAX_RECORD_BYTES {
        let size = plain.len();
        return Err(VaultError::RecordTooLarge { path, what, size });
    }
    Ok(sealer.seal(purpose, aad, &plain))
}

/// What [`seal_record`] sealed in `sealed`, opened with `sealer` (a wrong key or binding, or
/// another kind of record, is [`VaultError::WrongKey`]).
fn open_record<T: serde::de::DeserializeOwned>(
    sealer: &Sealer,
    (purpose, aad): (Purpose, &[u8]),
    (path, what): (PathBuf, String),
    sealed: &str,
) -> Result<T, VaultError> {
    let wrong = |why: String| VaultError::WrongKey {
        path: path.clone(),
        what: what.clone(),
        why,
    };
    let plain = sealer
        .open(purpose, aad, sealed)
        .map_err(|e| wrong(e.to_string()))?;
    serde_json::from_slice(&plain).map_err(|e| wrong(format!("not what was sealed: {e}")))
}

fn context(parts: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for part in parts {
        out.extend_from_slice(&(part.len() as u64).to_be_bytes());
        out.extend_from_slice(part.as_bytes());
    }
    out
}

fn describe(key: &GrantKey) -> String {
    format!("grant of {:?} at {:?}", key.principal, key.upstream)
}

impl Inner {
    fn path(&self) -> PathBuf {
        self.file.path.clone()
    }

    /// The sealer for opening what `document` holds (an error when it holds records and no key
    /// exists).
    fn opener(&self, document: &Document) -> Result<Option<Arc<Sealer>>, VaultError> {
        match self.keys.for_opening() {
            Some(sealer) => Ok(Some(sealer)),
            None if document.grants.is_empty() && document.registrations.is_empty() => Ok(None),
            None => Err(VaultError::NoKey {
                path: self.path(),
                key_file: self.keys.key_file.clone(),
            }),
        }
    }

    fn open_grant(&self, sealer: &Sealer, record: &SealedGrant) -> Result<Grant, VaultError> {
        let key = GrantKey::new(&record.principal, &record.upstream);
        let aad = context(&[&key.principal, &key.upstream]);
        open_record(
            sealer,
            (Purpose::Grant, &aad),
            (self.path(), describe(&key)),
            &record.sealed,
        )
    }

    fn seal<T: serde::Serialize>(
        &self,
        sealer: &Sealer,
        purpose: Purpose,
        aad: &[u8],
        what: String,
        value: &T,
    ) -> Result<String, VaultError> {
        seal_record(sealer, (purpose, aad), (self.path(), what), value)
    }

    fn get(&self, key: &GrantKey) -> Result<Option<Grant>, VaultError> {
        let document = self.file.read()?;
        let Some(record) =
            (document.grants.iter()).find(|r| r.principal == key.principal && r.upstream == key.upstream)
        else {
            return Ok(None);
        };
        match self.opener(&document)? {
            Some(sealer) => self.open_grant(&sealer, record).map(Some),
            None => Ok(None),
        }
    }

    fn put(&self, key: &GrantKey, grant: &Grant) -> Result<(), VaultError> {
        self.file.update(|document| {
            let sealer = self.keys.for_sealing()?;
            let aad = context(&[&key.principal, &key.upstream]);
            let sealed = self.seal(&sealer, Purpose::Grant, &aad, describe(key), grant)?;
            let record = SealedGrant {
                principal: key.principal.clone(),
                upstream: key.upstream.clone(),
                sealed,
            };
            let at = (document.grants.iter())
                .position(|r| r.principal == key.principal && r.upstream == key.upstream);
            match at {
                Some(at) => document.grants[at] = record,
                None => document.grants.push(record),
            }
            Ok(((), true))
        })?;
        self.wrote();
        Ok(())
    }

    fn remove(&self, key: &GrantKey) -> Result<bool, VaultError> {
        let removed = self.file.update(|document| {
            let before = document.grants.len();
            (document.grants).retain(|r| !(r.principal == key.principal && r.upstream == key.upstream));
            let removed = document.grants.len() != before;
            Ok((removed, removed))
        })?;
        if removed {
            self.wrote();
        }
        Ok(removed)
    }

    fn list(&self) -> Result<Vec<(GrantKey, GrantSummary)>, VaultError> {
        let document = self.file.read()?;
        let Some(sealer) = self.opener(&document)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(document.grants.len());
        for record in &document.grants {
            let grant = self.open_grant(&sealer, record)?;
            out.push((
                GrantKey::new(&record.principal, &record.upstream),
                grant.summary(),
            ));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    fn registration(&self, upstream: &str, issuer: &str) -> Result<Option<ClientRegistration>, VaultError> {
        let document = self.file.read()?;
        let Some(record) =
            (document.registrations.iter()).find(|r| r.upstream == upstream && r.issuer == issuer)
        else {
            return Ok(None);
        };
        let Some(sealer) = self.opener(&document)? else {
            return Ok(None);
        };
        let what = format!("client registration of {upstream:?} at {issuer:?}");
        let aad = context(&[upstream, issuer]);
        open_record(
            &sealer,
            (Purpose::Registration, &aad),
            (self.path(), what),
            &record.sealed,
        )
        .map(Some)
    }

    fn put_registration(&self, upstream: &str, reg: &ClientRegistration) -> Result<(), VaultError> {
        let issuer = reg.issuer.clone().unwrap_or_default();
        self.file.update(|document| {
            let sealer = self.keys.for_sealing()?;
            let what = format!("client registration of {upstream:?} at {issuer:?}");
            let aad = context(&[upstream, &issuer]);
            let sealed = self.seal(&sealer, Purpose::Registration, &aad, what, reg)?;
            let record = SealedRegistration {
                upstream: upstream.to_string(),
                issuer: issuer.clone(),
                sealed,
            };
            let at =
                (document.registrations.iter()).position(|r| r.upstream == upstream && r.issuer == issuer);
            match at {
                Some(at) => document.registrations[at] = record,
                None => document.registrations.push(record),
            }
            Ok(((), true))
        })?;
        self.wrote();
        Ok(())
    }

    /// This vault changed the store: a new generation now, and the file as it is now is seen.
    fn wrote(&self) {
        let stamp = self.file.stamp();
        let mut seen = self.seen.lock();
        *seen = (Instant::now(), stamp);
        self.generation.fetch_add(1, Ordering::Relaxed);
    }
}
