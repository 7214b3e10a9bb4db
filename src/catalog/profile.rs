//! A profile's view of the catalog: the items of its `servers` whose exposed names (or URIs)
//! its `tools`/`prompts`/`resources` globs keep. A pure function of (snapshot, profile), so a
//! reload or a new list re-applies it; with its fingerprint a change of the view is told apart
//! from a change elsewhere in the catalog.

use super::{Catalog, ExposedItem, ListKind};
use crate::config::{Filter, Profile, UpstreamId};
use std::hash::{Hash, Hasher};

/// The globs of `profile` for lists of `kind`.
pub fn filter(profile: &Profile, kind: ListKind) -> &Filter {
    match kind {
        ListKind::Tools => &profile.tools,
        ListKind::Prompts => &profile.prompts,
        ListKind::Resources | ListKind::Templates => &profile.resources,
    }
}

/// Whether `profile` sees the item of `upstream` that hosts know as `exposed` in lists of `kind`.
pub fn admits(profile: &Profile, kind: ListKind, upstream: &UpstreamId, exposed: &str) -> bool {
    profile.has_server(upstream) && filter(profile, kind).admits(exposed)
}

/// Whether `profile` sees `item` of a list of `kind`.
pub fn admits_item(profile: &Profile, kind: ListKind, item: &ExposedItem) -> bool {
    admits(profile, kind, &item.upstream, &item.exposed)
}

/// A digest of what `profile` sees of the list `kind` of `catalog` (the items, byte for byte,
/// in order): equal digests, same view.
pub fn fingerprint(catalog: &Catalog, profile: &Profile, kind: ListKind) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for item in catalog
        .list(kind)
        .items
        .iter()
        .filter(|i| admits_item(profile, kind, i))
    {
        item.json.get().hash(&mut hasher);
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{CatalogStore, Naming};
    use crate::protocol::RawObject;
    use crate::util::glob::Glob;

    fn profile(servers: Option<&[&str]>, tools: &[&str]) -> Profile {
        Profile {
            name: "review".into(),
            path: "/mcp/review".into(),
            servers: servers.map(|s| s.iter().map(|n| UpstreamId::new(n)).collect()),
            tools: Filter {
                include: tools.iter().map(|g| Glob::new(g).unwrap()).collect(),
                exclude: Vec::new(),
            },
            prompts: Filter::default(),
            resources: Filter::default(),
            discovery: Default::default(),
            token_budget: 8000,
            matcher: None,
            line: 1,
        }
    }

    fn tools(names: &[&str]) -> Vec<RawObject> {
        (names.iter())
            .map(|n| RawObject::parse(&format!(r#"{{"name":"{n}"}}"#)).unwrap())
            .collect()
    }

    fn store() -> CatalogStore {
        let namings = ["everything", "time", "other"].map(|n| (UpstreamId::new(n), Naming::new(n, "__")));
        CatalogStore::new(namings.to_vec())
    }

    fn seen(store: &CatalogStore, profile: &Profile) -> Vec<String> {
        let catalog = store.snapshot();
        (catalog.list(ListKind::Tools).items.iter())
            .filter(|i| admits_item(profile, ListKind::Tools, i))
            .map(|i| i.exposed.to_string())
            .collect()
    }

    #[test]
    fn a_profile_sees_its_servers_items_its_globs_keep() {
        let s = store();
        s.replace(
            &UpstreamId::new("everything"),
            ListKind::Tools,
            tools(&["echo", "add"]),
        );
        s.replace(
            &UpstreamId::new("time"),
            ListKind::Tools,
            tools(&["get_current_time"]),
        );
        s.replace(&UpstreamId::new("other"), ListKind::Tools, tools(&["echo"]));
        let both = profile(Some(&["everything", "time"]), &[]);
        assert_eq!(
            seen(&s, &both),
            ["everything__add", "everything__echo", "time__get_current_time"]
        );
        // Globs over exposed names, on top of the servers.
        let echo_only = profile(Some(&["everything", "time"]), &["*__echo"]);
        assert_eq!(seen(&s, &echo_only), ["everything__echo"]);
        // No `servers`: every server.
        let all = profile(None, &["*__echo"]);
        assert_eq!(seen(&s, &all), ["everything__echo", "other__echo"]);
        // Prompts and resources are not filtered by `tools`.
        assert!(admits(
            &echo_only,
            ListKind::Prompts,
            &UpstreamId::new("time"),
            "time__p"
        ));
        assert!(!admits(
            &echo_only,
            ListKind::Prompts,
            &UpstreamId::new("other"),
            "other__p"
        ));
    }

    #[test]
    fn the_fingerprint_changes_only_with_the_view() {
        let s = store();
        let p = profile(Some(&["everything"]), &[]);
        s.replace(&UpstreamId::new("everything"), ListKind::Tools, tools(&["echo"]));
        let before = fingerprint(&s.snapshot(), &p, ListKind::Tools);
        // A server outside the profile changes: the view does not.
        s.replace(&UpstreamId::new("other"), ListKind::Tools, tools(&["new"]));
        assert_eq!(fingerprint(&s.snapshot(), &p, ListKind::Tools), before);
        s.replace(
            &UpstreamId::new("everything"),
            ListKind::Tools,
            tools(&["echo", "new"]),
        );
        assert_ne!(fingerprint(&s.snapshot(), &p, ListKind::Tools), before);
    }
}
