//! Random identifiers: session ids, parked-call ids and the like, as lowercase hex drawn from
//! the thread's cryptographically secure generator.

use rand::RngCore;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `len` random lowercase hex digits (4 random bits each).
/// How a session id appears in logs, audit records and the operator's views: the first 16 hex
/// digits of its SHA-256. Short, stable (the same id gives the same digest on every replica and
/// every line) and not the id: a sealed session id is long and lets its holder use the session.
pub fn session_digest(id: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = ring::digest::digest(&ring::digest::SHA256, id.as_bytes());
    let mut out = String::with_capacity(16);
    for b in &digest.as_ref()[..8] {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

pub fn random_hex(len: usize) -> String {
    let mut bytes = vec![0u8; len.div_ceil(2)];
    rand::rng().fill_bytes(&mut bytes);
    bytes
        .iter()
        .flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 0x0f)]])
        .take(len)
        .map(char::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn has_the_length_asked_for_in_lowercase_hex() {
        for len in [0, 1, 7, 24, 32, 64] {
            let id = random_hex(len);
            assert_eq!(id.len(), len);
            assert!(
                id.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
                "{id}"
            );
        }
    }

    #[test]
    fn ids_differ_and_use_every_digit() {
        let ids: Vec<String> = (0..64).map(|_| random_hex(32)).collect();
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len());
        let all: String = ids.concat();
        assert!(HEX.iter().all(|d| all.as_bytes().contains(d)), "{all}");
    }
}
