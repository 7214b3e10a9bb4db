//! Opaque access tokens checked at the authorization server (RFC 7662): `active`, `exp`/`nbf`
//! with the JWT skew, `iss` and `aud` when the answer names them; the answer cached (by the
//! token's SHA-256, never the token) no longer than the token's lifetime nor
//! `auth.introspection.cache_secs` (60 s by default; 0 asks every time).

use super::challenge::Failure;
use super::jwt::LEEWAY_SECS;
use super::{InboundToken, Principal};
use crate::config::Introspection;
use parking_lot::Mutex;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long an answer without `exp` counts as valid (the configured cache bounds it further).
const LIFETIME_WITHOUT_EXP: Duration = Duration::from_secs(60);
/// The most answers kept; past it the cache starts over.
const CACHE_ENTRIES: usize = 10_000;
const TIMEOUT: Duration = Duration::from_secs(10);
const MAX_ANSWER: usize = 1 << 20;

/// Checks opaque tokens at one introspection endpoint.
pub struct Introspector {
    config: Introspection,
    issuer: Option<String>,
    audience: Vec<String>,
    groups_claim: String,
    client: reqwest::Client,
    cache: Mutex<HashMap<[u8; 32], (Principal, Instant)>>,
}

impl Introspector {
    pub fn new(
        config: Introspection,
        issuer: Option<String>,
        audience: Vec<String>,
        groups_claim: String,
    ) -> Self {
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Introspector {
            config,
            issuer,
            audience,
            groups_claim,
            client,
            cache: Mutex::new(HashMap::new()),
        }
    }

    pub async fn verify(&self, token: &str) -> Result<Principal, Failure> {
        self.verify_for(token, None).await
    }

    /// [`Introspector::verify`], with `also` accepted as an audience too (a profile's resource
    /// URL, on that profile's paths); the answer is cached for the token with that audience.
    pub async fn verify_for(&self, token: &str, also: Option<&str>) -> Result<Principal, Failure> {
        let mut context = ring::digest::Context::new(&ring::digest::SHA256);
        context.update(token.as_bytes());
        if let Some(also) = also {
            context.update(b"\0");
            context.update(also.as_bytes());
        }
        let mut key = [0u8; 32];
        key.copy_from_slice(context.finish().as_ref());
        if let Some((principal, until)) = self.cache.lock().get(&key) {
            if Instant::now() < *until {
                return Ok(principal.clone());
            }
        }
        let answer = self.ask(token).await?;
        let (principal, lifetime) = self.judge(token, &answer, also)?;
        let mut cache = self.cache.lock();
        if cache.len() >= CACHE_ENTRIES {
            cache.retain(|_, (_, until)| Instant::now() < *until);
            if cache.len() >= CACHE_ENTRIES {
                cache.clear();
            }
        }
        let keep = lifetime.min(self.config.cache_for);
        if !keep.is_zero() {
            cache.insert(key, (principal.clone(), Instant::now() + keep));
        }
        Ok(principal)
    }

    async fn ask(&self, token: &str) -> Result<Map<String, Value>, Failure> {
        let endpoint = &self.config.endpoint;
        let unavailable = |why: String| Failure::Unavailable(format!("introspection at {endpoint}: {why}"));
        let body = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .append_pair("token_type_hint", "access_token")
            .finish();
        let response = self
            .client
            .post(endpoint)
            .basic_auth(&self.config.client_id, Some(self.config.client_secret.expose()))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| unavailable(e.without_url().to_string()))?;
        if !response.status().is_success() {
            return Err(unavailable(format!("HTTP {}", response.status())));
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|e| unavailable(e.without_url().to_string()))?;
        if bytes.len() > MAX_ANSWER {
            return Err(unavailable("the answer is too large".into()));
        }
        serde_json::from_slice(&bytes).map_err(|e| unavailable(format!("not a JSON object: {e}")))
    }

    /// The principal of an introspection answer, and how long it may be reused.
    fn judge(
        &self,
        token: &str,
        answer: &Map<String, Value>,
        also: Option<&str>,
    ) -> Result<(Principal, Duration), Failure> {
        let invalid = |why: &str| Failure::InvalidToken(why.to_string());
        if answer.get("active") != Some(&Value::Bool(true)) {
            return Err(invalid("the token is not active"));
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let number = |key: &str| answer.get(key).and_then(Value::as_u64);
        if number("exp").is_some_and(|exp| exp + LEEWAY_SECS < now) {
            return Err(invalid("the token has expired"));
        }
        if number("nbf").is_some_and(|nbf| nbf > now + LEEWAY_SECS) {
            return Err(invalid("the token is not valid yet (nbf)"));
        }
        let text = |key: &str| answer.get(key).and_then(Value::as_str).map(str::to_string);
        if let (Some(expected), Some(iss)) = (&self.issuer, text("iss")) {
            if iss.trim_end_matches('/') != expected.trim_end_matches('/') {
                return Err(invalid("the token's issuer (iss) is not accepted"));
            }
        }
        if let Some(aud) = answer.get("aud") {
            let accepted = |a: &String| self.audience.contains(a) || also == Some(a.as_str());
            if !super::jwt::strings(aud).iter().any(accepted) {
                return Err(invalid("the token's audience (aud) is not this resource"));
            }
        }
        let name = (text("sub")
            .or_else(|| text("username"))
            .or_else(|| text("client_id")))
        .filter(|n| !n.is_empty())
        .ok_or_else(|| invalid("the introspection answer names no subject"))?;
        let scopes = answer.get("scope").map(super::jwt::strings).unwrap_or_default();
        let principal = Principal {
            name,
            issuer: text("iss")
                .or_else(|| self.issuer.clone())
                .or_else(|| Some(self.config.endpoint.clone())),
            client_id: text("client_id"),
            groups: answer
                .get(&self.groups_claim)
                .map(super::jwt::strings)
                .unwrap_or_default(),
            scopes,
            token: Some(InboundToken::new(token, number("exp"))),
            claims: super::jwt::string_claims(answer),
            credential: super::Credential::Token,
            certificate: None,
        };
        let lifetime = match number("exp") {
            Some(exp) => Duration::from_secs(exp.saturating_sub(now)),
            None => LIFETIME_WITHOUT_EXP,
        };
        Ok((principal, lifetime))
    }
}

#[cfg(test)]
#[path = "introspection_tests.rs"]
mod tests;
