//! A server's shaping applied to one of its lists: the items its `include`/`exclude` keep, tools
//! renamed and their descriptions replaced. A pure function of (shaping, list), run on every
//! list that arrives (the first load, a `list_changed`, a reload's new shaping).

use super::ListKind;
use crate::config::{Shaping, UpstreamId};
use crate::protocol::RawObject;
use std::borrow::Cow;
use std::collections::HashSet;

/// One item kept by the shaping.
#[derive(Debug)]
pub struct ShapedItem<'a> {
    /// The server's own name or URI.
    pub original: String,
    /// The name (renamed) or URI hosts see, before the namespace.
    pub name: String,
    /// The item, its description replaced when one is configured; every other member as sent.
    pub item: Cow<'a, RawObject>,
}

/// A tool left out because its new name is the name of another tool of the same server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenameCollision {
    /// The server's name of the renamed tool.
    pub renamed: String,
    /// The name both would have.
    pub name: String,
}

/// A list after shaping.
#[derive(Debug, Default)]
pub struct Shaped<'a> {
    pub items: Vec<ShapedItem<'a>>,
    pub collisions: Vec<RenameCollision>,
}

/// Apply `shaping` to `items`, a list of `kind` as the server sent it. Items without their key
/// member (`name`, `uri`, `uriTemplate`) are dropped, as the catalog drops them.
pub fn shape<'a>(shaping: &Shaping, kind: ListKind, items: &'a [RawObject]) -> Shaped<'a> {
    let filter = match kind {
        ListKind::Tools => &shaping.tools,
        ListKind::Prompts => &shaping.prompts,
        ListKind::Resources | ListKind::Templates => &shaping.resources,
    };
    let kept = (items.iter())
        .filter_map(|item| item.get_str(kind.key_field()).map(|key| (key, item)))
        .filter(|(key, _)| filter.admits(key));
    if kind != ListKind::Tools || (shaping.rename.is_empty() && shaping.descriptions.is_empty()) {
        let items = kept.map(|(original, item)| ShapedItem {
            name: original.clone(),
            original,
            item: Cow::Borrowed(item),
        });
        return Shaped {
            items: items.collect(),
            collisions: Vec::new(),
        };
    }
    let kept: Vec<(String, &RawObject)> = kept.collect();
    // The names tools keep as their own: a rename to one of them would make two tools one name.
    let own: HashSet<&str> = (kept.iter())
        .map(|(name, _)| name.as_str())
        .filter(|name| shaping.renamed(name).is_none())
        .collect();
    let mut out = Shaped::default();
    for (original, item) in &kept {
        let name = match shaping.renamed(original) {
            Some(new) if new != original && own.contains(new) => {
                out.collisions.push(RenameCollision {
                    renamed: original.clone(),
                    name: new.to_string(),
                });
                continue;
            }
            Some(new) => new.to_string(),
            None => original.clone(),
        };
        let item = match shaping.description(&name) {
            Some(text) => {
                let mut edited = RawObject::clone(item);
                edited.set_str("description", text);
                Cow::Owned(edited)
            }
            None => Cow::Borrowed(*item),
        };
        out.items.push(ShapedItem {
            original: original.clone(),
            name,
            item,
        });
    }
    out
}

/// The `rename` and `descriptions` keys that name no tool of `tools` (the server's own list):
/// `rename.KEY` for a tool the server does not list, `descriptions.KEY` for a name no kept tool
/// is exposed under.
pub fn unmatched_keys(shaping: &Shaping, tools: &[RawObject]) -> Vec<String> {
    if shaping.rename.is_empty() && shaping.descriptions.is_empty() {
        return Vec::new();
    }
    let listed: HashSet<String> = tools.iter().filter_map(|t| t.get_str("name")).collect();
    let shaped = shape(shaping, ListKind::Tools, tools);
    let exposed: HashSet<&str> = shaped.items.iter().map(|i| i.name.as_str()).collect();
    let renames = (shaping.rename.iter())
        .filter(|(from, _)| !listed.contains(from))
        .map(|(from, _)| format!("rename.{from}"));
    let descriptions = (shaping.descriptions.iter())
        .filter(|(name, _)| !exposed.contains(name.as_str()))
        .map(|(name, _)| format!("descriptions.{name}"));
    renames.chain(descriptions).collect()
}

/// Log what a tools list shows of `shaping` that the configuration could not: keys naming no
/// tool, renames onto a name a tool keeps. Logged when it differs from `noted` (the last time).
pub(super) fn note_problems(
    upstream: &UpstreamId,
    shaping: &Shaping,
    tools: &[RawObject],
    noted: &mut Vec<String>,
) {
    let unmatched = unmatched_keys(shaping, tools);
    let collisions = shape(shaping, ListKind::Tools, tools).collisions;
    let now: Vec<String> = (unmatched.iter().cloned())
        .chain(collisions.iter().map(|c| format!("rename.{}", c.renamed)))
        .collect();
    if now == *noted {
        return;
    }
    for key in &unmatched {
        tracing::warn!(
            upstream = upstream.as_str(),
            "servers.{}.{key} names no tool the server lists; it has no effect",
            upstream.as_str()
        );
    }
    for c in &collisions {
        tracing::warn!(
            upstream = upstream.as_str(),
            "servers.{}.rename: tool {:?} would be exposed as {:?}, the name of another tool of the server; {:?} is left out until the rename changes",
            upstream.as_str(),
            c.renamed,
            c.name,
            c.renamed,
        );
    }
    *noted = now;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Filter;
    use crate::util::glob::Glob;

    fn globs(patterns: &[&str]) -> Vec<Glob> {
        patterns.iter().map(|p| Glob::new(p).unwrap()).collect()
    }

    fn tools(names: &[&str]) -> Vec<RawObject> {
        let item = |n: &&str| {
            RawObject::parse(&format!(
                r#"{{"name":"{n}","description":"d","inputSchema":{{"type":"object"}},"_meta":{{"k":[1, 2]}},"x-vendor":true}}"#
            ))
            .unwrap()
        };
        names.iter().map(item).collect()
    }

    fn names(shaped: &Shaped<'_>) -> Vec<(String, String)> {
        (shaped.items.iter())
            .map(|i| (i.original.clone(), i.name.clone()))
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn include_then_exclude_over_the_servers_own_names() {
        let shaping = Shaping {
            tools: Filter {
                include: globs(&["echo", "get-*"]),
                exclude: globs(&["get-env"]),
            },
            ..Shaping::default()
        };
        let list = tools(&["echo", "add", "get-env", "get-sum", "get-"]);
        let shaped = shape(&shaping, ListKind::Tools, &list);
        let kept: Vec<&str> = shaped.items.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(kept, ["echo", "get-sum", "get-"]);
        // Nothing else changes: the item is the server's, byte for byte.
        assert_eq!(shaped.items[0].item.to_json(), list[0].to_json());
        assert!(matches!(shaped.items[0].item, Cow::Borrowed(_)));
        // Only `exclude`: everything else is kept; other lists are untouched by `tools`.
        let only_exclude = Shaping {
            prompts: Filter {
                include: Vec::new(),
                exclude: globs(&["*-secret"]),
            },
            ..Shaping::default()
        };
        let prompts = tools(&["a", "b-secret", "c"]);
        let shaped = shape(&only_exclude, ListKind::Prompts, &prompts);
        assert_eq!(shaped.items.len(), 2);
        assert_eq!(shape(&only_exclude, ListKind::Tools, &prompts).items.len(), 3);
    }

    #[test]
    fn resources_and_templates_are_filtered_by_uri() {
        let shaping = Shaping {
            resources: Filter {
                include: globs(&["demo://resource/static/*"]),
                exclude: globs(&["*/7"]),
            },
            ..Shaping::default()
        };
        let resource =
            |uri: &str| RawObject::parse(&format!(r#"{{"uri":"{uri}","name":"static"}}"#)).unwrap();
        let list = [
            resource("demo://resource/static/1"),
            resource("demo://resource/static/7"),
            resource("demo://resource/dynamic/1"),
        ];
        let shaped = shape(&shaping, ListKind::Resources, &list);
        assert_eq!(
            names(&shaped),
            pairs(&[("demo://resource/static/1", "demo://resource/static/1")])
        );
        let template =
            [RawObject::parse(r#"{"uriTemplate":"demo://resource/static/{id}","name":"static"}"#).unwrap()];
        assert_eq!(shape(&shaping, ListKind::Templates, &template).items.len(), 1);
    }

    #[test]
    fn renames_and_descriptions_change_only_the_name_and_description() {
        let shaping = Shaping {
            rename: pairs(&[("echo", "say")]),
            descriptions: pairs(&[("say", "Repeat a message back."), ("add", "Sum \"two\".")]),
            ..Shaping::default()
        };
        let list = tools(&["echo", "add", "other"]);
        let shaped = shape(&shaping, ListKind::Tools, &list);
        assert_eq!(
            names(&shaped),
            pairs(&[("echo", "say"), ("add", "add"), ("other", "other")])
        );
        assert_eq!(
            shaped.items[0].item.to_json(),
            r#"{"name":"echo","description":"Repeat a message back.","inputSchema":{"type":"object"},"_meta":{"k":[1, 2]},"x-vendor":true}"#
        );
        assert!(shaped.items[1]
            .item
            .to_json()
            .contains(r#""description":"Sum \"two\".""#));
        assert!(matches!(shaped.items[2].item, Cow::Borrowed(_)));
        // A tool without a description gets one appended.
        let bare = [RawObject::parse(r#"{"name":"echo"}"#).unwrap()];
        let shaped = shape(&shaping, ListKind::Tools, &bare);
        assert_eq!(
            shaped.items[0].item.to_json(),
            r#"{"name":"echo","description":"Repeat a message back."}"#
        );
        assert!(unmatched_keys(&shaping, &list).is_empty());
        assert_eq!(unmatched_keys(&shaping, &bare), ["descriptions.add"]);
    }

    #[test]
    fn a_rename_onto_a_kept_name_leaves_the_renamed_tool_out_and_swaps_work() {
        let shaping = Shaping {
            rename: pairs(&[("echo", "add")]),
            ..Shaping::default()
        };
        let list = tools(&["echo", "add"]);
        let shaped = shape(&shaping, ListKind::Tools, &list);
        assert_eq!(names(&shaped), pairs(&[("add", "add")]));
        assert_eq!(
            shaped.collisions,
            [RenameCollision {
                renamed: "echo".into(),
                name: "add".into()
            }]
        );
        // Renamed away, the name is free: a swap is no collision.
        let swap = Shaping {
            rename: pairs(&[("echo", "add"), ("add", "echo")]),
            ..Shaping::default()
        };
        let shaped = shape(&swap, ListKind::Tools, &list);
        assert_eq!(names(&shaped), pairs(&[("echo", "add"), ("add", "echo")]));
        assert!(shaped.collisions.is_empty());
        // A rename of a tool the server does not list is reported (the list arrived).
        let missing = Shaping {
            rename: pairs(&[("nope", "x")]),
            ..Shaping::default()
        };
        assert_eq!(unmatched_keys(&missing, &list), ["rename.nope"]);
    }

    #[test]
    fn the_catalog_serves_shaped_names_and_routes_them_to_the_servers_own() {
        use crate::catalog::{CatalogStore, Naming, UriMiss};
        use crate::config::UpstreamId;
        use std::sync::Arc;
        let shaping = Shaping {
            tools: Filter {
                include: globs(&["echo", "get-*"]),
                exclude: globs(&["get-env"]),
            },
            resources: Filter {
                include: Vec::new(),
                exclude: globs(&["demo://secret/*"]),
            },
            rename: pairs(&[("echo", "say")]),
            descriptions: pairs(&[("say", "Repeat a message back.")]),
            ..Shaping::default()
        };
        let id = UpstreamId::new("everything");
        let naming = Naming {
            shaping: Arc::new(shaping),
            ..Naming::new("everything", "__")
        };
        let store = CatalogStore::new(vec![(id.clone(), naming)]);
        assert!(store.replace(
            &id,
            ListKind::Tools,
            tools(&["echo", "add", "get-env", "get-sum"])
        ));
        let resource = |uri: &str| RawObject::parse(&format!(r#"{{"uri":"{uri}","name":"r"}}"#)).unwrap();
        store.replace(
            &id,
            ListKind::Resources,
            vec![resource("demo://secret/1"), resource("demo://open/1")],
        );
        let catalog = store.snapshot();
        let listed = catalog.list(ListKind::Tools);
        let exposed: Vec<&str> = listed.items.iter().map(|i| &*i.exposed).collect();
        assert_eq!(exposed, ["everything__get-sum", "everything__say"]);
        let say = listed.lookup("everything__say").unwrap();
        assert_eq!(say.original, "echo");
        assert_eq!(
            say.json.get(),
            r#"{"name":"everything__say","description":"Repeat a message back.","inputSchema":{"type":"object"},"_meta":{"k":[1, 2],"mcpmux/original":{"server":"everything","name":"echo"}},"x-vendor":true,"title":"echo"}"#
        );
        for unknown in ["everything__echo", "everything__add", "everything__get-env"] {
            assert!(listed.lookup(unknown).is_none(), "{unknown}");
        }
        assert_eq!(catalog.list(ListKind::Resources).items.len(), 1);
        // An excluded URI is unknown, however it is written.
        assert_eq!(catalog.resolve_uri("demo://secret/1"), Err(UriMiss::Unknown));
        assert_eq!(
            catalog.resolve_uri("mcpmux://everything/demo://secret/1"),
            Err(UriMiss::Unknown)
        );
        assert_eq!(
            catalog.resolve_uri("demo://open/1"),
            Ok((id.clone(), "demo://open/1".into()))
        );
        // A new list (list_changed) is shaped again.
        store.replace(&id, ListKind::Tools, tools(&["echo", "get-x"]));
        let exposed: Vec<String> = (store.snapshot().list(ListKind::Tools).items.iter())
            .map(|i| i.exposed.to_string())
            .collect();
        assert_eq!(exposed, ["everything__get-x", "everything__say"]);
    }

    #[test]
    fn problems_only_a_list_shows_are_noted_when_they_change() {
        let shaping = Shaping {
            rename: pairs(&[("echo", "add"), ("gone", "x")]),
            descriptions: pairs(&[("nothing", "N.")]),
            ..Shaping::default()
        };
        let id = UpstreamId::new("s");
        let mut noted = Vec::new();
        note_problems(&id, &shaping, &tools(&["echo", "add"]), &mut noted);
        assert_eq!(noted, ["rename.gone", "descriptions.nothing", "rename.echo"]);
        note_problems(&id, &shaping, &tools(&["echo", "gone"]), &mut noted);
        assert_eq!(noted, ["descriptions.nothing"]);
        note_problems(&id, &Shaping::default(), &tools(&["echo"]), &mut noted);
        assert!(noted.is_empty());
    }
}
