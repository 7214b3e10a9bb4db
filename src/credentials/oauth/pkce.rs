//! PKCE (RFC 7636) with S256, and random opaque values, from the OS RNG (ring).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::rand::{SecureRandom, SystemRandom};

/// A code verifier and its S256 challenge. The verifier is a secret until the code is used.
#[derive(Clone, PartialEq, Eq)]
pub struct Pkce {
    pub verifier: String,
    pub challenge: String,
}

impl Pkce {
    /// A fresh verifier (32 random bytes: 43 characters) and its challenge.
    pub fn new() -> Pkce {
        Pkce::from_verifier(random_urlsafe(32))
    }

    /// The pair for a known verifier.
    pub fn from_verifier(verifier: String) -> Pkce {
        let challenge = s256(&verifier);
        Pkce { verifier, challenge }
    }
}

impl Default for Pkce {
    fn default() -> Self {
        Pkce::new()
    }
}

impl std::fmt::Debug for Pkce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pkce")
            .field("challenge", &self.challenge)
            .finish_non_exhaustive()
    }
}

/// BASE64URL(SHA-256(verifier)), unpadded.
pub fn s256(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()))
}

/// A random opaque value (for `state`, a `jti`): `bytes` random bytes, base64url.
pub fn random_urlsafe(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    if SystemRandom::new().fill(&mut buf).is_err() {
        // ring's system RNG does not fail on supported platforms; never fall back to a
        // predictable value.
        panic!("the OS random number generator failed");
    }
    URL_SAFE_NO_PAD.encode(buf)
}

/// A random `state` for an authorization request (the caller binds it to the principal).
pub fn random_state() -> String {
    random_urlsafe(24)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s256_matches_rfc_7636_appendix_b() {
        let pkce = Pkce::from_verifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk".into());
        assert_eq!(pkce.challenge, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
    }

    #[test]
    fn verifiers_are_fresh_and_well_formed() {
        let (a, b) = (Pkce::new(), Pkce::new());
        assert_ne!(a.verifier, b.verifier);
        assert_eq!(a.verifier.len(), 43);
        assert!(a
            .verifier
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert!(!format!("{a:?}").contains(&a.verifier));
    }
}
