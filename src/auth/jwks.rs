//! The authorization server's signing keys: `jwks_uri` (configured, or discovered from the
//! issuer's metadata: RFC 8414, then OpenID Connect discovery), cached, and fetched again when
//! a token names a key the cache does not have (at most once per [`REFETCH_EVERY`]).

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, DecodingKey};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The least time between two fetches of the key set (a token with an unknown `kid` cannot make
/// the gateway hammer the authorization server).
pub const REFETCH_EVERY: Duration = Duration::from_secs(10);
/// The largest metadata or key set document read.
const MAX_DOCUMENT: usize = 1 << 20;
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// One usable key of the set.
#[derive(Clone)]
pub struct SigningKey {
    pub kid: Option<String>,
    /// The key's own `alg`, when it names one.
    pub alg: Option<String>,
    pub key: DecodingKey,
}

struct Cached {
    keys: Arc<Vec<SigningKey>>,
    fetched: Option<Instant>,
    jwks_uri: Option<String>,
    /// Why the last fetch failed, while it is the last one.
    failed: Option<String>,
}

/// Why no key can check a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// The set holds no key for the token's `kid` and `alg`: the token is not valid here.
    NoMatch,
    /// The set cannot be fetched (the authorization server is down or misconfigured): no token
    /// can be checked now, which says nothing about this one.
    Unavailable(String),
}

/// The cached key set of one issuer.
pub struct Jwks {
    issuer: String,
    configured_uri: Option<String>,
    client: reqwest::Client,
    cached: tokio::sync::Mutex<Cached>,
    refetch_every: Duration,
}

impl Jwks {
    pub fn new(issuer: String, jwks_uri: Option<String>) -> Self {
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::limited(3))
            .build()
            .unwrap_or_default();
        Jwks {
            issuer,
            configured_uri: jwks_uri.clone(),
            client,
            cached: tokio::sync::Mutex::new(Cached {
                keys: Arc::new(Vec::new()),
                fetched: None,
                jwks_uri,
                failed: None,
            }),
            refetch_every: REFETCH_EVERY,
        }
    }

    /// The same set, fetched again at most once per `interval` (tests).
    pub fn refetching_every(mut self, interval: Duration) -> Self {
        self.refetch_every = interval;
        self
    }

    /// The keys that may have signed a token with `kid` and `alg`: from the cache, or after one
    /// fetch when the cache has none (rate-limited).
    pub async fn keys_for(&self, kid: Option<&str>, alg: Algorithm) -> Result<Vec<SigningKey>, KeyError> {
        let mut cached = self.cached.lock().await;
        let found = matching(&cached.keys, kid, alg);
        if !found.is_empty() {
            return Ok(found);
        }
        if cached.fetched.is_some_and(|at| at.elapsed() < self.refetch_every) {
            return Err(match &cached.failed {
                Some(why) => KeyError::Unavailable(why.clone()),
                None => KeyError::NoMatch,
            });
        }
        cached.fetched = Some(Instant::now());
        let fetched = match &cached.jwks_uri {
            Some(uri) => self.fetch_keys(uri).await.map(|keys| (uri.clone(), keys)),
            None => match self.discover().await {
                Ok(uri) => self.fetch_keys(&uri).await.map(|keys| (uri, keys)),
                Err(why) => Err(why),
            },
        };
        match fetched {
            Ok((uri, keys)) => {
                tracing::info!(jwks_uri = %uri, keys = keys.len(), "fetched the authorization server's signing keys");
                cached.keys = Arc::new(keys);
                cached.jwks_uri = Some(uri);
                cached.failed = None;
            }
            Err(why) => {
                tracing::warn!(issuer = %self.issuer, "cannot fetch the signing keys: {why}");
                cached.jwks_uri = self.configured_uri.clone(); // discover again next time
                cached.failed = Some(why.clone());
                return Err(KeyError::Unavailable(why));
            }
        }
        let found = matching(&cached.keys, kid, alg);
        if found.is_empty() {
            Err(KeyError::NoMatch)
        } else {
            Ok(found)
        }
    }

    /// `jwks_uri` from the issuer's metadata: RFC 8414 (the well-known path inserted before the
    /// issuer's path), then OpenID Connect discovery (appended).
    async fn discover(&self) -> Result<String, String> {
        let issuer = self.issuer.trim_end_matches('/');
        let parsed = url::Url::parse(issuer).map_err(|e| format!("issuer: {e}"))?;
        let origin = parsed.origin().ascii_serialization();
        let path = parsed.path().trim_end_matches('/');
        let candidates = [
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{issuer}/.well-known/openid-configuration"),
        ];
        let mut last = String::new();
        for url in candidates {
            match self.get_json(&url).await {
                Ok(doc) => {
                    let named = doc.get("issuer").and_then(|v| v.as_str());
                    if named.map(|i| i.trim_end_matches('/')) != Some(issuer) {
                        last = format!("{url} names issuer {named:?}, not {:?}", self.issuer);
                        continue;
                    }
                    match doc.get("jwks_uri").and_then(|v| v.as_str()) {
                        Some(uri) => return Ok(uri.to_string()),
                        None => last = format!("{url} has no jwks_uri"),
                    }
                }
                Err(why) => last = why,
            }
        }
        Err(format!("cannot discover the issuer's jwks_uri: {last}"))
    }

    async fn fetch_keys(&self, uri: &str) -> Result<Vec<SigningKey>, String> {
        let doc = self.get_json(uri).await?;
        let keys = (doc.get("keys").and_then(|k| k.as_array())).ok_or("the key set has no \"keys\" array")?;
        Ok(keys.iter().filter_map(signing_key).collect())
    }

    async fn get_json(&self, url: &str) -> Result<serde_json::Value, String> {
        let response = (self
            .client
            .get(url)
            .header("accept", "application/json")
            .send()
            .await)
            .map_err(|e| format!("GET {url}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("GET {url}: HTTP {}", response.status()));
        }
        let body = response.bytes().await.map_err(|e| format!("GET {url}: {e}"))?;
        if body.len() > MAX_DOCUMENT {
            return Err(format!("GET {url}: the document is over {MAX_DOCUMENT} bytes"));
        }
        serde_json::from_slice(&body).map_err(|e| format!("GET {url}: not JSON: {e}"))
    }
}

/// A key of the set mcpmux can verify with (asymmetric, for signatures); others are skipped.
fn signing_key(value: &serde_json::Value) -> Option<SigningKey> {
    if value
        .get("use")
        .and_then(|u| u.as_str())
        .is_some_and(|u| u != "sig")
    {
        return None;
    }
    if value.get("kty").and_then(|k| k.as_str()) == Some("oct") {
        return None;
    }
    let jwk: Jwk = serde_json::from_value(value.clone()).ok()?;
    let key = DecodingKey::from_jwk(&jwk).ok()?;
    Some(SigningKey {
        kid: jwk.common.key_id.clone(),
        alg: value.get("alg").and_then(|a| a.as_str()).map(str::to_string),
        key,
    })
}

fn matching(keys: &[SigningKey], kid: Option<&str>, alg: Algorithm) -> Vec<SigningKey> {
    let alg_name = format!("{alg:?}");
    keys.iter()
        .filter(|k| kid.is_none() || k.kid.as_deref() == kid)
        .filter(|k| k.alg.as_deref().is_none_or(|a| a == alg_name))
        .cloned()
        .collect()
}
