//! API keys (`[[auth.api_keys]]`): a bearer token's SHA-256 compared in constant time with
//! every configured digest.

use crate::config::ApiKey;
use subtle::ConstantTimeEq;

/// The position of the key whose digest is the token's, comparing against every key (no early
/// exit).
pub fn find(keys: &[ApiKey], token: &str) -> Option<usize> {
    if keys.is_empty() {
        return None;
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut found = None;
    for (i, key) in keys.iter().enumerate() {
        if bool::from(key.sha256.as_slice().ct_eq(digest.as_ref())) {
            found = Some(i);
        }
    }
    found
}
