//! The name budget, the origin `_meta` and the order of merged lists.

use super::*;

fn obj(text: &str) -> RawObject {
    RawObject::parse(text).unwrap()
}

fn tools(names: &[&str]) -> Vec<RawObject> {
    (names.iter())
        .map(|n| obj(&serde_json::json!({ "name": n }).to_string()))
        .collect()
}

fn exposed(list: &ItemList) -> Vec<&str> {
    list.items.iter().map(|i| &*i.exposed).collect()
}

#[test]
fn names_outside_the_budget_are_mapped_and_still_reach_their_original() {
    let (a, b) = (UpstreamId::new("alpha"), UpstreamId::new("beta"));
    let store = CatalogStore::with_name_budget(
        vec![
            (b.clone(), Naming::new("b", "__")),
            (a.clone(), Naming::new("", "__")),
        ],
        32,
    );
    let long = "x".repeat(40);
    store.replace(
        &a,
        ListKind::Tools,
        tools(&["files.read", "files_read", &long, "数据"]),
    );
    store.replace(&b, ListKind::Tools, tools(&["fs/write", "3d"]));
    store.replace(&b, ListKind::Prompts, tools(&[&long]));
    let catalog = store.snapshot();
    let list = catalog.list(ListKind::Tools);
    for item in &list.items {
        assert!(names::fits(&item.exposed, 32), "{}", item.exposed);
        let found = list.lookup(&item.exposed).unwrap();
        assert_eq!(
            (&found.upstream, &found.original),
            (&item.upstream, &item.original)
        );
        let json: serde_json::Value = serde_json::from_str(item.json.get()).unwrap();
        assert_eq!(json["name"], *item.exposed);
        let origin = serde_json::json!({ "server": item.upstream.as_str(), "name": item.original });
        assert_eq!(json["_meta"]["mcpmux/original"], origin);
        assert_eq!(json["title"], item.original);
    }
    // The valid name keeps its name; the one mapped onto it takes a hash.
    assert_eq!(list.lookup("files_read").unwrap().original, "files_read");
    let dotted = list.items.iter().find(|i| i.original == "files.read").unwrap();
    assert!(
        dotted.exposed.starts_with("files_read_") && dotted.exposed.len() == 19,
        "{dotted:?}"
    );
    assert_eq!(list.lookup("b__fs_write").unwrap().original, "fs/write");
    assert_eq!(list.lookup("b__3d").unwrap().original, "3d");
    // By server name, then exposed name: alpha's before beta's (configured first).
    let servers: Vec<&str> = list.items.iter().map(|i| i.upstream.as_str()).collect();
    assert_eq!(servers, ["alpha", "alpha", "alpha", "alpha", "beta", "beta"]);
    let names = exposed(list);
    assert!(names[..4].is_sorted() && names[4..].is_sorted(), "{names:?}");
    // Prompts: the same budget and `_meta`, no title.
    let prompt = &catalog.list(ListKind::Prompts).items[0];
    assert!(
        prompt.exposed.len() == 32 && prompt.exposed.starts_with("b__xxx"),
        "{prompt:?}"
    );
    let json: serde_json::Value = serde_json::from_str(prompt.json.get()).unwrap();
    assert_eq!(json["_meta"]["mcpmux/original"]["name"], long);
    assert!(json.get("title").is_none());
    // A rebuild (a reload, a restart) gives the same names.
    let again = CatalogStore::with_name_budget(
        vec![
            (b.clone(), Naming::new("b", "__")),
            (a.clone(), Naming::new("", "__")),
        ],
        32,
    );
    again.replace(&b, ListKind::Tools, tools(&["3d", "fs/write"]));
    again.replace(
        &a,
        ListKind::Tools,
        tools(&["数据", &long, "files_read", "files.read"]),
    );
    assert_eq!(exposed(again.snapshot().list(ListKind::Tools)), names);
}

#[test]
fn the_earlier_upstream_still_wins_a_clash_and_a_title_or_meta_is_kept() {
    let (z, a) = (UpstreamId::new("zeta"), UpstreamId::new("alpha"));
    let store = CatalogStore::new(vec![
        (z.clone(), Naming::new("", "__")),
        (a.clone(), Naming::new("", "__")),
    ]);
    store.replace(
        &z,
        ListKind::Tools,
        vec![obj(r#"{"name":"echo","title":"Echo","_meta":{"k": [1, 2]}}"#)],
    );
    store.replace(&a, ListKind::Tools, tools(&["echo", "add"]));
    let catalog = store.snapshot();
    let list = catalog.list(ListKind::Tools);
    assert_eq!(
        list.lookup("echo").unwrap().upstream,
        z,
        "the earlier configured upstream"
    );
    assert_eq!(exposed(list), ["add", "echo"], "alpha's add before zeta's echo");
    assert_eq!(
        list.lookup("echo").unwrap().json.get(),
        r#"{"name":"echo","title":"Echo","_meta":{"k":[1, 2],"mcpmux/original":{"server":"zeta","name":"echo"}}}"#
    );
    assert_eq!(list.shadowed.len(), 1);
}
