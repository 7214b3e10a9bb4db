//! What one principal sees of the upstreams whose connections are its own (`oauth`,
//! `token_exchange` and `forward` upstreams behind `[auth]`): the lists its connections sent,
//! in place of what the store holds for everyone (the authorize tool, or nothing), merged with
//! everyone's lists into a snapshot of its own. The snapshot is built when first asked for after
//! its lists or the shared catalog changed, and reused until then.

use super::store::{merge, CatalogStore, Parts};
use super::{Catalog, ListKind};
use crate::config::{IdMap, UpstreamId};
use crate::protocol::RawObject;
use std::collections::HashMap;
use std::sync::Arc;

/// The most principals with lists of their own; a further one sees the shared catalog until
/// one of them goes (their connections are bounded well below it).
pub const MAX_PRINCIPALS: usize = 10_000;

/// Every principal's own lists.
#[derive(Default)]
pub(super) struct Overlays {
    by_principal: HashMap<String, Overlay>,
}

impl Overlays {
    /// A reload changed the upstreams: lists of upstreams no longer configured go.
    pub(super) fn keep_upstreams(&mut self, namings: &[(UpstreamId, super::Naming)]) {
        for overlay in self.by_principal.values_mut() {
            overlay
                .lists
                .retain(|id, _| namings.iter().any(|(kept, _)| kept == id));
            overlay.built = None;
        }
        self.by_principal.retain(|_, o| !o.lists.is_empty());
    }
}

/// One principal's lists, and the snapshot last built from them.
#[derive(Default)]
struct Overlay {
    lists: IdMap<[Vec<RawObject>; 4]>,
    /// The shared snapshot's epoch it was built on, and the snapshot.
    built: Option<(u64, Arc<Catalog>)>,
}

impl Overlay {
    /// Its snapshot over `parts` (the store's, locked), built again if stale.
    fn snapshot(&mut self, parts: &Parts, epoch: u64) -> Arc<Catalog> {
        if let Some((built_on, built)) = &self.built {
            if *built_on == epoch {
                return built.clone();
            }
        }
        let built = Arc::new(Catalog {
            epoch,
            lists: ListKind::ALL.map(|kind| merge(parts, kind, Some(&self.lists))),
            namings: parts.namings.clone(),
            personal: true,
            tool_index: Default::default(),
        });
        self.built = Some((epoch, built.clone()));
        built
    }
}

impl CatalogStore {
    /// What `principal` sees: its own snapshot when it has lists of its own, else everyone's.
    pub fn snapshot_for(&self, principal: Option<&str>) -> Arc<Catalog> {
        let shared = self.snapshot();
        let Some(principal) = principal else {
            return shared;
        };
        {
            let personal = self.personal.lock();
            match personal.by_principal.get(principal) {
                None => return shared,
                Some(Overlay {
                    built: Some((epoch, built)),
                    ..
                }) if *epoch == shared.epoch => return built.clone(),
                Some(_) => {}
            }
        }
        let parts = self.parts.lock();
        let mut personal = self.personal.lock();
        let shared = self.snapshot();
        match personal.by_principal.get_mut(principal) {
            Some(overlay) => overlay.snapshot(&parts, shared.epoch),
            None => shared,
        }
    }

    /// Whether any principal has lists of its own.
    #[cfg(test)]
    pub fn has_personal(&self) -> bool {
        !self.personal.lock().by_principal.is_empty()
    }

    /// Replace `principal`'s own list of one kind of `upstream` (its connection sent it), while
    /// `current()` holds (see [`CatalogStore::replace_while`]); returns whether what the principal
    /// sees changed.
    pub fn replace_personal(
        &self,
        (principal, upstream): (&str, &UpstreamId),
        kind: ListKind,
        items: Vec<RawObject>,
        current: &dyn Fn() -> bool,
    ) -> bool {
        let mut parts = self.parts.lock();
        if !current() || !parts.namings.iter().any(|(id, _)| id == upstream) {
            return false;
        }
        if kind == ListKind::Tools {
            parts.pins.observe(upstream, &items);
        }
        let mut personal = self.personal.lock();
        let count = personal.by_principal.len();
        let epoch = self.snapshot().epoch;
        let before = match personal.by_principal.get_mut(principal) {
            Some(overlay) => overlay.snapshot(&parts, epoch),
            None if count >= MAX_PRINCIPALS => {
                tracing::warn!(
                    upstream = upstream.as_str(),
                    "{MAX_PRINCIPALS} principals have lists of their own: one more sees the shared lists"
                );
                return false;
            }
            None => self.snapshot(),
        };
        let overlay = personal.by_principal.entry(principal.to_string()).or_default();
        let inherited = (parts.namings.iter().position(|(id, _)| id == upstream))
            .and_then(|i| parts.lists.get(i))
            .map(|part| part.lists.clone())
            .unwrap_or_default();
        // The other lists stay what everyone sees until the connection sends its own.
        let lists = overlay.lists.entry(upstream.clone()).or_insert(inherited);
        lists[kind as usize] = items;
        overlay.built = None;
        let after = overlay.snapshot(&parts, epoch);
        after.list(kind).differs_from(before.list(kind))
    }

    /// No principal has lists of its own of `upstream` any more (a reload restarted or removed
    /// it); returns the principals that had some.
    pub fn drop_personal_upstream(&self, upstream: &UpstreamId) -> Vec<String> {
        let _parts = self.parts.lock();
        let mut personal = self.personal.lock();
        let mut had = Vec::new();
        for (principal, overlay) in personal.by_principal.iter_mut() {
            if overlay.lists.remove(upstream).is_some() {
                overlay.built = None;
                had.push(principal.clone());
            }
        }
        personal.by_principal.retain(|_, o| !o.lists.is_empty());
        had
    }

    /// `principal` no longer has lists of its own of `upstream` (its connection closed): it sees
    /// everyone's again; returns the kinds whose view changed for it.
    pub fn drop_personal(&self, principal: &str, upstream: &UpstreamId) -> Vec<ListKind> {
        let parts = self.parts.lock();
        let mut personal = self.personal.lock();
        let epoch = self.snapshot().epoch;
        let Some(overlay) = personal.by_principal.get_mut(principal) else {
            return Vec::new();
        };
        if !overlay.lists.contains_key(upstream) {
            return Vec::new();
        }
        let before = overlay.snapshot(&parts, epoch);
        overlay.lists.remove(upstream);
        overlay.built = None;
        let after = match overlay.lists.is_empty() {
            true => {
                personal.by_principal.remove(principal);
                self.snapshot()
            }
            false => overlay.snapshot(&parts, epoch),
        };
        (ListKind::ALL.into_iter())
            .filter(|&kind| after.list(kind).differs_from(before.list(kind)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Naming;

    fn tools(names: &[&str]) -> Vec<RawObject> {
        (names.iter())
            .map(|n| RawObject::parse(&format!(r#"{{"name":"{n}"}}"#)).unwrap())
            .collect()
    }

    fn names(catalog: &Catalog) -> Vec<String> {
        (catalog.list(ListKind::Tools).items.iter())
            .map(|i| i.exposed.to_string())
            .collect()
    }

    fn store() -> (CatalogStore, UpstreamId, UpstreamId) {
        let (shared, own) = (UpstreamId::new("time"), UpstreamId::new("linear"));
        let store = CatalogStore::new(vec![
            (shared.clone(), Naming::new("time", "__")),
            (own.clone(), Naming::new("linear", "__")),
        ]);
        store.replace(&shared, ListKind::Tools, tools(&["now"]));
        store.replace(&own, ListKind::Tools, tools(&["authorize"]));
        (store, shared, own)
    }

    #[test]
    fn a_principal_sees_its_own_lists_and_nobody_else_does() {
        let (store, shared, own) = store();
        let always = || true;
        assert!(store.replace_personal(("alice", &own), ListKind::Tools, tools(&["issues"]), &always));
        assert!(store.replace_personal(("bob", &own), ListKind::Tools, tools(&["projects"]), &always));
        let alice = store.snapshot_for(Some("alice"));
        assert!(alice.is_personal());
        assert_eq!(names(&alice), ["linear__issues", "time__now"]);
        assert_eq!(
            names(&store.snapshot_for(Some("bob"))),
            ["linear__projects", "time__now"]
        );
        assert_eq!(
            names(&store.snapshot_for(Some("carol"))),
            ["linear__authorize", "time__now"]
        );
        assert_eq!(
            names(&store.snapshot_for(None)),
            ["linear__authorize", "time__now"]
        );
        // The same list again changes nothing; a snapshot is reused until something changes.
        assert!(!store.replace_personal(("alice", &own), ListKind::Tools, tools(&["issues"]), &always));
        let again = store.snapshot_for(Some("alice"));
        assert!(Arc::ptr_eq(&again, &store.snapshot_for(Some("alice"))));
        assert_eq!(names(&again), names(&alice));
        // A change everyone sees reaches the principal's own snapshot too.
        store.replace(&shared, ListKind::Tools, tools(&["now", "convert"]));
        assert_eq!(
            names(&store.snapshot_for(Some("alice"))),
            ["linear__issues", "time__convert", "time__now"]
        );
    }

    #[test]
    fn dropped_lists_fall_back_to_everyones_and_say_what_changed() {
        let (store, _, own) = store();
        let always = || true;
        store.replace_personal(("alice", &own), ListKind::Tools, tools(&["issues"]), &always);
        assert_eq!(store.drop_personal("alice", &own), vec![ListKind::Tools]);
        assert!(!store.has_personal());
        assert!(!store.snapshot_for(Some("alice")).is_personal());
        assert!(store.drop_personal("alice", &own).is_empty());
    }

    #[test]
    fn a_retired_upstream_or_an_unknown_one_writes_nothing_and_a_reload_drops_removed_ones() {
        let (store, shared, own) = store();
        assert!(!store.replace_personal(("alice", &own), ListKind::Tools, tools(&["x"]), &|| false));
        let ghost = UpstreamId::new("ghost");
        assert!(!store.replace_personal(("alice", &ghost), ListKind::Tools, tools(&["x"]), &|| true));
        assert!(!store.has_personal());
        store.replace_personal(("alice", &own), ListKind::Tools, tools(&["issues"]), &|| true);
        store.set_upstreams(vec![(shared, Naming::new("time", "__"))]);
        assert!(!store.has_personal());
        assert_eq!(names(&store.snapshot_for(Some("alice"))), ["time__now"]);
    }

    #[test]
    fn a_restarted_upstream_takes_every_principals_own_lists_of_it_along() {
        let (store, _, own) = store();
        store.replace_personal(("alice", &own), ListKind::Tools, tools(&["issues"]), &|| true);
        store.replace_personal(("bob", &own), ListKind::Tools, tools(&["projects"]), &|| true);
        let mut had = store.drop_personal_upstream(&own);
        had.sort();
        assert_eq!(had, ["alice", "bob"]);
        assert!(!store.has_personal());
        assert_eq!(
            names(&store.snapshot_for(Some("alice"))),
            ["linear__authorize", "time__now"]
        );
    }
}
