//! Sealed session ids: a session-era `Mcp-Session-Id` is the session's movable state, its owner,
//! its home (the replica's `advertise` URL and a boot id drawn when the process starts) and the
//! time it was issued, sealed with the cluster key ([`Purpose::SessionId`]). Any replica with the
//! key opens it and can take the session over; nothing in it is trusted unless it opens.

use super::state::SessionState;
use crate::seal::{Purpose, SealError, Sealer};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The longest `clientInfo` string kept in a sealed id (the id travels in a header on every
/// request, and balancers cap header lines: nginx at 8 KiB by default).
const CLIENT_INFO_TEXT: usize = 64;
/// The `clientInfo` members kept in a sealed id (icons and the rest are not).
const CLIENT_INFO_KEPT: [&str; 3] = ["name", "title", "version"];

/// Where a session was opened: the replica and the process run that issued its id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Home {
    /// The replica's `[cluster] advertise` URL (default `http://{gateway.listen}`).
    #[serde(rename = "u")]
    pub url: String,
    /// Random per process start: a restarted replica is another home.
    #[serde(rename = "b")]
    pub boot: String,
}

/// What a sealed session id asserts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionClaims {
    #[serde(rename = "s")]
    pub state: SessionState,
    /// `Principal::owner()` of who opened it; none without authentication.
    #[serde(rename = "o", default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(rename = "h")]
    pub home: Home,
    /// Milliseconds since the Unix epoch when the id was issued.
    #[serde(rename = "t")]
    pub issued_ms: u64,
}

/// Why a session id does not open here: every one is answered as an unknown session (404).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdRefusal {
    #[error("not a session id this gateway can open: {0}")]
    Sealed(SealError),
    #[error("a sealed session id with unreadable claims")]
    Claims,
    #[error("the session belongs to another principal")]
    OtherPrincipal,
    #[error("the session was opened by this process and is gone (deleted or reaped)")]
    HomeIsHere,
}

/// Issues and opens this process's sealed session ids.
pub struct SessionIds {
    sealer: Arc<Sealer>,
    home: Home,
}

impl SessionIds {
    /// Ids sealed by `sealer`, homed at `advertise` with a fresh boot id.
    pub fn new(sealer: Arc<Sealer>, advertise: String) -> SessionIds {
        SessionIds {
            sealer,
            home: Home {
                url: advertise,
                boot: crate::util::ids::random_hex(16),
            },
        }
    }

    /// This process's home.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// A new session id for `state`, opened by `owner`: URL-safe visible ASCII.
    pub fn issue(&self, state: &SessionState, owner: Option<&str>) -> String {
        let claims = SessionClaims {
            state: SessionState {
                client_info: state.client_info.as_ref().map(pared_client_info),
                ..state.clone()
            },
            owner: owner.map(str::to_string),
            home: self.home.clone(),
            issued_ms: now_ms(),
        };
        let plaintext = serde_json::to_vec(&claims).unwrap_or_default();
        self.sealer.seal(Purpose::SessionId, b"", &plaintext)
    }

    /// Open a session id that is not in this process's registry, for a request by `owner`:
    /// its claims when another process (another replica, or this one before a restart) issued
    /// it to the same owner.
    pub fn open(&self, id: &str, owner: Option<&str>) -> Result<SessionClaims, IdRefusal> {
        let plaintext = (self.sealer)
            .open(Purpose::SessionId, b"", id)
            .map_err(IdRefusal::Sealed)?;
        let claims: SessionClaims = serde_json::from_slice(&plaintext).map_err(|_| IdRefusal::Claims)?;
        if claims.owner.as_deref() != owner {
            return Err(IdRefusal::OtherPrincipal);
        }
        if claims.home.boot == self.home.boot {
            return Err(IdRefusal::HomeIsHere);
        }
        Ok(claims)
    }
}

/// The `clientInfo` members a sealed id keeps (short strings only).
fn pared_client_info(info: &serde_json::Value) -> serde_json::Value {
    let kept: serde_json::Map<String, serde_json::Value> = CLIENT_INFO_KEPT
        .iter()
        .filter_map(|key| {
            let text = info.get(*key)?.as_str()?;
            let cut: String = text.chars().take(CLIENT_INFO_TEXT).collect();
            Some((key.to_string(), cut.into()))
        })
        .collect();
    serde_json::Value::Object(kept)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ClientCaps;
    use crate::seal::ClusterKey;

    fn sealer(byte: u8) -> Arc<Sealer> {
        use base64::engine::general_purpose::STANDARD;
        use base64::Engine;
        let key = ClusterKey::parse(&STANDARD.encode([byte; 32])).unwrap();
        Arc::new(Sealer::new(&key, &[]))
    }

    fn state() -> SessionState {
        let mut state = SessionState::new("2025-11-25", ClientCaps::ALL).with_client_info(Some(
            serde_json::json!({"name": "inspector", "version": "2.12.0", "icons": [{"src": "data:x"}]}),
        ));
        state.log_level = Some(2);
        state
    }

    const ALICE: &str = "key\u{0}alice";

    #[test]
    fn claims_round_trip_through_another_replica_with_the_key() {
        let home = SessionIds::new(sealer(1), "http://10.0.0.1:8080".into());
        let id = home.issue(&state(), Some(ALICE));
        assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{id}");
        assert!(id.len() < 1024, "{} characters", id.len());
        assert_ne!(id, home.issue(&state(), Some(ALICE)), "every id is new");
        let other = SessionIds::new(sealer(1), "http://10.0.0.2:8080".into());
        let claims = other.open(&id, Some(ALICE)).unwrap();
        assert_eq!(claims.owner.as_deref(), Some(ALICE));
        assert_eq!(claims.home, *home.home());
        assert_eq!(claims.state.protocol_version, "2025-11-25");
        assert_eq!(
            (claims.state.caps, claims.state.log_level),
            (ClientCaps::ALL, Some(2))
        );
        // Only the short strings of clientInfo travel.
        assert_eq!(
            claims.state.client_info,
            Some(serde_json::json!({"name": "inspector", "version": "2.12.0"}))
        );
        assert!(claims.issued_ms > 0);
        // Unauthenticated: no owner, opened by an unauthenticated request only.
        let open = home.issue(&state(), None);
        assert_eq!(other.open(&open, None).unwrap().owner, None);
    }

    #[test]
    fn a_restarted_replica_is_another_home() {
        let before = SessionIds::new(sealer(1), "http://10.0.0.1:8080".into());
        let id = before.issue(&state(), None);
        let after = SessionIds::new(sealer(1), "http://10.0.0.1:8080".into());
        assert!(after.open(&id, None).is_ok());
    }

    #[test]
    fn an_id_issued_by_this_process_is_not_taken_over_here() {
        let ids = SessionIds::new(sealer(1), "http://10.0.0.1:8080".into());
        let id = ids.issue(&state(), Some(ALICE));
        assert_eq!(ids.open(&id, Some(ALICE)), Err(IdRefusal::HomeIsHere));
    }

    #[test]
    fn another_principal_is_refused() {
        let home = SessionIds::new(sealer(1), "http://a".into());
        let other = SessionIds::new(sealer(1), "http://b".into());
        let id = home.issue(&state(), Some(ALICE));
        for who in [Some("key\u{0}bob"), None, Some("jwt\u{0}iss\u{0}alice")] {
            assert_eq!(other.open(&id, who), Err(IdRefusal::OtherPrincipal), "{who:?}");
        }
        let unowned = home.issue(&state(), None);
        assert_eq!(other.open(&unowned, Some(ALICE)), Err(IdRefusal::OtherPrincipal));
    }

    #[test]
    fn forged_truncated_plain_and_other_key_ids_are_refused() {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use base64::Engine;
        let home = SessionIds::new(sealer(1), "http://a".into());
        let other = SessionIds::new(sealer(1), "http://b".into());
        let id = home.issue(&state(), None);
        let bytes = URL_SAFE_NO_PAD.decode(&id).unwrap();
        let mut forged = bytes.clone();
        forged[20] ^= 1;
        let forged = URL_SAFE_NO_PAD.encode(forged);
        assert_eq!(
            other.open(&forged, None),
            Err(IdRefusal::Sealed(SealError::Forged))
        );
        let truncated = URL_SAFE_NO_PAD.encode(&bytes[..bytes.len() - 3]);
        assert_eq!(
            other.open(&truncated, None),
            Err(IdRefusal::Sealed(SealError::Forged))
        );
        let plain = crate::util::ids::random_hex(64);
        assert!(matches!(other.open(&plain, None), Err(IdRefusal::Sealed(_))));
        let another_key = SessionIds::new(sealer(2), "http://c".into());
        assert_eq!(
            another_key.open(&id, None),
            Err(IdRefusal::Sealed(SealError::UnknownKey))
        );
        // A token of another purpose under the right key (a cursor) is no session id.
        let cursor = sealer(1).seal(Purpose::Cursor, b"", br#"{"s":{}}"#);
        assert_eq!(
            other.open(&cursor, None),
            Err(IdRefusal::Sealed(SealError::Forged))
        );
        // Sealed as a session id, but not claims.
        let junk = sealer(1).seal(Purpose::SessionId, b"", b"not json");
        assert_eq!(other.open(&junk, None), Err(IdRefusal::Claims));
    }
}
