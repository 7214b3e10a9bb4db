//! One cluster key: 32 random bytes, written as standard base64 (`mcpmux keygen` prints one).
//! A secret: `Debug` never shows it, and parse errors never echo it.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};
use std::fmt;

/// How many bytes a key has.
pub const KEY_BYTES: usize = 32;

/// A `[cluster]` key.
#[derive(Clone)]
pub struct ClusterKey([u8; KEY_BYTES]);

/// Why a text is not a cluster key (the message never contains the text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("is not base64 (make a key with `mcpmux keygen`)")]
    NotBase64,
    #[error("is base64 of {0} bytes, not of 32 random bytes (make a key with `mcpmux keygen`)")]
    WrongLength(usize),
}

impl ClusterKey {
    /// A new key from the operating system's random generator.
    pub fn generate() -> ClusterKey {
        let mut bytes = [0u8; KEY_BYTES];
        if SystemRandom::new().fill(&mut bytes).is_err() {
            // The system generator failing is not recoverable in a meaningful way; rand's
            // generator is seeded from the operating system too.
            bytes = rand::random();
        }
        ClusterKey(bytes)
    }

    /// A key from its base64 text (standard alphabet, padded, as `mcpmux keygen` writes it;
    /// whitespace around it, e.g. a file's final newline, is ignored).
    pub fn parse(text: &str) -> Result<ClusterKey, KeyError> {
        let bytes = STANDARD.decode(text.trim()).map_err(|_| KeyError::NotBase64)?;
        let bytes: [u8; KEY_BYTES] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| KeyError::WrongLength(bytes.len()))?;
        Ok(ClusterKey(bytes))
    }

    /// A key of these bytes (tests that need two replicas to share a key, or not).
    #[cfg(test)]
    pub fn from_bytes(bytes: [u8; KEY_BYTES]) -> ClusterKey {
        ClusterKey(bytes)
    }

    /// The key as `mcpmux keygen` prints it.
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.0)
    }

    pub(super) fn bytes(&self) -> &[u8; KEY_BYTES] {
        &self.0
    }
}

impl PartialEq for ClusterKey {
    fn eq(&self, other: &Self) -> bool {
        subtle::ConstantTimeEq::ct_eq(&self.0[..], &other.0[..]).into()
    }
}

impl Eq for ClusterKey {}

impl fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClusterKey(***)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_round_trips_through_its_text() {
        let key = ClusterKey::generate();
        let text = key.to_base64();
        assert_eq!(text.len(), 44);
        assert_eq!(ClusterKey::parse(&text), Ok(key.clone()));
        assert_eq!(ClusterKey::parse(&format!("{text}\n")), Ok(key.clone()));
        assert_ne!(ClusterKey::generate(), key);
    }

    #[test]
    fn anything_but_base64_of_32_bytes_is_refused_without_echoing_it() {
        assert_eq!(ClusterKey::parse("secret!"), Err(KeyError::NotBase64));
        assert_eq!(ClusterKey::parse(""), Err(KeyError::WrongLength(0)));
        let short = STANDARD.encode([7u8; 16]);
        assert_eq!(ClusterKey::parse(&short), Err(KeyError::WrongLength(16)));
        let long = STANDARD.encode([7u8; 33]);
        assert_eq!(ClusterKey::parse(&long), Err(KeyError::WrongLength(33)));
        // URL-safe base64 of the same bytes is another alphabet: refused.
        let url_safe = base64::engine::general_purpose::URL_SAFE.encode([0xfbu8; 32]);
        assert_eq!(ClusterKey::parse(&url_safe), Err(KeyError::NotBase64));
        for err in [KeyError::NotBase64, KeyError::WrongLength(16)] {
            assert!(!err.to_string().contains("secret"));
        }
    }

    #[test]
    fn debug_never_shows_the_key() {
        let key = ClusterKey::parse(&STANDARD.encode([0x41u8; 32])).unwrap();
        let shown = format!("{key:?}");
        assert_eq!(shown, "ClusterKey(***)");
        assert!(!shown.contains(&key.to_base64()));
    }
}
