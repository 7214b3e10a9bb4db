//! mcpmux's own `requestState`, handed to a modern host when a session-era upstream asks it for
//! input mid-call: a token sealed with the cluster key (`crate::seal`, so any replica can open
//! it) naming the parked call, bound to the caller's credentials, to the originating request
//! (method plus a digest of its salient parameters) and to an expiry. Anything that fails to open
//! or to match is refused.

use crate::protocol::RawObject;
use crate::seal::{Purpose, SealError, Sealer};
use ring::digest;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Marks a `requestState` mcpmux made (any other is an upstream's, passed through untouched).
pub const PREFIX: &str = "mcpmux2.";
/// The prefix of the states of mcpmux before sealing with the cluster key (HMAC under a key of
/// the process): still mcpmux's, so refused, never passed to an upstream.
const RETIRED_PREFIX: &str = "mcpmux1.";

/// Whether a `requestState` is one mcpmux made (now or in a retired format).
pub fn is_ours(state: &str) -> bool {
    state.starts_with(PREFIX) || state.starts_with(RETIRED_PREFIX)
}

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
    /// The `advertise` URL of the replica the call is parked on: a retry reaching another
    /// replica is forwarded there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<String>,
}

/// Why a state was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("requestState is malformed")]
    Malformed,
    #[error("requestState failed verification")]
    Forged,
    #[error("requestState was sealed under a key this gateway does not hold")]
    UnknownKey,
    #[error("requestState has expired")]
    Expired,
    #[error("requestState was issued to another caller")]
    OtherPrincipal,
    #[error("requestState belongs to a different request")]
    OtherRequest,
}

/// Seals and opens states with the gateway's sealer (the `[cluster]` key, or the process's own).
pub struct StateSealer(Arc<Sealer>);

impl StateSealer {
    pub fn new(sealer: Arc<Sealer>) -> Self {
        StateSealer(sealer)
    }

    /// Seal claims into an opaque string.
    pub fn seal(&self, claims: &StateClaims) -> String {
        let claims = serde_json::to_vec(claims).unwrap_or_default();
        format!("{PREFIX}{}", self.0.seal(Purpose::RequestState, b"", &claims))
    }

    /// Open a state and check it against the caller and the request presenting it.
    pub fn open(
        &self,
        state: &str,
        principal: &str,
        request: &str,
        now_ms: u64,
    ) -> Result<StateClaims, StateError> {
        let token = state.strip_prefix(PREFIX).ok_or(StateError::Malformed)?;
        let bytes = self
            .0
            .open(Purpose::RequestState, b"", token)
            .map_err(|err| match err {
                SealError::Malformed => StateError::Malformed,
                SealError::UnknownKey => StateError::UnknownKey,
                SealError::Forged => StateError::Forged,
            })?;
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
    use crate::seal::ClusterKey;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    use base64::Engine;

    fn claims() -> StateClaims {
        StateClaims {
            home: Some("http://10.0.0.1:8080".into()),
            parked: "p1".into(),
            principal: principal_digest(Some(b"Bearer a")),
            request: "r".into(),
            expires_ms: 1_000,
        }
    }

    fn key(byte: u8) -> ClusterKey {
        ClusterKey::parse(&STANDARD.encode([byte; 32])).unwrap()
    }

    fn sealer(key: &ClusterKey, previous: &[ClusterKey]) -> StateSealer {
        StateSealer::new(Arc::new(Sealer::new(key, previous)))
    }

    #[test]
    fn a_sealed_state_opens_only_for_its_caller_request_and_lifetime() {
        let key = StateSealer::new(Arc::new(Sealer::random()));
        let c = claims();
        let state = key.seal(&c);
        assert!(state.starts_with(PREFIX) && is_ours(&state));
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
            StateSealer::new(Arc::new(Sealer::random())).open(&state, &c.principal, "r", 0),
            Err(StateError::UnknownKey)
        );
    }

    #[test]
    fn any_replica_with_the_cluster_key_opens_a_state_and_rotation_keeps_it_open() {
        let c = claims();
        let state = sealer(&key(1), &[]).seal(&c);
        assert_eq!(
            sealer(&key(1), &[]).open(&state, &c.principal, "r", 0),
            Ok(c.clone())
        );
        assert_eq!(
            sealer(&key(2), &[key(1)]).open(&state, &c.principal, "r", 0),
            Ok(c.clone())
        );
        assert_eq!(
            sealer(&key(2), &[]).open(&state, &c.principal, "r", 0),
            Err(StateError::UnknownKey)
        );
    }

    #[test]
    fn tampering_is_detected() {
        let key = sealer(&key(1), &[]);
        let c = claims();
        let state = key.seal(&c);
        let token = state.strip_prefix(PREFIX).unwrap();
        let mut bytes = URL_SAFE_NO_PAD.decode(token).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let tampered = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(&bytes));
        assert_eq!(key.open(&tampered, &c.principal, "r", 0), Err(StateError::Forged));
        let truncated = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(&bytes[..last - 3]));
        assert_eq!(
            key.open(&truncated, &c.principal, "r", 0),
            Err(StateError::Forged)
        );
        let cut_text = &state[..state.len() - 4];
        assert!(key.open(cut_text, &c.principal, "r", 0).is_err());
        // A cursor sealed under the same key is not a state.
        let cursor = Sealer::new(&super::tests::key(1), &[]).seal(Purpose::Cursor, b"", b"{}");
        assert_eq!(
            key.open(&format!("{PREFIX}{cursor}"), &c.principal, "r", 0),
            Err(StateError::Forged)
        );
        assert_eq!(
            key.open("mcpmux2.no.dots", &c.principal, "r", 0),
            Err(StateError::Malformed)
        );
        assert_eq!(
            key.open("other", &c.principal, "r", 0),
            Err(StateError::Malformed)
        );
        // A state of the retired HMAC format is mcpmux's (never an upstream's) and refused.
        let retired = "mcpmux1.eyJwYXJrZWQiOiJwMSJ9.c2ln";
        assert!(is_ours(retired) && !is_ours("upstream-state"));
        assert_eq!(
            key.open(retired, &c.principal, "r", 0),
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
