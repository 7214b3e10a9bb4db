//! mcpmux's own opaque cursors for the lists it serves from the catalog: the list and a position
//! in it, sealed (`crate::seal`, purpose `Cursor`) so any replica with the cluster key pages on
//! from it, a cursor of one list is refused on another, and a principal's cursor (bound to it
//! under a policy) pages no one else's list.

use super::ListKind;
use crate::seal::{Purpose, Sealer};

/// How one request's cursors are sealed and opened: the gateway's sealer, and who they are bound
/// to (a principal's owner string for a list filtered for it; empty for the list everyone sees).
#[derive(Clone, Copy)]
pub struct Cursors<'a> {
    sealer: &'a Sealer,
    viewer: &'a [u8],
}

impl<'a> Cursors<'a> {
    /// Cursors of the list everyone sees.
    pub fn shared(sealer: &'a Sealer) -> Self {
        Cursors { sealer, viewer: b"" }
    }

    /// Cursors of a list filtered for `viewer` alone (its owner string).
    pub fn bound_to(sealer: &'a Sealer, viewer: &'a [u8]) -> Self {
        Cursors { sealer, viewer }
    }

    /// A cursor for position `offset` of list `kind`.
    pub fn seal(&self, kind: ListKind, offset: usize) -> String {
        let mut plaintext = Vec::with_capacity(9);
        plaintext.push(tag(kind));
        plaintext.extend_from_slice(&(offset as u64).to_be_bytes());
        self.sealer.seal(Purpose::Cursor, self.viewer, &plaintext)
    }

    /// The position a cursor this gateway sealed for list `kind` (and this viewer) points to;
    /// `None` for anything else.
    pub fn open(&self, kind: ListKind, cursor: &str) -> Option<usize> {
        let plaintext = self.sealer.open(Purpose::Cursor, self.viewer, cursor).ok()?;
        let (&sealed_kind, offset) = plaintext.split_first()?;
        if sealed_kind != tag(kind) {
            return None;
        }
        let offset: [u8; 8] = offset.try_into().ok()?;
        usize::try_from(u64::from_be_bytes(offset)).ok()
    }

    /// The slice `[start, end)` of list `kind` of `len` items for a page, and the next cursor;
    /// `None` for a cursor that does not open or points past the end.
    pub fn page(
        &self,
        kind: ListKind,
        len: usize,
        cursor: Option<&str>,
        page_size: usize,
    ) -> Option<(usize, usize, Option<String>)> {
        let start = match cursor {
            Some(c) => self.open(kind, c)?,
            None => 0,
        };
        if start > len {
            return None;
        }
        let end = start.saturating_add(page_size.max(1)).min(len);
        let next = (end < len).then(|| self.seal(kind, end));
        Some((start, end, next))
    }
}

/// The byte that names a list inside its cursors.
fn tag(kind: ListKind) -> u8 {
    match kind {
        ListKind::Tools => 1,
        ListKind::Prompts => 2,
        ListKind::Resources => 3,
        ListKind::Templates => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seal::ClusterKey;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    use base64::Engine;

    fn key(byte: u8) -> ClusterKey {
        ClusterKey::parse(&STANDARD.encode([byte; 32])).unwrap()
    }

    #[test]
    fn pages_walk_the_whole_list() {
        let sealer = Sealer::random();
        let cursors = Cursors::shared(&sealer);
        let (s, e, next) = cursors.page(ListKind::Tools, 25, None, 10).unwrap();
        assert_eq!((s, e), (0, 10));
        let (s, e, next) = cursors.page(ListKind::Tools, 25, next.as_deref(), 10).unwrap();
        assert_eq!((s, e), (10, 20));
        let (s, e, next) = cursors.page(ListKind::Tools, 25, next.as_deref(), 10).unwrap();
        assert_eq!((s, e, next), (20, 25, None));
    }

    #[test]
    fn foreign_cursors_are_rejected() {
        let sealer = Sealer::random();
        let cursors = Cursors::shared(&sealer);
        assert!(cursors.page(ListKind::Tools, 5, Some("garbage"), 10).is_none());
        assert!(cursors
            .page(ListKind::Tools, 5, Some(&cursors.seal(ListKind::Tools, 9)), 10)
            .is_none());
        assert_eq!(
            cursors.open(ListKind::Tools, &cursors.seal(ListKind::Tools, 3)),
            Some(3)
        );
        // Today's plain base64 offsets (the cursors before sealing) are refused.
        let plain = URL_SAFE_NO_PAD.encode("mcpmux-page:3");
        assert_eq!(cursors.open(ListKind::Tools, &plain), None);
        // Truncated or altered.
        let cursor = cursors.seal(ListKind::Tools, 3);
        assert_eq!(cursors.open(ListKind::Tools, &cursor[..cursor.len() - 2]), None);
        let mut bytes = URL_SAFE_NO_PAD.decode(&cursor).unwrap();
        bytes[20] ^= 0x80;
        assert_eq!(
            cursors.open(ListKind::Tools, &URL_SAFE_NO_PAD.encode(bytes)),
            None
        );
    }

    #[test]
    fn a_cursor_opens_only_on_its_own_list() {
        let sealer = Sealer::random();
        let cursors = Cursors::shared(&sealer);
        let tools = cursors.seal(ListKind::Tools, 4);
        assert_eq!(cursors.open(ListKind::Tools, &tools), Some(4));
        for other in [ListKind::Prompts, ListKind::Resources, ListKind::Templates] {
            assert_eq!(cursors.open(other, &tools), None, "{other:?}");
        }
    }

    #[test]
    fn a_principals_cursor_pages_only_its_own_list() {
        let sealer = Sealer::random();
        let alice = Cursors::bound_to(&sealer, b"key\0alice");
        let cursor = alice.seal(ListKind::Tools, 2);
        assert_eq!(alice.open(ListKind::Tools, &cursor), Some(2));
        assert_eq!(
            Cursors::bound_to(&sealer, b"key\0bob").open(ListKind::Tools, &cursor),
            None
        );
        assert_eq!(Cursors::shared(&sealer).open(ListKind::Tools, &cursor), None);
        let shared = Cursors::shared(&sealer).seal(ListKind::Tools, 2);
        assert_eq!(alice.open(ListKind::Tools, &shared), None);
    }

    #[test]
    fn replicas_with_the_key_share_cursors_and_rotation_keeps_them() {
        let one = Sealer::new(&key(1), &[]);
        let cursor = Cursors::shared(&one).seal(ListKind::Prompts, 7);
        let two = Sealer::new(&key(1), &[]);
        assert_eq!(Cursors::shared(&two).open(ListKind::Prompts, &cursor), Some(7));
        let rotated = Sealer::new(&key(2), &[key(1)]);
        assert_eq!(
            Cursors::shared(&rotated).open(ListKind::Prompts, &cursor),
            Some(7)
        );
        let other = Sealer::new(&key(2), &[]);
        assert_eq!(Cursors::shared(&other).open(ListKind::Prompts, &cursor), None);
    }
}
