//! Random identifiers: session ids, parked-call ids and the like, as lowercase hex drawn from
//! the thread's cryptographically secure generator.

use rand::RngCore;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `len` random lowercase hex digits (4 random bits each).
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
