//! Which endpoints a catalog change concerns: the main endpoint sees the whole catalog, each
//! profile its own view (`catalog::profile`), so a profile's sessions and listen streams are
//! told of a list change only when what that profile sees of the list changed. A digest of each
//! profile's view of each list is kept; with no profile nothing is kept or computed.

use crate::catalog::{profile, CatalogStore, ListKind};
use crate::config::Profile;
use arc_swap::ArcSwap;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::hash::Hasher;
use std::sync::{Arc, OnceLock};

/// The profiles in force and the digest of what each saw last of each list.
#[derive(Default)]
pub struct ProfileViews {
    catalog: OnceLock<Arc<CatalogStore>>,
    profiles: ArcSwap<Vec<Profile>>,
    seen: Mutex<HashMap<(String, ListKind), u64>>,
}

impl ProfileViews {
    /// Watch `catalog` for `profiles` (once, when the catalog exists); what they see now is
    /// what they saw last.
    pub fn bind(&self, catalog: Arc<CatalogStore>, profiles: Vec<Profile>) {
        let _ = self.catalog.set(catalog);
        self.set_profiles(profiles);
        for kind in ListKind::ALL {
            self.changed(kind);
        }
    }

    /// Put `profiles` in force (a reload); the next [`ProfileViews::changed`] compares their
    /// views with what the profiles of the same name saw.
    /// What a removed profile saw is kept until then: it now sees nothing, a change its sessions
    /// are told of (they stay open, and see an empty catalog).
    pub fn set_profiles(&self, profiles: Vec<Profile>) {
        self.profiles.store(Arc::new(profiles));
    }

    /// Whether the profile named `name` (in force) sees anything of `upstream`.
    pub fn has_server(&self, name: &str, upstream: &crate::config::UpstreamId) -> bool {
        (self.profiles.load().iter()).any(|p| p.name == name && p.has_server(upstream))
    }

    /// The profiles whose view of list `kind` changed since they were last asked (each view's
    /// digest is recorded); empty, and nothing computed, without profiles. A profile seen for
    /// the first time counts as changed; one a reload removed, as seeing nothing.
    pub fn changed(&self, kind: ListKind) -> HashSet<String> {
        let profiles = self.profiles.load();
        let Some(catalog) = self.catalog.get() else {
            return HashSet::new();
        };
        let mut seen = self.seen.lock();
        if profiles.is_empty() && seen.is_empty() {
            return HashSet::new();
        }
        let snapshot = catalog.snapshot();
        let mut changed = HashSet::new();
        for p in profiles.iter() {
            let now = profile::fingerprint(&snapshot, p, kind);
            if seen.insert((p.name.clone(), kind), now) != Some(now) {
                changed.insert(p.name.clone());
            }
        }
        removed(&mut seen, &profiles, kind, &mut changed);
        changed
    }
}

/// Profiles a reload removed that saw something of list `kind`: they see nothing now (told
/// once; then forgotten).
fn removed(
    seen: &mut HashMap<(String, ListKind), u64>,
    profiles: &[Profile],
    kind: ListKind,
    changed: &mut HashSet<String>,
) {
    let nothing = std::collections::hash_map::DefaultHasher::new().finish();
    let gone: Vec<(String, ListKind)> = (seen.keys())
        .filter(|(name, k)| *k == kind && !profiles.iter().any(|p| p.name == *name))
        .cloned()
        .collect();
    for key in gone {
        if seen.remove(&key) != Some(nothing) {
            changed.insert(key.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Naming;
    use crate::config::{Filter, UpstreamId};
    use crate::protocol::RawObject;

    fn review(servers: &[&str]) -> Profile {
        Profile {
            name: "review".into(),
            path: "/mcp/review".into(),
            servers: Some(servers.iter().map(|s| UpstreamId::new(s)).collect()),
            tools: Filter::default(),
            prompts: Filter::default(),
            resources: Filter::default(),
            discovery: Default::default(),
            token_budget: 8000,
            matcher: None,
            line: 1,
        }
    }

    #[test]
    fn a_profile_is_told_only_of_changes_to_its_view() {
        let ids = ["everything", "test"].map(UpstreamId::new);
        let store = Arc::new(CatalogStore::new(
            ids.iter()
                .map(|id| (id.clone(), Naming::new(id.as_str(), "__")))
                .collect(),
        ));
        let views = ProfileViews::default();
        assert!(views.changed(ListKind::Tools).is_empty());
        views.bind(store.clone(), vec![review(&["everything"])]);
        let tool = |n: &str| vec![RawObject::parse(&format!(r#"{{"name":"{n}"}}"#)).unwrap()];
        store.replace(&ids[1], ListKind::Tools, tool("added"));
        assert!(views.changed(ListKind::Tools).is_empty());
        store.replace(&ids[0], ListKind::Tools, tool("echo"));
        assert_eq!(
            views.changed(ListKind::Tools),
            HashSet::from(["review".to_string()])
        );
        assert!(views.changed(ListKind::Tools).is_empty());
        // A reload that widens the profile changes its view.
        views.set_profiles(vec![review(&["everything", "test"])]);
        assert_eq!(views.changed(ListKind::Tools).len(), 1);
        assert!(views.changed(ListKind::Prompts).is_empty());
        // Removed, it sees nothing: told once, of the lists it saw something of.
        views.set_profiles(Vec::new());
        assert!(views.changed(ListKind::Prompts).is_empty());
        assert_eq!(
            views.changed(ListKind::Tools),
            HashSet::from(["review".to_string()])
        );
        assert!(views.changed(ListKind::Tools).is_empty());
    }
}
