//! The sealer: AES-256-GCM under a key derived once from each cluster key, a random 96-bit nonce
//! per seal, the key's id in the clear so opening picks the key directly, and the token's purpose
//! plus the caller's context (e.g. a principal) bound as associated data.
//!
//! A token is base64url without padding of `key id (4) | nonce (12) | ciphertext | tag (16)`.
//! Random nonces stay safe for about 2^32 seals per key: rotate the key well before that.

use super::key::ClusterKey;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use std::fmt;

/// Bytes of the key id at the start of every token.
const KEY_ID_LEN: usize = 4;
/// Bytes of the authentication tag at the end of every token.
const TAG_LEN: usize = 16;
/// The shortest token: an empty plaintext.
const MIN_TOKEN_BYTES: usize = KEY_ID_LEN + NONCE_LEN + TAG_LEN;
/// The longest token text opened; anything longer is refused before decoding.
const MAX_TOKEN_CHARS: usize = 64 * 1024;
/// Starts the associated data of every token (the format's version).
const AAD_DOMAIN: &[u8] = b"mcpmux-seal/1\0";

/// What a token is for; bound into it, so a token of one purpose never opens as another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A list cursor (`nextCursor`): the list and the position in it.
    Cursor,
    /// mcpmux's own `requestState` for a modern host's parked call.
    RequestState,
    /// A session-era `Mcp-Session-Id` carrying the session's state (session takeover).
    SessionId,
    /// An SSE event id (resumption with `Last-Event-ID`).
    EventId,
    /// The id of a server-to-client request sent to a host (sampling, elicitation, roots).
    ServerRequestId,
    /// A replica's passport on a request it forwards to another replica (who the host is).
    Passport,
    /// A grant in the vault (tokens of one principal at one upstream), bound to its grant key.
    Grant,
    /// A client registration in the vault (an upstream's authorization server), bound to the
    /// upstream and the issuer.
    Registration,
}

impl Purpose {
    /// The label bound into the token (never contains a NUL).
    fn label(self) -> &'static [u8] {
        match self {
            Purpose::Cursor => b"cursor",
            Purpose::RequestState => b"request-state",
            Purpose::SessionId => b"session-id",
            Purpose::EventId => b"event-id",
            Purpose::ServerRequestId => b"server-request-id",
            Purpose::Passport => b"replica-passport",
            Purpose::Grant => b"vault-grant",
            Purpose::Registration => b"vault-registration",
        }
    }
}

/// Why a token did not open. Callers treat every one as "unknown": nothing in it is trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("not a sealed token")]
    Malformed,
    #[error("sealed under a key this gateway does not hold")]
    UnknownKey,
    #[error("failed authentication (forged, altered, or sealed for another purpose or context)")]
    Forged,
}

/// One key as the sealer uses it: its id and the AEAD key derived from it.
struct SealingKey {
    id: [u8; KEY_ID_LEN],
    aead: LessSafeKey,
}

impl SealingKey {
    /// Derive the key id and the AEAD key from a cluster key (once, when the sealer is built):
    /// HMAC-SHA256 of the cluster key over a fixed label for each, so neither reveals the other.
    fn derive(key: &ClusterKey) -> SealingKey {
        let prf = hmac::Key::new(hmac::HMAC_SHA256, key.bytes());
        let id_tag = hmac::sign(&prf, b"mcpmux seal key id v1");
        let mut id = [0u8; KEY_ID_LEN];
        id.copy_from_slice(&id_tag.as_ref()[..KEY_ID_LEN]);
        let aead_tag = hmac::sign(&prf, b"mcpmux seal aead key v1");
        let unbound = UnboundKey::new(&AES_256_GCM, aead_tag.as_ref())
            .expect("HMAC-SHA256 gives 32 bytes, AES-256's key length");
        SealingKey {
            id,
            aead: LessSafeKey::new(unbound),
        }
    }
}

/// Seals with the current cluster key; opens with it or any previous one.
pub struct Sealer {
    current: SealingKey,
    /// Keys still accepted when opening, never used to seal (rotation).
    previous: Vec<SealingKey>,
    rng: SystemRandom,
}

impl fmt::Debug for Sealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sealer")
            .field("previous_keys", &self.previous.len())
            .finish_non_exhaustive()
    }
}

impl Sealer {
    /// A sealer for `key` that also opens what `previous` sealed.
    pub fn new(key: &ClusterKey, previous: &[ClusterKey]) -> Sealer {
        let current = SealingKey::derive(key);
        let mut kept: Vec<SealingKey> = Vec::new();
        for old in previous.iter().map(SealingKey::derive) {
            if old.id != current.id && kept.iter().all(|k| k.id != old.id) {
                kept.push(old);
            }
        }
        Sealer {
            current,
            previous: kept,
            rng: SystemRandom::new(),
        }
    }

    /// A sealer with a key of its own (no `[cluster]`): only this process opens its tokens.
    pub fn random() -> Sealer {
        Sealer::new(&ClusterKey::generate(), &[])
    }

    /// The current key's id in hex: not secret (every token starts with it), so it may be logged
    /// for operators to check that every replica has the same key.
    pub fn key_id(&self) -> String {
        self.current.id.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Seal `plaintext` for `purpose`, bound to `context` (empty for none): a URL-safe token of
    /// visible ASCII.
    pub fn seal(&self, purpose: Purpose, context: &[u8], plaintext: &[u8]) -> String {
        let key = &self.current;
        let mut nonce = [0u8; NONCE_LEN];
        if self.rng.fill(&mut nonce).is_err() {
            nonce = rand::random();
        }
        let mut token = Vec::with_capacity(MIN_TOKEN_BYTES + plaintext.len());
        token.extend_from_slice(&key.id);
        token.extend_from_slice(&nonce);
        token.extend_from_slice(plaintext);
        let aad = associated_data(purpose, &key.id, context);
        let tag = key
            .aead
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&aad),
                &mut token[KEY_ID_LEN + NONCE_LEN..],
            )
            .expect("ring refuses only plaintexts over 64 GiB");
        token.extend_from_slice(tag.as_ref());
        URL_SAFE_NO_PAD.encode(token)
    }

    /// Open a token sealed for `purpose` and `context`; the plaintext, or why it is refused.
    pub fn open(&self, purpose: Purpose, context: &[u8], token: &str) -> Result<Vec<u8>, SealError> {
        if token.len() > MAX_TOKEN_CHARS {
            return Err(SealError::Malformed);
        }
        let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| SealError::Malformed)?;
        if bytes.len() < MIN_TOKEN_BYTES {
            return Err(SealError::Malformed);
        }
        let (id, rest) = bytes.split_at(KEY_ID_LEN);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let key = std::iter::once(&self.current)
            .chain(&self.previous)
            .find(|k| k.id[..] == *id)
            .ok_or(SealError::UnknownKey)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Malformed)?;
        let aad = associated_data(purpose, &key.id, context);
        let mut sealed = sealed.to_vec();
        let plaintext = key
            .aead
            .open_in_place(nonce, Aad::from(&aad), &mut sealed)
            .map_err(|_| SealError::Forged)?;
        Ok(plaintext.to_vec())
    }
}

/// What a token is bound to besides its plaintext: the format, its purpose, its key id and the
/// caller's context (the label has no NUL and the id a fixed length, so no two differ only in
/// where one part ends).
fn associated_data(purpose: Purpose, key_id: &[u8; KEY_ID_LEN], context: &[u8]) -> Vec<u8> {
    let label = purpose.label();
    let mut aad = Vec::with_capacity(AAD_DOMAIN.len() + label.len() + 1 + KEY_ID_LEN + context.len());
    aad.extend_from_slice(AAD_DOMAIN);
    aad.extend_from_slice(label);
    aad.push(0);
    aad.extend_from_slice(key_id);
    aad.extend_from_slice(context);
    aad
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> ClusterKey {
        use base64::engine::general_purpose::STANDARD;
        ClusterKey::parse(&STANDARD.encode([byte; 32])).unwrap()
    }

    #[test]
    fn a_token_opens_to_what_was_sealed_and_is_url_safe_visible_ascii() {
        let sealer = Sealer::new(&key(1), &[]);
        let token = sealer.seal(Purpose::Cursor, b"alice", b"offset 10");
        assert!(token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(
            sealer.open(Purpose::Cursor, b"alice", &token),
            Ok(b"offset 10".to_vec())
        );
        // Another sealer with the same key (another replica) opens it too.
        let replica = Sealer::new(&key(1), &[]);
        assert_eq!(
            replica.open(Purpose::Cursor, b"alice", &token),
            Ok(b"offset 10".to_vec())
        );
        let empty = sealer.seal(Purpose::EventId, b"", b"");
        assert_eq!(sealer.open(Purpose::EventId, b"", &empty), Ok(Vec::new()));
    }

    #[test]
    fn every_seal_has_a_fresh_nonce() {
        let sealer = Sealer::new(&key(1), &[]);
        let a = sealer.seal(Purpose::Cursor, b"", b"same");
        let b = sealer.seal(Purpose::Cursor, b"", b"same");
        assert_ne!(a, b);
        let nonce = |t: &str| URL_SAFE_NO_PAD.decode(t).unwrap()[KEY_ID_LEN..KEY_ID_LEN + NONCE_LEN].to_vec();
        assert_ne!(nonce(&a), nonce(&b));
    }

    #[test]
    fn another_purpose_or_context_does_not_open() {
        let sealer = Sealer::new(&key(1), &[]);
        let token = sealer.seal(Purpose::Cursor, b"alice", b"10");
        assert_eq!(
            sealer.open(Purpose::RequestState, b"alice", &token),
            Err(SealError::Forged)
        );
        assert_eq!(
            sealer.open(Purpose::SessionId, b"alice", &token),
            Err(SealError::Forged)
        );
        assert_eq!(
            sealer.open(Purpose::Cursor, b"bob", &token),
            Err(SealError::Forged)
        );
        assert_eq!(sealer.open(Purpose::Cursor, b"", &token), Err(SealError::Forged));
        assert_eq!(
            sealer.open(Purpose::Cursor, b"alice\0", &token),
            Err(SealError::Forged)
        );
    }

    #[test]
    fn forged_or_altered_tokens_do_not_open() {
        let sealer = Sealer::new(&key(1), &[]);
        let token = sealer.seal(Purpose::Cursor, b"", b"position 10");
        let bytes = URL_SAFE_NO_PAD.decode(&token).unwrap();
        // Every single flipped bit past the key id (nonce, ciphertext, tag) is caught.
        for at in KEY_ID_LEN..bytes.len() {
            let mut altered = bytes.clone();
            altered[at] ^= 0x01;
            let altered = URL_SAFE_NO_PAD.encode(&altered);
            assert_eq!(
                sealer.open(Purpose::Cursor, b"", &altered),
                Err(SealError::Forged),
                "byte {at}"
            );
        }
        // A token made up under the right key id but without the key.
        let mut made_up = bytes[..KEY_ID_LEN].to_vec();
        made_up.extend_from_slice(&[0u8; NONCE_LEN + 11 + TAG_LEN]);
        let made_up = URL_SAFE_NO_PAD.encode(made_up);
        assert_eq!(
            sealer.open(Purpose::Cursor, b"", &made_up),
            Err(SealError::Forged)
        );
    }

    #[test]
    fn truncated_or_malformed_tokens_do_not_open() {
        let sealer = Sealer::new(&key(1), &[]);
        let token = sealer.seal(Purpose::Cursor, b"", b"position 10");
        let bytes = URL_SAFE_NO_PAD.decode(&token).unwrap();
        for len in [0, 3, KEY_ID_LEN, MIN_TOKEN_BYTES - 1] {
            let cut = URL_SAFE_NO_PAD.encode(&bytes[..len]);
            assert_eq!(
                sealer.open(Purpose::Cursor, b"", &cut),
                Err(SealError::Malformed),
                "{len}"
            );
        }
        for len in MIN_TOKEN_BYTES..bytes.len() {
            let cut = URL_SAFE_NO_PAD.encode(&bytes[..len]);
            assert_eq!(
                sealer.open(Purpose::Cursor, b"", &cut),
                Err(SealError::Forged),
                "{len}"
            );
        }
        for junk in [
            "not a token!",
            "a+b/c=",
            &format!("{token}="),
            &"A".repeat(MAX_TOKEN_CHARS + 1),
        ] {
            assert_eq!(
                sealer.open(Purpose::Cursor, b"", junk),
                Err(SealError::Malformed),
                "{junk:.20}"
            );
        }
    }

    #[test]
    fn a_token_under_a_key_not_held_is_unknown() {
        let token = Sealer::new(&key(2), &[]).seal(Purpose::Cursor, b"", b"10");
        assert_eq!(
            Sealer::new(&key(1), &[]).open(Purpose::Cursor, b"", &token),
            Err(SealError::UnknownKey)
        );
        assert_eq!(
            Sealer::random().open(Purpose::Cursor, b"", &token),
            Err(SealError::UnknownKey)
        );
    }

    #[test]
    fn rotation_opens_with_previous_keys_and_seals_only_with_the_current_one() {
        let old = Sealer::new(&key(1), &[]);
        let from_old = old.seal(Purpose::RequestState, b"ctx", b"claims");
        let rotated = Sealer::new(&key(2), &[key(1)]);
        assert_eq!(
            rotated.open(Purpose::RequestState, b"ctx", &from_old),
            Ok(b"claims".to_vec())
        );
        // What the rotated sealer seals is under the new key: the old sealer cannot open it,
        // a sealer with only the new key can.
        let from_new = rotated.seal(Purpose::RequestState, b"ctx", b"claims");
        assert_eq!(
            old.open(Purpose::RequestState, b"ctx", &from_new),
            Err(SealError::UnknownKey)
        );
        let new_only = Sealer::new(&key(2), &[]);
        assert_eq!(
            new_only.open(Purpose::RequestState, b"ctx", &from_new),
            Ok(b"claims".to_vec())
        );
        assert_eq!(
            new_only.open(Purpose::RequestState, b"ctx", &from_old),
            Err(SealError::UnknownKey)
        );
        let id = |t: &str| URL_SAFE_NO_PAD.decode(t).unwrap()[..KEY_ID_LEN].to_vec();
        assert_eq!(id(&from_new), SealingKey::derive(&key(2)).id);
        let hex: String = id(&from_new).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!((rotated.key_id(), new_only.key_id()), (hex.clone(), hex));
        assert_ne!(id(&from_new), id(&from_old));
        // A previous key equal to the current one, or repeated, is kept once.
        let doubled = Sealer::new(&key(2), &[key(2), key(1), key(1)]);
        assert_eq!(doubled.previous.len(), 1);
    }

    #[test]
    fn debug_shows_no_key_material() {
        let shown = format!("{:?}", Sealer::new(&key(0x41), &[key(0x42)]));
        assert_eq!(shown, "Sealer { previous_keys: 1, .. }");
    }
}
