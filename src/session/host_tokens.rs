//! What a session hands its host sealed besides its id: SSE event ids and the ids of
//! server-to-client requests. Each is sealed with the cluster key ([`Purpose::EventId`],
//! [`Purpose::ServerRequestId`]) and bound to the session id, so an id forged, altered, cut,
//! sealed under another key or taken from another session does not open. What points into this
//! process's memory (a call stream's position, a request's route) carries a tag drawn when the
//! process starts: one issued by another process (the session's earlier home) opens, but is never
//! taken for one of here.
//!
//! A call stream's event id is its stream and sequence number and the host's request id (so a
//! replica that cannot resume the stream answers the request rather than leave it waiting); a
//! standalone (GET) stream's event
//! id carries the session's state as it was when the event was sent, its resource subscriptions
//! and log level ([`StandaloneClaims`]), so a replica taking the session over restores them.

use crate::protocol::RequestId;
use crate::seal::{Purpose, SealError, Sealer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::sync::Arc;

/// The longest standalone event id that carries the session's subscriptions: an event id goes
/// back in a `Last-Event-ID` header, and balancers cap header lines (nginx at 8 KiB by default).
/// Longer, the id carries the log level only (see [`StandaloneClaims::subscriptions_dropped`]).
pub const MAX_STANDALONE_ID_CHARS: usize = 4096;

/// Bytes of the tag naming the process that issued a position or route.
const PROCESS_TAG: usize = 8;
/// The first byte of an event id's plaintext: which stream it is an event of.
const CALL_EVENT: u8 = 1;
/// A call event's plaintext before the request id: kind, process tag, stream, sequence.
const CALL_EVENT_BYTES: usize = 1 + PROCESS_TAG + 16;
/// The longest host request id (as JSON) a call event id carries.
pub const MAX_CARRIED_REQUEST_ID: usize = 256;
const STANDALONE_EVENT: u8 = 2;

/// The session's state as its standalone stream's event ids carry it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StandaloneClaims {
    /// The session's log level (a rank in `protocol::logging::LOG_LEVELS`); absent: none set.
    #[serde(rename = "l", default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<usize>,
    /// The URIs the session is subscribed to (as mcpmux names them), sorted.
    #[serde(rename = "s", default, skip_serializing_if = "Vec::is_empty")]
    pub subscriptions: Vec<String>,
    /// The subscriptions were too many for an event id ([`MAX_STANDALONE_ID_CHARS`]): none is
    /// carried.
    #[serde(rename = "x", default, skip_serializing_if = "std::ops::Not::not")]
    pub subscriptions_dropped: bool,
}

/// Where a `Last-Event-ID` that opened points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventPosition {
    /// Event `seq` of call stream `stream`, kept by this process, of the host's request
    /// `request`.
    Call {
        stream: u64,
        seq: u64,
        request: Option<RequestId>,
    },
    /// An event of a call stream another process kept (the session's earlier home), of the
    /// host's request `request`.
    CallElsewhere { request: Option<RequestId> },
    /// An event of the session's standalone stream, with the state it carried.
    Standalone(StandaloneClaims),
}

/// Why a sealed id does not open for a session: every one is treated as unknown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefusal {
    #[error("{0}")]
    Sealed(SealError),
    #[error("a sealed id with unreadable contents")]
    Contents,
}

impl From<SealError> for TokenRefusal {
    fn from(err: SealError) -> Self {
        TokenRefusal::Sealed(err)
    }
}

/// A server-to-client request id that opened for a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestRoute {
    /// Route `route` of this process's table.
    Here(u64),
    /// A request another process (the session's earlier home) sent.
    Elsewhere,
}

/// Seals and opens a session's event ids and server-to-client request ids (one per gateway).
pub struct HostTokens {
    sealer: Arc<Sealer>,
    process: [u8; PROCESS_TAG],
}

impl HostTokens {
    /// Tokens sealed by `sealer`, tagged with a fresh process tag.
    pub fn new(sealer: Arc<Sealer>) -> HostTokens {
        HostTokens {
            sealer,
            process: rand::random(),
        }
    }

    /// With a key of their own (tests; a gateway without `[cluster]` uses its own random key).
    pub fn random() -> HostTokens {
        HostTokens::new(Arc::new(Sealer::random()))
    }

    /// The id of event `seq` of call stream `stream` of `session`, for the host's request
    /// `request` (carried when its JSON is at most [`MAX_CARRIED_REQUEST_ID`] bytes, so a replica
    /// that cannot resume the stream can still answer the request).
    pub fn call_event_id(&self, session: &str, stream: u64, seq: u64, request: Option<&RequestId>) -> String {
        let request = request
            .map(RequestId::as_json)
            .filter(|id| id.len() <= MAX_CARRIED_REQUEST_ID);
        let mut plain = Vec::with_capacity(CALL_EVENT_BYTES + request.map_or(0, str::len));
        plain.push(CALL_EVENT);
        plain.extend_from_slice(&self.process);
        plain.extend_from_slice(&stream.to_be_bytes());
        plain.extend_from_slice(&seq.to_be_bytes());
        plain.extend_from_slice(request.unwrap_or_default().as_bytes());
        self.sealer.seal(Purpose::EventId, session.as_bytes(), &plain)
    }

    /// The plaintext of standalone event ids carrying `claims` (made once per change of the
    /// session's state, sealed once per event by [`HostTokens::standalone_event_id`]). Claims
    /// whose id would be longer than [`MAX_STANDALONE_ID_CHARS`] lose their subscriptions.
    pub fn standalone_plaintext(&self, claims: &StandaloneClaims) -> Vec<u8> {
        let plain = standalone_bytes(claims);
        if sealed_chars(plain.len()) <= MAX_STANDALONE_ID_CHARS {
            return plain;
        }
        tracing::warn!(
            subscriptions = claims.subscriptions.len(),
            "the session's subscriptions are too many for an SSE event id: a replica taking the \
             session over will not re-make them"
        );
        standalone_bytes(&StandaloneClaims {
            log_level: claims.log_level,
            subscriptions: Vec::new(),
            subscriptions_dropped: true,
        })
    }

    /// A standalone event id of `session` from [`HostTokens::standalone_plaintext`].
    pub fn standalone_event_id(&self, session: &str, plaintext: &[u8]) -> String {
        self.sealer.seal(Purpose::EventId, session.as_bytes(), plaintext)
    }

    /// Open a `Last-Event-ID` sent on `session`.
    pub fn open_event_id(&self, session: &str, token: &str) -> Result<EventPosition, TokenRefusal> {
        let plain = self
            .sealer
            .open(Purpose::EventId, session.as_bytes(), token.trim())?;
        match plain.split_first() {
            Some((&CALL_EVENT, rest)) if rest.len() >= PROCESS_TAG + 16 => {
                let (process, rest) = rest.split_at(PROCESS_TAG);
                let (numbers, request) = rest.split_at(16);
                let request = std::str::from_utf8(request)
                    .ok()
                    .and_then(|id| serde_json::from_str::<&RawValue>(id).ok())
                    .and_then(RequestId::from_raw);
                if process != self.process {
                    return Ok(EventPosition::CallElsewhere { request });
                }
                let (stream, seq) = numbers.split_at(8);
                Ok(EventPosition::Call {
                    stream: u64_of(stream),
                    seq: u64_of(seq),
                    request,
                })
            }
            Some((&STANDALONE_EVENT, json)) => serde_json::from_slice(json)
                .map(EventPosition::Standalone)
                .map_err(|_| TokenRefusal::Contents),
            _ => Err(TokenRefusal::Contents),
        }
    }

    /// The id server-to-client request `route` carries towards `session`'s host.
    pub fn request_id(&self, session: &str, route: u64) -> String {
        let mut plain = [0u8; PROCESS_TAG + 8];
        plain[..PROCESS_TAG].copy_from_slice(&self.process);
        plain[PROCESS_TAG..].copy_from_slice(&route.to_be_bytes());
        self.sealer
            .seal(Purpose::ServerRequestId, session.as_bytes(), &plain)
    }

    /// Open the id of a host's response on `session`.
    pub fn open_request_id(&self, session: &str, token: &str) -> Result<RequestRoute, TokenRefusal> {
        let plain = self
            .sealer
            .open(Purpose::ServerRequestId, session.as_bytes(), token)?;
        if plain.len() != PROCESS_TAG + 8 {
            return Err(TokenRefusal::Contents);
        }
        let (process, route) = plain.split_at(PROCESS_TAG);
        Ok(match process == self.process {
            true => RequestRoute::Here(u64_of(route)),
            false => RequestRoute::Elsewhere,
        })
    }
}

fn standalone_bytes(claims: &StandaloneClaims) -> Vec<u8> {
    let mut plain = vec![STANDALONE_EVENT];
    // Serializing a struct of strings and numbers cannot fail.
    plain.extend(serde_json::to_vec(claims).unwrap_or_default());
    plain
}

/// How many characters a sealed token of a plaintext of `len` bytes has (base64url, no padding,
/// of key id, nonce, plaintext and tag).
fn sealed_chars(len: usize) -> usize {
    ((4 + 12 + len + 16) * 4).div_ceil(3)
}

fn u64_of(bytes: &[u8]) -> u64 {
    let mut be = [0u8; 8];
    be.copy_from_slice(&bytes[..8]);
    u64::from_be_bytes(be)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seal::ClusterKey;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;

    fn sealer(byte: u8) -> Arc<Sealer> {
        use base64::engine::general_purpose::STANDARD;
        let key = ClusterKey::parse(&STANDARD.encode([byte; 32])).unwrap();
        Arc::new(Sealer::new(&key, &[]))
    }

    const S: &str = "session-one";

    fn claims() -> StandaloneClaims {
        StandaloneClaims {
            log_level: Some(4),
            subscriptions: vec!["mcpmux://t/a".into(), "test://b".into()],
            subscriptions_dropped: false,
        }
    }

    /// Every way a token of `good` can be made wrong: flipped, cut, plain text, empty.
    fn spoiled(good: &str) -> Vec<(&'static str, String)> {
        let bytes = URL_SAFE_NO_PAD.decode(good).unwrap();
        let mut flipped = bytes.clone();
        flipped[20] ^= 1;
        vec![
            ("forged", URL_SAFE_NO_PAD.encode(flipped)),
            ("truncated", URL_SAFE_NO_PAD.encode(&bytes[..bytes.len() - 3])),
            ("plain", "1-3".to_string()),
            ("empty", String::new()),
        ]
    }

    #[test]
    fn event_ids_open_to_their_position_on_any_replica_with_the_key() {
        let here = HostTokens::new(sealer(1));
        let request = RequestId::string("call-7");
        let id = here.call_event_id(S, 3, 17, Some(&request));
        assert!(id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_ne!(
            id,
            here.call_event_id(S, 3, 17, Some(&request)),
            "every id is unique"
        );
        assert_eq!(
            here.open_event_id(S, &id),
            Ok(EventPosition::Call {
                stream: 3,
                seq: 17,
                request: Some(request.clone())
            })
        );
        // Another process with the key opens it, but the stream is not one of its own: it
        // knows which request it answered.
        let replica = HostTokens::new(sealer(1));
        assert_eq!(
            replica.open_event_id(S, &id),
            Ok(EventPosition::CallElsewhere {
                request: Some(request)
            })
        );
        // A number id, and one too long to carry.
        let number = RequestId::number(42);
        let id = here.call_event_id(S, 1, 1, Some(&number));
        assert_eq!(
            replica.open_event_id(S, &id),
            Ok(EventPosition::CallElsewhere {
                request: Some(number)
            })
        );
        let long = RequestId::string(&"x".repeat(MAX_CARRIED_REQUEST_ID));
        let id = here.call_event_id(S, 1, 1, Some(&long));
        assert_eq!(
            replica.open_event_id(S, &id),
            Ok(EventPosition::CallElsewhere { request: None })
        );
        let plain = here.standalone_plaintext(&claims());
        let standalone = here.standalone_event_id(S, &plain);
        assert_eq!(
            replica.open_event_id(S, &standalone),
            Ok(EventPosition::Standalone(claims()))
        );
    }

    #[test]
    fn forged_truncated_other_key_and_other_session_event_ids_are_refused() {
        let here = HostTokens::new(sealer(1));
        let plain = here.standalone_plaintext(&claims());
        for good in [
            here.call_event_id(S, 1, 2, None),
            here.standalone_event_id(S, &plain),
        ] {
            for (what, bad) in spoiled(&good) {
                assert!(here.open_event_id(S, &bad).is_err(), "{what}");
            }
            assert_eq!(
                here.open_event_id("session-two", &good),
                Err(TokenRefusal::Sealed(SealError::Forged)),
                "another session"
            );
            let other_key = HostTokens::new(sealer(2));
            assert_eq!(
                other_key.open_event_id(S, &good),
                Err(TokenRefusal::Sealed(SealError::UnknownKey))
            );
        }
        // A server request id, a cursor: sealed under the key, but no event ids.
        let request = here.request_id(S, 1);
        assert!(here.open_event_id(S, &request).is_err());
        let cursor = sealer(1).seal(Purpose::Cursor, S.as_bytes(), &[CALL_EVENT; 25]);
        assert!(here.open_event_id(S, &cursor).is_err());
        let junk = sealer(1).seal(Purpose::EventId, S.as_bytes(), &[STANDALONE_EVENT, b'{']);
        assert_eq!(here.open_event_id(S, &junk), Err(TokenRefusal::Contents));
    }

    #[test]
    fn too_many_subscriptions_are_not_carried_but_the_log_level_is() {
        let here = HostTokens::new(sealer(1));
        let many = StandaloneClaims {
            log_level: Some(2),
            subscriptions: (0..200)
                .map(|i| format!("test://resource/{i:04}/with/a/long/path"))
                .collect(),
            subscriptions_dropped: false,
        };
        let id = here.standalone_event_id(S, &here.standalone_plaintext(&many));
        assert!(id.len() <= MAX_STANDALONE_ID_CHARS, "{}", id.len());
        let Ok(EventPosition::Standalone(carried)) = here.open_event_id(S, &id) else {
            panic!("a standalone id")
        };
        assert_eq!(carried.log_level, Some(2));
        assert!(carried.subscriptions.is_empty() && carried.subscriptions_dropped);
        // A few fit: the sealed length is what the bound is about.
        let plain = here.standalone_plaintext(&claims());
        assert_eq!(
            here.standalone_event_id(S, &plain).len(),
            sealed_chars(plain.len())
        );
    }

    #[test]
    fn request_ids_open_only_for_their_session_and_name_their_process() {
        let here = HostTokens::new(sealer(1));
        let id = here.request_id(S, 42);
        assert_eq!(here.open_request_id(S, &id), Ok(RequestRoute::Here(42)));
        let replica = HostTokens::new(sealer(1));
        assert_eq!(replica.open_request_id(S, &id), Ok(RequestRoute::Elsewhere));
        assert_eq!(
            here.open_request_id("session-two", &id),
            Err(TokenRefusal::Sealed(SealError::Forged))
        );
        for (what, bad) in spoiled(&id) {
            assert!(here.open_request_id(S, &bad).is_err(), "{what}");
        }
        let other_key = HostTokens::new(sealer(2));
        assert!(other_key.open_request_id(S, &id).is_err());
        let event = here.call_event_id(S, 1, 42, None);
        assert!(
            here.open_request_id(S, &event).is_err(),
            "an event id is no request id"
        );
    }
}
