//! The pages of the merged lists as hosts are served them, written from items that are already
//! raw JSON (nothing is parsed or validated again). A snapshot never changes, so the session-era
//! result of each page is written once per snapshot and a `tools/list` only copies it.

use super::cursor::Cursors;
use super::{Catalog, ExposedItem, ListKind};
use crate::protocol::message::to_raw;
use crate::seal::Sealer;
use parking_lot::Mutex;
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::Arc;

/// The results of one list of one snapshot written so far, by their `[start, end)` slice. Only
/// pages starting at a multiple of the page size are kept (the only ones mcpmux's cursors point
/// to), so the cache holds each item at most once.
#[derive(Debug, Default)]
pub(super) struct PageCache {
    written: Mutex<HashMap<(usize, usize), Arc<RawValue>>>,
}

impl Catalog {
    /// The result `{"<field>":[...],"nextCursor":"..."}` of the page of a list that `cursor`
    /// points to (the first page without one); `None` for a cursor that does not open with
    /// `sealer` as one of this list everyone sees, or one past the end.
    pub fn page(
        &self,
        kind: ListKind,
        cursor: Option<&str>,
        page_size: usize,
        sealer: &Sealer,
    ) -> Option<Arc<RawValue>> {
        let list = self.list(kind);
        let page_size = page_size.max(1);
        let (start, end, next) = Cursors::shared(sealer).page(kind, list.items.len(), cursor, page_size)?;
        let keep = start % page_size == 0;
        if keep {
            if let Some(result) = list.pages.written.lock().get(&(start, end)) {
                return Some(result.clone());
            }
        }
        // Written outside the lock: two requests racing for a new page both write it, once.
        let result: Arc<RawValue> = write(kind, &list.items[start..end], next.as_deref(), &[]).into();
        if !keep {
            return Some(result);
        }
        Some(
            list.pages
                .written
                .lock()
                .entry((start, end))
                .or_insert(result)
                .clone(),
        )
    }

    /// [`Catalog::page`] followed by `extra` members (which must not repeat the list's field or
    /// `nextCursor`), written for this request alone.
    pub fn page_with(
        &self,
        kind: ListKind,
        cursor: Option<&str>,
        page_size: usize,
        sealer: &Sealer,
        extra: &[(&str, Box<RawValue>)],
    ) -> Option<Box<RawValue>> {
        let items = &self.list(kind).items;
        let (start, end, next) = Cursors::shared(sealer).page(kind, items.len(), cursor, page_size.max(1))?;
        Some(write(kind, &items[start..end], next.as_deref(), extra))
    }

    /// The page `cursor` points to of the items `visible` keeps (a profile's view, a policy's),
    /// followed by `extra` members: one principal's view of a list under a policy. The cursor
    /// counts visible items, so pages never skip or repeat what this principal may see; it is
    /// sealed by `cursors` (bound to the principal, so it pages no one else's view).
    pub fn page_visible(
        &self,
        kind: ListKind,
        cursor: Option<&str>,
        page_size: usize,
        cursors: Cursors<'_>,
        extra: &[(&str, Box<RawValue>)],
        visible: impl Fn(&ExposedItem) -> bool,
    ) -> Option<Box<RawValue>> {
        let items: Vec<&ExposedItem> = (self.list(kind).items.iter())
            .filter(|item| visible(item))
            .collect();
        let (start, end, next) = cursors.page(kind, items.len(), cursor, page_size.max(1))?;
        Some(write(kind, &items[start..end], next.as_deref(), extra))
    }
}

fn write<I: std::borrow::Borrow<ExposedItem>>(
    kind: ListKind,
    items: &[I],
    next: Option<&str>,
    extra: &[(&str, Box<RawValue>)],
) -> Box<RawValue> {
    to_raw(&PageResult {
        field: kind.field(),
        items: Items(items),
        next,
        extra,
    })
}

/// Items written as a JSON array, each verbatim.
struct Items<'a, I>(&'a [I]);

impl<I: std::borrow::Borrow<ExposedItem>> Serialize for Items<'_, I> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for item in self.0 {
            seq.serialize_element(&*item.borrow().json)?;
        }
        seq.end()
    }
}

struct PageResult<'a, I> {
    field: &'a str,
    items: Items<'a, I>,
    next: Option<&'a str>,
    extra: &'a [(&'a str, Box<RawValue>)],
}

impl<I: std::borrow::Borrow<ExposedItem>> Serialize for PageResult<'_, I> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry(self.field, &self.items)?;
        if let Some(next) = self.next {
            map.serialize_entry("nextCursor", next)?;
        }
        for (key, value) in self.extra {
            map.serialize_entry(key, &**value)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{CatalogStore, Naming};
    use crate::config::UpstreamId;
    use crate::protocol::message::raw;
    use crate::protocol::RawObject;

    /// The `nextCursor` of a page.
    fn next_of(page: &RawValue) -> String {
        let value: serde_json::Value = serde_json::from_str(page.get()).unwrap();
        value["nextCursor"].as_str().unwrap().to_string()
    }

    /// Tool `name` of upstream "a" as hosts see it, `extra` members after its name.
    fn tool(name: &str, extra: &str) -> String {
        format!(
            r#"{{"name":"a__{name}"{extra},"_meta":{{"mcpmux/original":{{"server":"a","name":"{name}"}}}},"title":"{name}"}}"#
        )
    }

    fn store(tools: &[&str]) -> CatalogStore {
        let naming = Naming::new("a", "__");
        let store = CatalogStore::new(vec![(UpstreamId::new("a"), naming)]);
        let items = tools.iter().map(|t| RawObject::parse(t).unwrap()).collect();
        store.replace(&UpstreamId::new("a"), ListKind::Tools, items);
        store
    }

    #[test]
    fn pages_walk_the_list_and_carry_their_cursor() {
        let s = store(&[r#"{"name":"x"}"#, r#"{"name":"y","d":[1, 2]}"#, r#"{"name":"z"}"#]);
        let catalog = s.snapshot();
        let sealer = Sealer::random();
        let first = catalog.page(ListKind::Tools, None, 2, &sealer).unwrap();
        let next = next_of(&first);
        assert_eq!(Cursors::shared(&sealer).open(ListKind::Tools, &next), Some(2));
        let expected = format!(
            r#"{{"tools":[{},{}],"nextCursor":"{next}"}}"#,
            tool("x", ""),
            tool("y", r#","d":[1, 2]"#)
        );
        assert_eq!(first.get(), expected);
        let second = catalog.page(ListKind::Tools, Some(&next), 2, &sealer).unwrap();
        assert_eq!(second.get(), format!(r#"{{"tools":[{}]}}"#, tool("z", "")));
        let extra = [("resultType", raw("\"complete\"".into()))];
        let modern = catalog
            .page_with(ListKind::Tools, Some(&next), 2, &sealer, &extra)
            .unwrap();
        assert_eq!(
            modern.get(),
            format!(r#"{{"tools":[{}],"resultType":"complete"}}"#, tool("z", ""))
        );
        assert!(catalog.page(ListKind::Tools, Some("bogus"), 2, &sealer).is_none());
        let past_the_end = Cursors::shared(&sealer).seal(ListKind::Tools, 4);
        assert!(catalog
            .page(ListKind::Tools, Some(&past_the_end), 2, &sealer)
            .is_none());
        assert!(catalog
            .page_with(ListKind::Tools, Some("bogus"), 2, &sealer, &extra)
            .is_none());
        // A tools cursor does not page the prompts; another gateway's key's cursor pages nothing.
        assert!(catalog.page(ListKind::Prompts, Some(&next), 2, &sealer).is_none());
        assert!(catalog
            .page(ListKind::Tools, Some(&next), 2, &Sealer::random())
            .is_none());
        let empty = catalog.page(ListKind::Templates, None, 2, &sealer).unwrap();
        assert_eq!(empty.get(), r#"{"resourceTemplates":[]}"#);
    }

    #[test]
    fn a_principals_pages_hold_only_what_it_may_see_and_count_only_that() {
        let s = store(&[
            r#"{"name":"x"}"#,
            r#"{"name":"y"}"#,
            r#"{"name":"z"}"#,
            r#"{"name":"w"}"#,
        ]);
        let catalog = s.snapshot();
        let sealer = Sealer::random();
        let alice = Cursors::bound_to(&sealer, b"key\0alice");
        let visible = |item: &ExposedItem| &*item.exposed != "a__y";
        let first = catalog
            .page_visible(ListKind::Tools, None, 2, alice, &[], visible)
            .unwrap();
        let next = next_of(&first);
        assert_eq!(alice.open(ListKind::Tools, &next), Some(2));
        // Listed by exposed name: w, x, (y hidden), z.
        let expected = format!(
            r#"{{"tools":[{},{}],"nextCursor":"{next}"}}"#,
            tool("w", ""),
            tool("x", "")
        );
        assert_eq!(first.get(), expected);
        let second = catalog
            .page_visible(ListKind::Tools, Some(&next), 2, alice, &[], visible)
            .unwrap();
        assert_eq!(second.get(), format!(r#"{{"tools":[{}]}}"#, tool("z", "")));
        let none = catalog
            .page_visible(ListKind::Tools, None, 2, alice, &[], |_| false)
            .unwrap();
        assert_eq!(none.get(), r#"{"tools":[]}"#);
        assert!(catalog
            .page_visible(ListKind::Tools, Some("bogus"), 2, alice, &[], visible)
            .is_none());
        // Alice's cursor pages neither bob's view nor the list everyone sees.
        let bob = Cursors::bound_to(&sealer, b"key\0bob");
        assert!(catalog
            .page_visible(ListKind::Tools, Some(&next), 2, bob, &[], visible)
            .is_none());
        assert!(catalog.page(ListKind::Tools, Some(&next), 2, &sealer).is_none());
    }

    #[test]
    fn a_snapshot_writes_each_page_once_and_keeps_only_aligned_ones() {
        let s = store(&[r#"{"name":"x"}"#, r#"{"name":"y"}"#, r#"{"name":"z"}"#]);
        let catalog = s.snapshot();
        let sealer = Sealer::random();
        let first = catalog.page(ListKind::Tools, None, 2, &sealer).unwrap();
        assert!(Arc::ptr_eq(
            &first,
            &catalog.page(ListKind::Tools, None, 2, &sealer).unwrap()
        ));
        let odd_cursor = Some(Cursors::shared(&sealer).seal(ListKind::Tools, 1));
        let odd = catalog
            .page(ListKind::Tools, odd_cursor.as_deref(), 2, &sealer)
            .unwrap();
        let expected = format!(r#"{{"tools":[{},{}]}}"#, tool("y", ""), tool("z", ""));
        assert_eq!(odd.get(), expected);
        let again = catalog
            .page(ListKind::Tools, odd_cursor.as_deref(), 2, &sealer)
            .unwrap();
        assert!(!Arc::ptr_eq(&odd, &again));
        assert_eq!(catalog.list(ListKind::Tools).pages.written.lock().len(), 1);
        // A new snapshot starts with no pages and serves what changed.
        s.replace(
            &UpstreamId::new("a"),
            ListKind::Tools,
            vec![RawObject::parse(r#"{"name":"w"}"#).unwrap()],
        );
        let page = s.snapshot().page(ListKind::Tools, None, 2, &sealer).unwrap();
        assert_eq!(page.get(), format!(r#"{{"tools":[{}]}}"#, tool("w", "")));
    }
}
