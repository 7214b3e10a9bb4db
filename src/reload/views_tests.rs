//! A reload's changes of each host's view: only the lists whose view changed for its endpoint
//! and principal.

use super::*;
use crate::catalog::{CatalogStore, Naming};
use crate::config::UpstreamId;
use crate::policy::PrincipalFacts;
use crate::protocol::RawObject;

struct Who(&'static str, Vec<&'static str>);

impl Viewer for Who {
    fn facts(&self) -> PrincipalFacts<'_> {
        PrincipalFacts::new(self.0, self.1.iter().copied(), [])
    }
}

fn catalog() -> std::sync::Arc<Catalog> {
    let id = UpstreamId::new("e");
    let store = CatalogStore::new(vec![(id.clone(), Naming::new("e", "__"))]);
    let items = |field: &str, names: &[&str]| -> Vec<RawObject> {
        (names.iter())
            .map(|n| RawObject::parse(&format!(r#"{{"{field}":"{n}"}}"#)).unwrap())
            .collect()
    };
    store.replace(&id, ListKind::Tools, items("name", &["echo", "sum"]));
    store.replace(&id, ListKind::Prompts, items("name", &["greet", "plain"]));
    store.replace(&id, ListKind::Resources, items("uri", &["doc://a"]));
    store.snapshot()
}

fn config(rules: &str) -> Config {
    let text = format!(
        "[auth]\n[[auth.api_keys]]\nname = \"k\"\nkey = \"k\"\n\
         [profiles.review]\npath = \"/review\"\ntools = {{ include = [\"e__echo\"] }}\n{rules}"
    );
    Config::from_toml_str(&text, "t.toml", &|_| None).unwrap()
}

const ALL: &str = "[[policy]]\ngroups = [\"eng\"]\nallow = [\"*\"]\n";

#[test]
fn hiding_one_tool_changes_the_tools_only_and_only_for_whom_it_hid() {
    let catalog = catalog();
    let (old, new) = (
        config(ALL),
        config(&format!(
            "{ALL}deny = [\"e__sum\"]\n[[policy]]\ngroups = [\"ops\"]\nallow = [\"e__greet\"]\n"
        )),
    );
    let (old_policy, new_policy) = (Policy::from_config(&old), Policy::from_config(&new));
    let side = |policy, config| Side {
        catalog: &catalog,
        policy,
        config,
    };
    let mut changes = ViewChanges::new(side(&old_policy, &old), side(&new_policy, &new));
    let (eng, ops, nobody) = (
        Who("alice", vec!["eng"]),
        Who("bob", vec!["ops"]),
        Who("carol", vec![]),
    );
    assert_eq!(changes.of(None, Some(&eng)), [ListKind::Tools]);
    assert_eq!(
        changes.of(None, Some(&ops)),
        [ListKind::Prompts],
        "a prompt appeared for ops"
    );
    assert!(
        changes.of(None, Some(&nobody)).is_empty(),
        "carol saw nothing and sees nothing"
    );
    assert!(
        changes.of(None, None).is_empty(),
        "no principal: nothing either side"
    );
    // The review profile serves e__echo only: the hidden e__sum was never in its view.
    assert!(changes.of(Some("review"), Some(&eng)).is_empty());
}

#[test]
fn a_removed_profile_or_a_changed_catalog_is_a_change_of_the_lists_it_touches() {
    let catalog = catalog();
    let old = config(ALL);
    let new = Config::from_toml_str(
        &format!("[auth]\n[[auth.api_keys]]\nname = \"k\"\nkey = \"k\"\n{ALL}"),
        "t.toml",
        &|_| None,
    )
    .unwrap();
    let policy = Policy::from_config(&old);
    let (before, after) = (
        Side {
            catalog: &catalog,
            policy: &policy,
            config: &old,
        },
        Side {
            catalog: &catalog,
            policy: &policy,
            config: &new,
        },
    );
    let eng = Who("alice", vec!["eng"]);
    let mut changes = ViewChanges::new(before, after);
    // Removed, it sees nothing: every list it saw something of.
    assert_eq!(
        changes.of(Some("review"), Some(&eng)),
        [ListKind::Tools, ListKind::Prompts, ListKind::Resources]
    );
    assert!(changes.of(None, Some(&eng)).is_empty());
    // The same policy, a tool fewer in the catalog: only the tools.
    let id = UpstreamId::new("e");
    let store = CatalogStore::new(vec![(id.clone(), Naming::new("e", "__"))]);
    store.replace(
        &id,
        ListKind::Tools,
        vec![RawObject::parse(r#"{"name":"echo"}"#).unwrap()],
    );
    let fewer = store.snapshot();
    let mut changes = ViewChanges::new(
        Side {
            catalog: &catalog,
            policy: &policy,
            config: &old,
        },
        Side {
            catalog: &fewer,
            policy: &policy,
            config: &old,
        },
    );
    let kinds = changes.of(None, Some(&eng));
    assert_eq!(kinds, [ListKind::Tools, ListKind::Prompts, ListKind::Resources]);
}

/// An API key as a session keeps it (the principal of its latest request).
struct Key(&'static str, Vec<&'static str>);

impl Viewer for Key {
    fn facts(&self) -> PrincipalFacts<'_> {
        PrincipalFacts::new(self.0, [], self.1.iter().copied())
    }

    fn api_key(&self) -> Option<&str> {
        Some(self.0)
    }
}

#[test]
fn a_key_given_a_scope_by_the_reload_sees_what_the_scope_allows_at_once() {
    let catalog = catalog();
    let rules = "[[policy]]\nscopes = [\"mcp:read\"]\nallow = [\"e__echo\"]\n";
    let text =
        |scopes: &str| format!("[auth]\n[[auth.api_keys]]\nname = \"k\"\nkey = \"k\"\n{scopes}\n{rules}");
    let old = Config::from_toml_str(&text(""), "t.toml", &|_| None).unwrap();
    let new = Config::from_toml_str(&text("scopes = [\"mcp:read\"]"), "t.toml", &|_| None).unwrap();
    let (old_policy, new_policy) = (Policy::from_config(&old), Policy::from_config(&new));
    let mut changes = ViewChanges::new(
        Side {
            catalog: &catalog,
            policy: &old_policy,
            config: &old,
        },
        Side {
            catalog: &catalog,
            policy: &new_policy,
            config: &new,
        },
    );
    // The session noted the key before the reload, without the scope.
    assert_eq!(changes.of(None, Some(&Key("k", vec![]))), [ListKind::Tools]);
    // A token's principal of the same name is not the key.
    assert!(changes.of(None, Some(&Who("k", vec![]))).is_empty());
}
