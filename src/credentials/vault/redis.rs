//! The vault's Redis backend (`[cluster] store`): the same sealed records as the file's, each
//! bound to its key as associated data, kept in the replicas' shared store so a grant made
//! through one replica is used by every other. No token is ever in Redis in the clear, and no
//! key names a principal or upstream in the clear:
//!
//! - `mcpmux:grant:<hex SHA-256 of principal and upstream>`: a grant's record (its principal,
//!   upstream and sealed grant, as in the file), listed in the set `mcpmux:grants`;
//! - `mcpmux:registration:<hex SHA-256 of upstream and issuer>`: a client registration's;
//! - `mcpmux:vault:gen`: incremented by every write, read by [`RedisVault::generation`] at most
//!   once a second (in a task of its own: the caller never waits), so every replica sees another's
//!   writes within about a second.
//!
//! It fails closed: the store down (or slow past its timeout) is an error of the call, never a
//! fallback to a local file.

use super::file::{SealedGrant, SealedRegistration};
use super::keys::Keys;
use super::{context, describe, open_record, seal_record, VaultError, STAMP_EVERY};
use crate::credentials::grant::{ClientRegistration, Grant, GrantKey, GrantSummary};
use crate::seal::Purpose;
use crate::shared_store::{hashed, SharedStore};
use parking_lot::Mutex;
use redis::AsyncCommands;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

const GRANTS: &str = "mcpmux:grants";
const GENERATION: &str = "mcpmux:vault:gen";

fn grant_id(key: &GrantKey) -> String {
    hashed(&[&key.principal, &key.upstream])
}

fn grant_key(id: &str) -> String {
    format!("mcpmux:grant:{id}")
}

fn sign_in_key(state: &str) -> String {
    format!("mcpmux:sign-in:{}", hashed(&["sign-in", state]))
}

fn registration_key(upstream: &str, issuer: &str) -> String {
    format!("mcpmux:registration:{}", hashed(&[upstream, issuer]))
}

/// The Redis backend.
#[derive(Debug)]
pub(super) struct RedisVault {
    store: Arc<SharedStore>,
    keys: Keys,
    generation: AtomicU64,
    /// The store's `mcpmux:vault:gen` as last read or written.
    seen: AtomicU64,
    /// When it was last read.
    looked: Mutex<Instant>,
    /// A read of it is under way.
    looking: Arc<AtomicBool>,
}

impl RedisVault {
    pub fn new(store: SharedStore, keys: Keys) -> RedisVault {
        RedisVault {
            store: Arc::new(store),
            keys,
            generation: AtomicU64::new(0),
            seen: AtomicU64::new(0),
            looked: Mutex::new(Instant::now()),
            looking: Arc::new(AtomicBool::new(false)),
        }
    }

    pub fn describe(&self) -> String {
        self.store.describe()
    }

    /// The store as a "path" in the errors shared with the file backend.
    fn path(&self) -> PathBuf {
        PathBuf::from(self.describe())
    }

    fn seal<T: serde::Serialize>(
        &self,
        purpose: Purpose,
        aad: &[u8],
        what: String,
        value: &T,
    ) -> Result<String, VaultError> {
        let sealer = self.keys.for_sealing()?;
        seal_record(&sealer, (purpose, aad), (self.path(), what), value)
    }

    /// `None` while no key exists (nothing was sealed yet).
    fn open<T: serde::de::DeserializeOwned>(
        &self,
        purpose: Purpose,
        aad: &[u8],
        what: String,
        sealed: &str,
    ) -> Result<Option<T>, VaultError> {
        let Some(sealer) = self.keys.for_opening() else {
            return Ok(None);
        };
        open_record(&sealer, (purpose, aad), (self.path(), what), sealed).map(Some)
    }

    fn corrupt(&self, what: &str, why: impl std::fmt::Display) -> VaultError {
        VaultError::Corrupt {
            path: self.path(),
            why: format!("{what}: {why}"),
        }
    }

    fn open_grant(&self, record: &SealedGrant) -> Result<Option<Grant>, VaultError> {
        let key = GrantKey::new(&record.principal, &record.upstream);
        let aad = context(&[&key.principal, &key.upstream]);
        self.open(Purpose::Grant, &aad, describe(&key), &record.sealed)
    }

    /// One of this replica's writes made the store's generation `now`.
    fn wrote(&self, now: u64) {
        self.seen.store(now, Ordering::Relaxed);
        *self.looked.lock() = Instant::now();
        self.generation.fetch_add(1, Ordering::Relaxed);
    }

    pub async fn get(&self, key: &GrantKey) -> Result<Option<Grant>, VaultError> {
        let id = grant_key(&grant_id(key));
        let text: Option<String> = (self.store)
            .call("reading a grant", |mut c| async move { c.get(id).await })
            .await?;
        let Some(text) = text else { return Ok(None) };
        let record: SealedGrant = serde_json::from_str(&text).map_err(|e| self.corrupt(&describe(key), e))?;
        if record.principal != key.principal || record.upstream != key.upstream {
            return Err(self.corrupt(&describe(key), "the record is another grant's"));
        }
        self.open_grant(&record)
    }

    pub async fn put(&self, key: &GrantKey, grant: &Grant) -> Result<(), VaultError> {
        let aad = context(&[&key.principal, &key.upstream]);
        let record = SealedGrant {
            principal: key.principal.clone(),
            upstream: key.upstream.clone(),
            sealed: self.seal(Purpose::Grant, &aad, describe(key), grant)?,
        };
        let text = serde_json::to_string(&record).map_err(|e| VaultError::Internal {
            path: self.path(),
            why: e.to_string(),
        })?;
        let id = grant_id(key);
        let (generation,): (u64,) = (self.store)
            .call("keeping a grant", |mut c| async move {
                (redis::pipe().atomic())
                    .set(grant_key(&id), text)
                    .ignore()
                    .sadd(GRANTS, &id)
                    .ignore()
                    .incr(GENERATION, 1)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        self.wrote(generation);
        Ok(())
    }

    pub async fn remove(&self, key: &GrantKey) -> Result<bool, VaultError> {
        let id = grant_id(key);
        let (removed, generation): (u64, u64) = (self.store)
            .call("removing a grant", |mut c| async move {
                (redis::pipe().atomic())
                    .del(grant_key(&id))
                    .srem(GRANTS, &id)
                    .ignore()
                    .incr(GENERATION, 1)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        self.wrote(generation);
        Ok(removed > 0)
    }

    pub async fn list(&self) -> Result<Vec<(GrantKey, GrantSummary)>, VaultError> {
        let ids: Vec<String> = (self.store)
            .call(
                "listing the grants",
                |mut c| async move { c.smembers(GRANTS).await },
            )
            .await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = ids.iter().map(|id| grant_key(id)).collect();
        let texts: Vec<Option<String>> = (self.store)
            .call("reading the grants", |mut c| async move {
                redis::cmd("MGET").arg(&keys).query_async(&mut c).await
            })
            .await?;
        let mut out = Vec::with_capacity(texts.len());
        // A grant removed between the two reads is simply not listed.
        for text in texts.into_iter().flatten() {
            let record: SealedGrant = serde_json::from_str(&text).map_err(|e| self.corrupt("a grant", e))?;
            if let Some(grant) = self.open_grant(&record)? {
                out.push((
                    GrantKey::new(&record.principal, &record.upstream),
                    grant.summary(),
                ));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    pub async fn registration(
        &self,
        upstream: &str,
        issuer: &str,
    ) -> Result<Option<ClientRegistration>, VaultError> {
        let key = registration_key(upstream, issuer);
        let text: Option<String> = (self.store)
            .call("reading a client registration", |mut c| async move {
                c.get(key).await
            })
            .await?;
        let Some(text) = text else { return Ok(None) };
        let what = format!("client registration of {upstream:?} at {issuer:?}");
        let record: SealedRegistration = serde_json::from_str(&text).map_err(|e| self.corrupt(&what, e))?;
        if record.upstream != upstream || record.issuer != issuer {
            return Err(self.corrupt(&what, "the record is another registration's"));
        }
        self.open(
            Purpose::Registration,
            &context(&[upstream, issuer]),
            what,
            &record.sealed,
        )
    }

    pub async fn put_registration(&self, upstream: &str, reg: &ClientRegistration) -> Result<(), VaultError> {
        let issuer = reg.issuer.clone().unwrap_or_default();
        let what = format!("client registration of {upstream:?} at {issuer:?}");
        let record = SealedRegistration {
            upstream: upstream.to_string(),
            issuer: issuer.clone(),
            sealed: self.seal(Purpose::Registration, &context(&[upstream, &issuer]), what, reg)?,
        };
        let text = serde_json::to_string(&record).map_err(|e| VaultError::Internal {
            path: self.path(),
            why: e.to_string(),
        })?;
        let key = registration_key(upstream, &issuer);
        let (generation,): (u64,) = (self.store)
            .call("keeping a client registration", |mut c| async move {
                (redis::pipe().atomic())
                    .set(key, text)
                    .ignore()
                    .incr(GENERATION, 1)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        self.wrote(generation);
        Ok(())
    }

    /// Keep a sign-in waiting for its callback, sealed and bound to its `state`, for `ttl`.
    pub async fn put_sign_in<T: serde::Serialize>(
        &self,
        state: &str,
        pending: &T,
        ttl: std::time::Duration,
    ) -> Result<(), VaultError> {
        let what = "a sign-in waiting for its callback".to_string();
        let sealed = self.seal(Purpose::Grant, &context(&["sign-in", state]), what, pending)?;
        let (key, secs) = (sign_in_key(state), ttl.as_secs().max(1));
        (self.store)
            .call("keeping a sign-in", |mut c| async move {
                c.set_ex::<_, _, ()>(key, sealed, secs).await
            })
            .await?;
        Ok(())
    }

    /// Take the sign-in waiting under `state` (once: the first replica to ask gets it).
    pub async fn take_sign_in<T: serde::de::DeserializeOwned>(
        &self,
        state: &str,
    ) -> Result<Option<T>, VaultError> {
        let key = sign_in_key(state);
        let text: Option<String> = (self.store)
            .call("taking a sign-in", |mut c| async move {
                redis::cmd("GETDEL").arg(key).query_async(&mut c).await
            })
            .await?;
        let Some(text) = text else { return Ok(None) };
        let what = "a sign-in waiting for its callback".to_string();
        self.open(Purpose::Grant, &context(&["sign-in", state]), what, &text)
    }

    /// Changes at once for this replica's writes, and within about a second of another's: the
    /// store's counter is read at most every [`STAMP_EVERY`], by a task of its own (the caller
    /// gets the number as it is now; a store down leaves it as it was).
    pub fn generation(self: &Arc<Self>) -> u64 {
        let due = self.looked.lock().elapsed() >= STAMP_EVERY;
        if due && !self.looking.swap(true, Ordering::AcqRel) {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    *self.looked.lock() = Instant::now();
                    let me = self.clone();
                    runtime.spawn(async move {
                        let read: Result<Option<u64>, _> = (me.store)
                            .call("reading the vault's generation", |mut c| async move {
                                c.get(GENERATION).await
                            })
                            .await;
                        if let Ok(now) = read {
                            let now = now.unwrap_or(0);
                            if me.seen.swap(now, Ordering::Relaxed) != now {
                                me.generation.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        me.looking.store(false, Ordering::Release);
                    });
                }
                Err(_) => self.looking.store(false, Ordering::Release),
            }
        }
        self.generation.load(Ordering::Relaxed)
    }
}
