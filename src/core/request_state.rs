//! mcpmux's own `requestState`, handed to a modern host when a session-era upstream asks it for
//! input mid-call: an HMAC-SHA256-sealed token naming the parked call, bound to the caller's
//! credentials, to the originating request (method plus a digest of its salient parameters) and
//! to an expiry. Anything that fails verification is refused.

use crate::protocol::RawObject;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::{digest, hmac, rand as ring_rand};
use serde::{Deserialize, Serialize};

/// Marks a `requestState` mcpmux made (any other is an upstream's, passed through untouched).
pub const PREFIX: &str = "mcpmux1.";

/// What a sealed state asserts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateClaims {
    /// The parked call's key.
    pub parked: String,
    /// Digest of the caller's credentials.
    pub principal: String,
    /// Digest of the originating request.
    pub request: String,
    /// Milliseconds since the Unix epoch after which the state is void.
    pub expires_ms: u64,
}

/// Why a state was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("requestState is malformed")]
    Malformed,
    #[error("requestState failed verification")]
    Forged,
    #[error("requestState has expired")]
    Expired,
    #[error("requestState was issued to another caller")]
    OtherPrincipal,
    #[error("requestState belongs to a different request")]
    OtherRequest,
}

/// The key states are sealed with: random per process, so a state only means something to the
/// process holding the parked call.
pub struct StateKey(hmac::Key);

impl StateKey {
    pub fn random() -> Self {
        let rng = ring_rand::SystemRandom::new();
        match hmac::Key::generate(hmac::HMAC_SHA256, &rng) {
            Ok(key) => StateKey(key),
            // The system RNG failing is not recoverable in a meaningful way; fall back to
            // rand's generator rather than refusing to start.
            Err(_) => {
                let bytes: [u8; 32] = rand::random();
                StateKey(hmac::Key::new(hmac::HMAC_SHA256, &bytes))
            }
        }
    }

    /// Seal claims into an opaque string.
    pub fn seal(&self, claims: &StateClaims) -> String {
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).unwrap_or_default());
        let tag = hmac::sign(&self.0, payload.as_bytes());
        format!("{PREFIX}{payload}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    }

    /// Verify a state against the caller and the request presenting it.
    pub fn open(
        &self,
        state: &str,
        principal: &str,
        request: &str,
        now_ms: u64,
    ) -> Result<StateClaims, StateError> {
        let body = state.strip_prefix(PREFIX).ok_or(StateError::Malformed)?;
        let (payload, tag) = body.split_once('.').ok_or(StateError::Malformed)?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| StateError::Malformed)?;
        hmac::verify(&self.0, payload.as_bytes(), &tag).map_err(|_| StateError::Forged)?;
        let bytes = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| StateError::Malformed)?;
        let claims: StateClaims = serde_json::from_slice(&bytes).map_err(|_| StateError::Malformed)?;
        if now_ms > claims.expires_ms {
            return Err(StateError::Expired);
        }
        if claims.principal != principal {
            return Err(StateError::OtherPrincipal);
        }
        if claims.request != request {
            return Err(StateError::OtherRequest);
        }
        Ok(claims)
    }
}

fn hex_digest(parts: &[&[u8]]) -> String {
    let mut ctx = digest::Context::new(&digest::SHA256);
    for part in parts {
        ctx.update(&(part.len() as u64).to_be_bytes());
        ctx.update(part);
    }
    ctx.finish().as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Digest of the credentials a request came with (empty when it had none).
pub fn principal_digest(authorization: Option<&[u8]>) -> String {
    hex_digest(&[b"principal", authorization.unwrap_or_default()])
}

/// Digest of what makes a request the same request on retry: its method, the name or URI it
/// targets and its arguments (object keys in sorted order, so re-serialising does not matter).
pub fn request_digest(method: &str, params: &RawObject) -> String {
    let target = params
        .get_str("name")
        .or_else(|| params.get_str("uri"))
        .unwrap_or_default();
    let arguments = params
        .get("arguments")
        .and_then(|a| serde_json::from_str::<serde_json::Value>(a.get()).ok())
        .map(|v| canonical(&v))
        .unwrap_or_default();
    hex_digest(&[method.as_bytes(), target.as_bytes(), arguments.as_bytes()])
}

/// JSON with object keys sorted at every level.
fn canonical(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let members: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", serde_json::Value::String(k.clone()), canonical(&map[k])))
                .collect();
            format!("{{{}}}", members.join(","))
        }
        serde_json::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", items.join(","))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> StateClaims {
        StateClaims {
            parked: "p1".into(),
            principal: principal_digest(Some(b"Bearer a")),
            request: "r".into(),
            expires_ms: 1_000,
        }
    }

    #[test]
    fn a_sealed_state_opens_only_for_its_caller_request_and_lifetime() {
        let key = StateKey::random();
        let c = claims();
        let state = key.seal(&c);
        assert!(state.starts_with(PREFIX));
        assert_eq!(key.open(&state, &c.principal, "r", 999), Ok(c.clone()));
        assert_eq!(
            key.open(&state, &c.principal, "r", 1_001),
            Err(StateError::Expired)
        );
        let other = principal_digest(Some(b"Bearer b"));
        assert_eq!(key.open(&state, &other, "r", 0), Err(StateError::OtherPrincipal));
        assert_eq!(
            key.open(&state, &c.principal, "x", 0),
            Err(StateError::OtherRequest)
        );
        assert_eq!(
            StateKey::random().open(&state, &c.principal, "r", 0),
            Err(StateError::Forged)
        );
    }

    #[test]
    fn tampering_is_detected() {
        let key = StateKey::random();
        let c = claims();
        let state = key.seal(&c);
        let (payload, tag) = state.strip_prefix(PREFIX).unwrap().split_once('.').unwrap();
        let mut forged = claims();
        forged.expires_ms = u64::MAX;
        let forged_payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).unwrap());
        assert_ne!(payload, forged_payload);
        let tampered = format!("{PREFIX}{forged_payload}.{tag}");
        assert_eq!(key.open(&tampered, &c.principal, "r", 0), Err(StateError::Forged));
        assert_eq!(
            key.open("mcpmux1.nodot", &c.principal, "r", 0),
            Err(StateError::Malformed)
        );
        assert_eq!(
            key.open("other", &c.principal, "r", 0),
            Err(StateError::Malformed)
        );
    }

    #[test]
    fn request_digests_ignore_key_order_and_the_retry_fields() {
        let a = RawObject::parse(r#"{"name":"t","arguments":{"x":1,"y":[{"b":2,"a":1}]}}"#).unwrap();
        let b = RawObject::parse(
            r#"{"arguments":{"y":[{"a":1,"b":2}],"x":1},"name":"t","requestState":"s","inputResponses":{}}"#,
        )
        .unwrap();
        assert_eq!(request_digest("tools/call", &a), request_digest("tools/call", &b));
        let c = RawObject::parse(r#"{"name":"t","arguments":{"x":2}}"#).unwrap();
        assert_ne!(request_digest("tools/call", &a), request_digest("tools/call", &c));
        assert_ne!(
            request_digest("tools/call", &a),
            request_digest("prompts/get", &a)
        );
    }
}
