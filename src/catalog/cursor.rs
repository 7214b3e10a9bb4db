//! mcpmux's own opaque cursors for the lists it serves from the catalog.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

const TAG: &str = "mcpmux-page:";

/// Encode a position in a merged list.
pub fn encode(offset: usize) -> String {
    URL_SAFE_NO_PAD.encode(format!("{TAG}{offset}"))
}

/// Decode a cursor this gateway issued; `None` for anything else.
pub fn decode(cursor: &str) -> Option<usize> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?;
    text.strip_prefix(TAG)?.parse().ok()
}

/// The slice `[start, end)` of a list of `len` items for a page, and the next cursor.
pub fn page(len: usize, cursor: Option<&str>, page_size: usize) -> Option<(usize, usize, Option<String>)> {
    let start = match cursor {
        Some(c) => decode(c)?,
        None => 0,
    };
    if start > len {
        return None;
    }
    let end = start.saturating_add(page_size.max(1)).min(len);
    let next = (end < len).then(|| encode(end));
    Some((start, end, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_walk_the_whole_list() {
        let (s, e, next) = page(25, None, 10).unwrap();
        assert_eq!((s, e), (0, 10));
        let (s, e, next) = page(25, next.as_deref(), 10).unwrap();
        assert_eq!((s, e), (10, 20));
        let (s, e, next) = page(25, next.as_deref(), 10).unwrap();
        assert_eq!((s, e, next), (20, 25, None));
    }

    #[test]
    fn foreign_cursors_are_rejected() {
        assert!(page(5, Some("garbage"), 10).is_none());
        assert!(page(5, Some(&encode(9)), 10).is_none());
        assert_eq!(decode(&encode(3)), Some(3));
    }
}
