//! The client of the shared store (`[cluster] store`, Redis or Valkey) through which replicas
//! share what one process alone cannot: rate limit buckets ([`gcra`]) and sealed grants (the
//! vault's Redis backend, credentials/vault/redis.rs).
//!
//! One [`SharedStore`] per use holds one multiplexed connection, made on the first operation
//! (a store down at start is no error then) and made again on its own after a failure. Every
//! operation is bounded by [`OP_TIMEOUT`]; its error names the store with the password hidden
//! and says what failed. While the store is down, one operation at a time, at most every
//! [`PROBE_EVERY`], tries it again; the others fail at once (a store that drops packets would
//! otherwise hold every request for the whole timeout). The store knows nothing of config or policy: it takes the URL as a
//! string.

pub mod gcra;
#[cfg(test)]
pub(crate) mod test_server;
#[cfg(test)]
mod tests;

use crate::util::secret_url::SecretUrl;
use parking_lot::Mutex;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

/// The most one operation (connecting included) may take before it counts as failed.
pub const OP_TIMEOUT: Duration = Duration::from_secs(2);
/// While the store is down, how often an operation tries it again.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);

/// An operation the store did not do.
#[derive(Clone, Debug, thiserror::Error)]
#[error("shared store {store}: {what} failed: {why}")]
pub struct StoreError {
    /// The store's URL, password hidden.
    pub store: String,
    pub what: String,
    pub why: String,
}

/// What the last operation found (for `/status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// Nothing asked yet.
    Unknown,
    Up,
    Down,
}

/// What a change of [`Health`] was, for the caller to log once per outage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// As before.
    Same,
    /// Was up (or unknown), failed now: the first failure of an outage.
    WentDown,
    /// Was down, answered now.
    CameBack,
}

const UNKNOWN: u8 = 0;
const UP: u8 = 1;
const DOWN: u8 = 2;

/// A connection to the shared store, made when first needed.
pub struct SharedStore {
    url: SecretUrl,
    client: redis::Client,
    connection: OnceCell<ConnectionManager>,
    health: AtomicU8,
    /// When an operation last failed.
    failed_at: Mutex<Option<Instant>>,
    /// An operation is trying the store while it is down.
    probing: AtomicBool,
}

impl std::fmt::Debug for SharedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedStore").field("url", &self.url).finish()
    }
}

impl SharedStore {
    /// A client for the store at `url` (nothing is connected yet); an error when the URL is
    /// not one the client takes.
    pub fn new(url: &str) -> Result<SharedStore, StoreError> {
        let url = SecretUrl::new(url);
        let client = redis::Client::open(url.expose()).map_err(|e| StoreError {
            store: url.redacted(),
            what: "reading its URL".into(),
            why: e.to_string(),
        })?;
        Ok(SharedStore {
            url,
            client,
            connection: OnceCell::new(),
            health: AtomicU8::new(UNKNOWN),
            failed_at: Mutex::new(None),
            probing: AtomicBool::new(false),
        })
    }

    /// The store's URL with its password hidden.
    pub fn describe(&self) -> String {
        self.url.redacted()
    }

    /// What the last operation found.
    pub fn health(&self) -> Health {
        match self.health.load(Ordering::Relaxed) {
            UP => Health::Up,
            DOWN => Health::Down,
            _ => Health::Unknown,
        }
    }

    fn error(&self, what: &str, why: impl std::fmt::Display) -> StoreError {
        StoreError {
            store: self.describe(),
            what: what.into(),
            why: why.to_string(),
        }
    }

    async fn connection(&self) -> Result<ConnectionManager, StoreError> {
        let made = self.connection.get_or_try_init(|| async {
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(OP_TIMEOUT))
                .set_response_timeout(Some(OP_TIMEOUT))
                .set_number_of_retries(2)
                .set_max_delay(Duration::from_millis(500));
            ConnectionManager::new_lazy_with_config(self.client.clone(), config)
        });
        made.await.cloned().map_err(|e| self.error("connecting", e))
    }

    /// Run `work` on the connection, bounded by [`OP_TIMEOUT`]; `what` names it in the error.
    /// Returns the health change it made alongside.
    pub async fn run<T, F, Fut>(&self, what: &str, work: F) -> (Result<T, StoreError>, Transition)
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let mut probe = None;
        if self.health.load(Ordering::Relaxed) == DOWN {
            let recent = (*self.failed_at.lock()).is_some_and(|at| at.elapsed() < PROBE_EVERY);
            if recent || self.probing.swap(true, Ordering::AcqRel) {
                let why = "it is down (tried again at most every second)";
                return (Err(self.error(what, why)), Transition::Same);
            }
            // Cleared however this ends (a caller may drop the future mid-way).
            probe = Some(Probing(&self.probing));
        }
        let result = self.attempt(what, work).await;
        drop(probe);
        if result.is_err() {
            *self.failed_at.lock() = Some(Instant::now());
        }
        let now = if result.is_ok() { UP } else { DOWN };
        let before = self.health.swap(now, Ordering::Relaxed);
        let transition = match (before, now) {
            (UP | UNKNOWN, DOWN) => Transition::WentDown,
            (DOWN, UP) => Transition::CameBack,
            _ => Transition::Same,
        };
        (result, transition)
    }

    async fn attempt<T, F, Fut>(&self, what: &str, work: F) -> Result<T, StoreError>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        match self.connection().await {
            Ok(connection) => match tokio::time::timeout(OP_TIMEOUT, work(connection)).await {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(e)) => Err(self.error(what, e)),
                Err(_) => Err(self.error(what, format!("no answer within {OP_TIMEOUT:?}"))),
            },
            Err(e) => Err(e),
        }
    }

    /// [`SharedStore::run`] for a caller with no use for the transition: it is logged here
    /// (a warning at the first failure of an outage, a note when the store answers again).
    pub async fn call<T, F, Fut>(&self, what: &str, work: F) -> Result<T, StoreError>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let (result, transition) = self.run(what, work).await;
        log_transition(&result, transition);
        result
    }
}

/// The one probe of a store that is down, under way.
struct Probing<'a>(&'a AtomicBool);

impl Drop for Probing<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Log a change of health: a warning when the store went down, a note when it came back.
pub fn log_transition<T>(result: &Result<T, StoreError>, transition: Transition) {
    match (transition, result) {
        (Transition::WentDown, Err(e)) => tracing::warn!("{e} (the shared store is down)"),
        (Transition::CameBack, _) => tracing::info!("the shared store answers again"),
        _ => {}
    }
}

/// Lowercase hex of the SHA-256 of `parts`, each length-prefixed (so no two lists of parts
/// hash alike): how keys name principals and upstreams without showing them.
pub fn hashed(parts: &[&str]) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for part in parts {
        context.update(&(part.len() as u64).to_be_bytes());
        context.update(part.as_bytes());
    }
    let digest = context.finish();
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}
