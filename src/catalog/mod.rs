//! The merged view of every upstream's tools, prompts, resources and templates, shaped by each
//! server's `tools`/`prompts`/`resources`/`rename`/`descriptions` and swapped atomically on
//! change; exposed-name and URI resolution; mcpmux's own opaque list cursors and the pages
//! served from a snapshot.

pub mod cursor;
pub mod freshness;
pub mod names;
pub mod pages;
mod personal;
mod pins;
pub mod profile;
pub mod results;
pub mod search;
pub mod shape;
mod store;
pub mod uri;

pub use pins::{BlockedItem, DriftSink};
pub use store::CatalogStore;

use crate::config::{IdMap, Shaping, UpstreamId};
use crate::protocol::RawObject;
use crate::util::fast_map::FastMap;
use arc_swap::ArcSwap;
use parking_lot::Mutex;
use serde_json::value::RawValue;
use std::sync::Arc;

/// The four paginated lists an MCP server may offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListKind {
    Tools,
    Prompts,
    Resources,
    Templates,
}

impl ListKind {
    pub const ALL: [ListKind; 4] = [
        ListKind::Tools,
        ListKind::Prompts,
        ListKind::Resources,
        ListKind::Templates,
    ];

    /// The list method an upstream answers.
    pub fn method(self) -> &'static str {
        match self {
            ListKind::Tools => "tools/list",
            ListKind::Prompts => "prompts/list",
            ListKind::Resources => "resources/list",
            ListKind::Templates => "resources/templates/list",
        }
    }

    /// The member of the list result holding the items.
    pub fn field(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources => "resources",
            ListKind::Templates => "resourceTemplates",
        }
    }

    /// The member of an item that mcpmux rewrites.
    fn key_field(self) -> &'static str {
        match self {
            ListKind::Tools | ListKind::Prompts => "name",
            ListKind::Resources => "uri",
            ListKind::Templates => "uriTemplate",
        }
    }

    /// What one item of this list is called in messages.
    fn singular(self) -> &'static str {
        match self {
            ListKind::Tools => "tool",
            ListKind::Prompts => "prompt",
            ListKind::Resources => "resource",
            ListKind::Templates => "resource template",
        }
    }

    /// The notification that tells hosts this list changed.
    pub fn list_changed_notification(self) -> &'static str {
        match self {
            ListKind::Tools => "notifications/tools/list_changed",
            ListKind::Prompts => "notifications/prompts/list_changed",
            ListKind::Resources | ListKind::Templates => "notifications/resources/list_changed",
        }
    }

    /// The server capability that announces this list.
    pub fn capability(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources | ListKind::Templates => "resources",
        }
    }
}

/// One item as hosts see it.
#[derive(Debug)]
pub struct ExposedItem {
    /// The owning upstream.
    pub upstream: UpstreamId,
    /// The upstream's own name or URI.
    pub original: String,
    /// The name or URI hosts see (what a policy's globs are matched against).
    pub exposed: Box<str>,
    /// The serialised item with the exposed name or URI.
    pub json: Box<RawValue>,
}

/// One merged list with its lookup index (exposed key → position) and the pages served so far.
#[derive(Debug, Default)]
pub struct ItemList {
    pub items: Vec<ExposedItem>,
    index: FastMap<String, usize>,
    /// Items left out because an earlier upstream exposes the same name or URI.
    pub shadowed: Vec<Shadowed>,
    /// Tools left out because their definition drifted from its pin, by exposed name.
    blocked: FastMap<String, BlockedItem>,
    pages: pages::PageCache,
}

impl ItemList {
    /// Find an item by the name or URI hosts see.
    pub fn lookup(&self, exposed: &str) -> Option<&ExposedItem> {
        self.index.get(exposed).map(|&i| &self.items[i])
    }

    /// A tool left out because its definition drifted from its pin, by the name hosts saw.
    pub fn blocked(&self, exposed: &str) -> Option<&BlockedItem> {
        self.blocked.get(exposed)
    }

    /// Whether hosts would see a different list in `other` (the items, their order and text).
    pub fn differs_from(&self, other: &ItemList) -> bool {
        let json =
            |list: &ItemList| -> Vec<Box<str>> { list.items.iter().map(|i| i.json.get().into()).collect() };
        self.items.len() != other.items.len() || json(self) != json(other)
    }

    /// How many of `upstream`'s items are listed.
    pub fn count_of(&self, upstream: &UpstreamId) -> usize {
        self.items.iter().filter(|i| i.upstream == *upstream).count()
    }

    /// The clashes of this list that `before` did not have.
    fn fresh_clashes<'a>(&'a self, before: &'a ItemList) -> impl Iterator<Item = &'a Shadowed> {
        (self.shadowed.iter()).filter(|clash| !before.shadowed.contains(clash))
    }

    /// How many of `upstream`'s items another upstream's item hides.
    pub fn shadowed_count_of(&self, upstream: &UpstreamId) -> usize {
        self.shadowed.iter().filter(|s| s.loser == *upstream).count()
    }
}

/// An upstream item hidden by an earlier upstream's item with the same exposed name or URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shadowed {
    pub exposed: String,
    /// The upstream whose item hosts see (earlier in configuration order).
    pub winner: UpstreamId,
    /// The upstream whose item is left out.
    pub loser: UpstreamId,
}

/// How an upstream's names are exposed: its namespace, and its shaping (which items, which
/// tool names).
#[derive(Debug, Clone)]
pub struct Naming {
    pub namespace: String,
    pub separator: String,
    pub shaping: Arc<Shaping>,
}

impl Naming {
    /// A naming that shapes nothing.
    pub fn new(namespace: impl Into<String>, separator: impl Into<String>) -> Self {
        Naming {
            namespace: namespace.into(),
            separator: separator.into(),
            shaping: Arc::default(),
        }
    }

    /// The name hosts see for an upstream tool or prompt.
    pub fn expose_name(&self, name: &str) -> String {
        if self.namespace.is_empty() {
            name.to_string()
        } else {
            format!("{}{}{}", self.namespace, self.separator, name)
        }
    }

    /// The URI hosts see for an upstream resource URI or template.
    pub fn expose_uri(&self, uri: &str) -> String {
        uri::expose(&self.namespace, uri)
    }
}

/// Why a URI a host sent routes to no upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UriMiss {
    /// No upstream lists it or has a template that matches it.
    Unknown,
    /// Several upstreams do: the URIs that name each of them.
    Ambiguous(Vec<String>),
}

/// An immutable snapshot of the merged catalog.
#[derive(Debug, Default)]
pub struct Catalog {
    /// Bumps on every change.
    pub epoch: u64,
    lists: [ItemList; 4],
    /// Every upstream with its naming, in configuration order.
    namings: Arc<[(UpstreamId, Naming)]>,
    /// Whether it is one principal's (with its own lists of per-principal upstreams).
    personal: bool,
    /// The search index of its tools, built the first time a search asks (once per snapshot).
    tool_index: std::sync::OnceLock<search::SearchIndex>,
}

impl Catalog {
    /// Whether it is one principal's own (its lists differ from other principals').
    pub fn is_personal(&self) -> bool {
        self.personal
    }

    /// The search index of its tools (positions are those of `list(ListKind::Tools).items`),
    /// built on first use and kept with the snapshot: a new snapshot, a new index.
    pub fn tool_index(&self) -> &search::SearchIndex {
        (self.tool_index).get_or_init(|| {
            let tools = &self.list(ListKind::Tools).items;
            search::SearchIndex::new(tools.iter().map(|item| item.json.get()))
        })
    }

    /// The merged list of one kind.
    pub fn list(&self, kind: ListKind) -> &ItemList {
        &self.lists[kind as usize]
    }

    /// Route a URI a host sent to `(upstream, original URI)`.
    ///
    /// Prefixed URIs route by their namespace. A bare URI (tools hand them out: server-everything
    /// tells the model to read `demo://resource/dynamic/text/4`) goes to: an unprefixed upstream
    /// that lists it, else the one upstream that lists it, else an unprefixed upstream with a
    /// matching template, else the one upstream with a matching template, else the only
    /// unprefixed upstream. Several namespaced owners and no unprefixed one is
    /// [`UriMiss::Ambiguous`], with the `mcpmux://` forms that name each.
    ///
    /// A URI its upstream's `resources` shaping leaves out is [`UriMiss::Unknown`].
    pub fn resolve_uri(&self, exposed: &str) -> Result<(UpstreamId, String), UriMiss> {
        let (upstream, original) = self.route_uri(exposed)?;
        let admitted = self
            .naming(&upstream)
            .is_none_or(|n| n.shaping.resources.admits(&original));
        if !admitted {
            return Err(UriMiss::Unknown);
        }
        Ok((upstream, original))
    }

    /// [`Catalog::resolve_uri`] before the shaping's word.
    fn route_uri(&self, exposed: &str) -> Result<(UpstreamId, String), UriMiss> {
        if let Some((ns, original)) = uri::split(exposed) {
            if let Some((id, _)) = self.namings.iter().find(|(_, n)| n.namespace == ns) {
                return Ok((id.clone(), original.to_string()));
            }
        }
        let found = |id: &UpstreamId| (id.clone(), exposed.to_string());
        if let Some(item) = self.list(ListKind::Resources).lookup(exposed) {
            if self.is_unprefixed(&item.upstream) {
                return Ok(found(&item.upstream));
            }
        }
        let listing = self.owners(ListKind::Resources, |item| item.original == exposed);
        let matching = self.owners(ListKind::Templates, |t| {
            uri::template_matches(&t.original, exposed)
        });
        for owners in [listing, matching] {
            let unprefixed: Vec<&UpstreamId> = owners.iter().filter(|id| self.is_unprefixed(id)).collect();
            let owners_ref: Vec<&UpstreamId> = owners.iter().collect();
            match (unprefixed.as_slice(), owners_ref.as_slice()) {
                ([only], _) | ([], [only]) => return Ok(found(only)),
                ([], []) => {}
                _ => return Err(UriMiss::Ambiguous(self.exposed_forms(&owners, exposed))),
            }
        }
        let mut unprefixed = self.namings.iter().filter(|(_, n)| n.namespace.is_empty());
        match (unprefixed.next(), unprefixed.next()) {
            (Some((only, _)), None) => Ok(found(only)),
            _ => Err(UriMiss::Unknown),
        }
    }

    fn is_unprefixed(&self, upstream: &UpstreamId) -> bool {
        self.naming(upstream).is_some_and(|n| n.namespace.is_empty())
    }

    /// The upstreams (in configuration order, once each) with an item of `kind` that `hit`s.
    fn owners(&self, kind: ListKind, hit: impl Fn(&ExposedItem) -> bool) -> Vec<UpstreamId> {
        let mut owners: Vec<UpstreamId> = Vec::new();
        for item in self.list(kind).items.iter().filter(|i| hit(i)) {
            if !owners.contains(&item.upstream) {
                owners.push(item.upstream.clone());
            }
        }
        owners
    }

    /// How hosts name `original` of each upstream in `owners`.
    fn exposed_forms(&self, owners: &[UpstreamId], original: &str) -> Vec<String> {
        (owners.iter())
            .filter_map(|id| self.naming(id).map(|n| n.expose_uri(original)))
            .collect()
    }

    /// The naming rules of an upstream.
    pub fn naming(&self, upstream: &UpstreamId) -> Option<&Naming> {
        self.namings.iter().find(|(id, _)| id == upstream).map(|(_, n)| n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: usize) -> UpstreamId {
        UpstreamId::new(&format!("u{n}"))
    }

    fn obj(text: &str) -> RawObject {
        RawObject::parse(text).unwrap()
    }

    fn store() -> CatalogStore {
        CatalogStore::new(vec![
            (id(0), Naming::new("a", "__")),
            (id(1), Naming::new("", "__")),
        ])
    }

    #[test]
    fn names_are_namespaced_and_resolved_by_lookup() {
        let s = store();
        assert!(s.replace(
            &id(0),
            ListKind::Tools,
            vec![obj(r#"{"name":"x__y","extra":{"k":1}}"#)]
        ));
        assert!(s.replace(&id(1), ListKind::Tools, vec![obj(r#"{"name":"plain"}"#)]));
        let cat = s.snapshot();
        let tools = cat.list(ListKind::Tools);
        let item = tools.lookup("a__x__y").unwrap();
        assert_eq!((item.upstream.clone(), item.original.as_str()), (id(0), "x__y"));
        assert_eq!(
            item.json.get(),
            r#"{"name":"a__x__y","extra":{"k":1},"_meta":{"mcpmux/original":{"server":"u0","name":"x__y"}},"title":"x__y"}"#
        );
        assert_eq!(tools.lookup("plain").unwrap().upstream, id(1));
        assert!(tools.lookup("x__y").is_none());
        assert!(!s.replace(&id(1), ListKind::Tools, vec![obj(r#"{"name":"plain"}"#)]));
        assert_eq!(s.clear(&id(0)), vec![ListKind::Tools]);
        // An upstream is known by its config name, not by where it sits: an unknown one changes nothing.
        assert!(!s.replace(
            &UpstreamId::new("gone"),
            ListKind::Tools,
            vec![obj(r#"{"name":"z"}"#)]
        ));
        assert!(s.snapshot().list(ListKind::Tools).lookup("z").is_none());
    }

    #[test]
    fn a_new_set_of_upstreams_keeps_the_lists_of_those_that_stay_and_drops_the_others() {
        let s = store();
        s.replace(&id(0), ListKind::Tools, vec![obj(r#"{"name":"t"}"#)]);
        s.replace(&id(1), ListKind::Tools, vec![obj(r#"{"name":"plain"}"#)]);
        let before = s.snapshot();
        // u1 goes, u2 comes (first, so it would win a clash), u0 stays under a new namespace.
        s.set_upstreams(vec![
            (id(2), Naming::new("", "__")),
            (id(0), Naming::new("b", "__")),
        ]);
        let after = s.snapshot();
        let tools = after.list(ListKind::Tools);
        assert!(after.epoch > before.epoch);
        assert!(
            tools.lookup("plain").is_none(),
            "the removed upstream's items vanish"
        );
        assert_eq!(tools.lookup("b__t").map(|i| i.upstream.clone()), Some(id(0)));
        assert!(tools.differs_from(before.list(ListKind::Tools)));
        assert!(!after
            .list(ListKind::Prompts)
            .differs_from(before.list(ListKind::Prompts)));
        assert!(after.naming(&id(1)).is_none() && after.naming(&id(2)).is_some());
        // The new one starts empty and is fed by id; the gone one is fed no more.
        assert!(s.replace(&id(2), ListKind::Tools, vec![obj(r#"{"name":"plain"}"#)]));
        assert!(!s.replace(&id(1), ListKind::Tools, vec![obj(r#"{"name":"z"}"#)]));
        let now = s.snapshot();
        let names: Vec<&str> = now
            .list(ListKind::Tools)
            .items
            .iter()
            .map(|i| &*i.exposed)
            .collect();
        assert_eq!(
            names,
            vec!["b__t", "plain"],
            "by server name (u0, u2), not configuration order"
        );
        // A retired writer (the old slot of a restarted server) writes nothing, not even a clear.
        assert!(!s.replace_while(&id(0), ListKind::Tools, Vec::new(), &|| false));
        assert!(s.clear_while(&id(0), &|| false).is_empty());
        assert!(s.snapshot().list(ListKind::Tools).lookup("b__t").is_some());
    }

    fn namespaced(names: &[&str]) -> CatalogStore {
        let namings = names.iter().enumerate().map(|(n, ns)| {
            let naming = Naming::new(ns.to_string(), "__");
            (id(n), naming)
        });
        CatalogStore::new(namings.collect())
    }

    #[test]
    fn bare_uris_resolve_to_their_one_owner_or_name_the_forms_that_work() {
        let s = namespaced(&["a", "b"]);
        let listed = |uri: &str| vec![obj(&format!(r#"{{"uri":"{uri}","name":"r"}}"#))];
        let template = |t: &str| vec![obj(&format!(r#"{{"uriTemplate":"{t}","name":"t"}}"#))];
        s.replace(
            &id(0),
            ListKind::Templates,
            template("demo://resource/dynamic/text/{id}"),
        );
        s.replace(&id(1), ListKind::Resources, listed("shared://x"));
        s.replace(
            &id(0),
            ListKind::Resources,
            [listed("demo://resource/static/1"), listed("shared://x")].concat(),
        );
        s.replace(&id(1), ListKind::Templates, template("other://{id}"));
        let cat = s.snapshot();
        assert_eq!(
            cat.resolve_uri("demo://resource/dynamic/text/4"),
            Ok((id(0), "demo://resource/dynamic/text/4".into()))
        );
        assert_eq!(cat.resolve_uri("other://7"), Ok((id(1), "other://7".into())));
        assert_eq!(
            cat.resolve_uri("shared://x"),
            Err(UriMiss::Ambiguous(vec![
                "mcpmux://a/shared://x".into(),
                "mcpmux://b/shared://x".into()
            ]))
        );
        assert_eq!(cat.resolve_uri("nothing://here"), Err(UriMiss::Unknown));
        // Two templates that both match: ambiguous too.
        s.replace(
            &id(1),
            ListKind::Templates,
            template("demo://resource/dynamic/text/{n}"),
        );
        assert!(matches!(
            s.snapshot().resolve_uri("demo://resource/dynamic/text/4"),
            Err(UriMiss::Ambiguous(forms)) if forms.len() == 2
        ));
    }

    #[test]
    fn a_clash_hides_the_later_item_and_is_new_only_once() {
        let s = CatalogStore::new(vec![
            (id(0), Naming::new("", "__")),
            (id(1), Naming::new("", "__")),
        ]);
        s.replace(
            &id(1),
            ListKind::Tools,
            vec![obj(r#"{"name":"echo"}"#), obj(r#"{"name":"add"}"#)],
        );
        let before = s.snapshot();
        assert!(before.list(ListKind::Tools).shadowed.is_empty());
        s.replace(&id(0), ListKind::Tools, vec![obj(r#"{"name":"echo"}"#)]);
        let after = s.snapshot();
        let tools = after.list(ListKind::Tools);
        assert_eq!(
            tools.shadowed,
            vec![Shadowed {
                exposed: "echo".into(),
                winner: id(0),
                loser: id(1)
            }]
        );
        assert_eq!((tools.count_of(&id(0)), tools.count_of(&id(1))), (1, 1));
        assert_eq!(
            (tools.shadowed_count_of(&id(0)), tools.shadowed_count_of(&id(1))),
            (0, 1)
        );
        assert_eq!(tools.fresh_clashes(before.list(ListKind::Tools)).count(), 1);
        // A rebuild for another reason keeps the clash but does not report it again.
        s.replace(&id(1), ListKind::Prompts, vec![obj(r#"{"name":"p"}"#)]);
        let again = s.snapshot();
        assert_eq!(again.list(ListKind::Tools).fresh_clashes(tools).count(), 0);
        assert_eq!(again.list(ListKind::Tools).shadowed.len(), 1);
    }

    #[test]
    fn uris_route_by_prefix_then_by_unprefixed_owner() {
        let s = store();
        s.replace(
            &id(0),
            ListKind::Resources,
            vec![obj(r#"{"uri":"test://static/0","name":"s"}"#)],
        );
        s.replace(
            &id(1),
            ListKind::Templates,
            vec![obj(r#"{"uriTemplate":"demo://t/{id}","name":"t"}"#)],
        );
        let cat = s.snapshot();
        assert_eq!(
            cat.resolve_uri("mcpmux://a/test://static/0"),
            Ok((id(0), "test://static/0".into()))
        );
        assert_eq!(cat.resolve_uri("demo://t/4"), Ok((id(1), "demo://t/4".into())));
        assert_eq!(cat.resolve_uri("other://x"), Ok((id(1), "other://x".into())));
        // A bare URI that only a namespaced upstream lists goes to it.
        assert_eq!(
            cat.resolve_uri("test://static/0"),
            Ok((id(0), "test://static/0".into()))
        );
        assert_eq!(
            cat.list(ListKind::Resources).items[0].json.get(),
            r#"{"uri":"mcpmux://a/test://static/0","name":"s"}"#
        );
    }
}
