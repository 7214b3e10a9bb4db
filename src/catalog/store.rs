//! The catalog store: each upstream's lists as it sent them, merged (shaped, namespaced, earlier
//! upstreams winning a clash) into snapshots published behind an atomic swap; the set of
//! upstreams changes with a reload.

use super::*;

/// One upstream's lists as it sent them, and the shaping problems last logged for them.
#[derive(Default)]
pub(super) struct Part {
    pub(super) lists: [Vec<RawObject>; 4],
    /// The `rename`/`descriptions` keys naming no tool and the rename collisions of the last
    /// tools list (logged when they change, not on every list).
    noted: Vec<String>,
}

/// Every upstream with its naming, in configuration order, and its lists in the same order.
pub(super) struct Parts {
    pub(super) namings: Arc<[(UpstreamId, Naming)]>,
    pub(super) lists: Vec<Part>,
    /// The longest exposed tool or prompt name (`gateway.max_name_length - name_reserve`).
    pub(super) name_budget: usize,
    /// The pinned tool definitions and their drifts (`[pinning]`).
    pub(super) pins: super::pins::PinStage,
}

/// Owns the per-upstream lists and publishes merged snapshots.
pub struct CatalogStore {
    pub(super) current: ArcSwap<Catalog>,
    /// Locked before `personal` when both are.
    pub(super) parts: Mutex<Parts>,
    /// Each principal's own lists of the upstreams whose connections are per principal.
    pub(super) personal: Mutex<super::personal::Overlays>,
}

impl CatalogStore {
    /// A store for these upstreams; earlier ones win a clash of exposed names.
    pub fn new(namings: Vec<(UpstreamId, Naming)>) -> Self {
        Self::with_name_budget(namings, names::DEFAULT_BUDGET)
    }

    /// [`CatalogStore::new`] whose tool and prompt names fit `name_budget` characters.
    pub fn with_name_budget(namings: Vec<(UpstreamId, Naming)>, name_budget: usize) -> Self {
        let lists = namings.iter().map(|_| Default::default()).collect();
        let namings: Arc<[(UpstreamId, Naming)]> = namings.into();
        let parts = Parts {
            namings,
            lists,
            name_budget,
            pins: Default::default(),
        };
        let store = CatalogStore {
            current: ArcSwap::from_pointee(Catalog::default()),
            parts: Mutex::new(parts),
            personal: Mutex::default(),
        };
        store.rebuild(&store.parts.lock(), 0);
        store
    }

    /// A reload changed the upstreams: from now on these, in this order. An upstream that stays
    /// (by id) keeps its lists, under its new naming; a new one starts empty; a gone one's items
    /// vanish.
    pub fn set_upstreams(&self, namings: Vec<(UpstreamId, Naming)>) {
        let mut parts = self.parts.lock();
        let lists = std::mem::take(&mut parts.lists);
        let mut old: IdMap<Part> = (parts.namings.iter().map(|(id, _)| id.clone()))
            .zip(lists)
            .collect();
        parts.lists = (namings.iter())
            .map(|(id, _)| old.remove(id).unwrap_or_default())
            .collect();
        self.personal.lock().keep_upstreams(&namings);
        (parts.pins).keep_servers(|name| namings.iter().any(|(id, _)| id.as_str() == name));
        parts.namings = namings.into();
        let epoch = self.snapshot().epoch + 1;
        self.rebuild(&parts, epoch);
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<Catalog> {
        self.current.load_full()
    }

    /// Replace one upstream's list of one kind (a list it sent); returns whether what hosts see
    /// changed. A tools list that leaves a `rename` or `descriptions` key of its server without a
    /// tool, or makes a rename collide, is logged (once, until that changes).
    pub fn replace(&self, upstream: &UpstreamId, kind: ListKind, items: Vec<RawObject>) -> bool {
        self.put(upstream, kind, items, true, &|| true)
    }

    /// [`CatalogStore::replace`] only while `current()` holds, checked under the same lock as a
    /// reload's [`CatalogStore::set_upstreams`]: an upstream a reload retired (whose id may be its
    /// replacement's now) writes nothing once the reload has moved on.
    pub fn replace_while(
        &self,
        upstream: &UpstreamId,
        kind: ListKind,
        items: Vec<RawObject>,
        current: &dyn Fn() -> bool,
    ) -> bool {
        self.put(upstream, kind, items, true, current)
    }

    fn put(
        &self,
        upstream: &UpstreamId,
        kind: ListKind,
        items: Vec<RawObject>,
        arrived: bool,
        current: &dyn Fn() -> bool,
    ) -> bool {
        let mut parts = self.parts.lock();
        if !current() {
            return false;
        }
        let Some(position) = parts.namings.iter().position(|(id, _)| id == upstream) else {
            return false;
        };
        let shaping = parts.namings[position].1.shaping.clone();
        if arrived && kind == ListKind::Tools {
            parts.pins.observe(upstream, &items);
        }
        let Some(slot) = parts.lists.get_mut(position) else {
            return false;
        };
        if arrived && kind == ListKind::Tools {
            shape::note_problems(upstream, &shaping, &items, &mut slot.noted);
        }
        slot.lists[kind as usize] = items;
        let before = self.snapshot();
        let after = self.rebuild(&parts, before.epoch + 1);
        after.list(kind).differs_from(before.list(kind))
    }

    /// Drop everything an upstream offered (it went away); returns the kinds that changed.
    pub fn clear(&self, upstream: &UpstreamId) -> Vec<ListKind> {
        self.clear_while(upstream, &|| true)
    }

    /// [`CatalogStore::clear`] only while `current()` holds (see [`CatalogStore::replace_while`]).
    pub fn clear_while(&self, upstream: &UpstreamId, current: &dyn Fn() -> bool) -> Vec<ListKind> {
        ListKind::ALL
            .into_iter()
            .filter(|&k| self.put(upstream, k, Vec::new(), false, current))
            .collect()
    }

    /// Merge `parts` into a new snapshot and publish it; a clash of names not seen in the
    /// previous snapshot is logged once, naming both upstreams.
    pub(super) fn rebuild(&self, parts: &Parts, epoch: u64) -> Arc<Catalog> {
        let lists = ListKind::ALL.map(|kind| merge(parts, kind, None));
        let before = self.current.load();
        for kind in ListKind::ALL {
            for clash in lists[kind as usize].fresh_clashes(before.list(kind)) {
                tracing::warn!(
                    "{} {:?} of upstream {:?} is hidden: upstream {:?} (earlier in the configuration) exposes the same {}; set a distinct `namespace` to list both",
                    kind.singular(),
                    clash.exposed,
                    clash.loser.as_str(),
                    clash.winner.as_str(),
                    kind.key_field(),
                );
            }
        }
        let catalog = Arc::new(Catalog {
            epoch,
            lists,
            namings: parts.namings.clone(),
            personal: false,
            tool_index: Default::default(),
        });
        self.current.store(catalog.clone());
        catalog
    }
}

/// One merged list of `parts`, with `own`'s lists in place of those of the upstreams it has.
/// Tool and prompt names then get the name budget ([`super::names`]) and the item its
/// original's `_meta`, and are listed by server, then exposed name.
pub(super) fn merge(parts: &Parts, kind: ListKind, own: Option<&IdMap<[Vec<RawObject>; 4]>>) -> ItemList {
    let mut list = ItemList::default();
    // Each item kept, and whether pins block it (a tool whose definition drifted under `mode =
    // "block"`: left out until approved, under the name it would have).
    let mut kept: Vec<(UpstreamId, String, String, RawObject, bool)> = Vec::new();
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for ((upstream, naming), part) in parts.namings.iter().zip(&parts.lists) {
        let lists = own.and_then(|own| own.get(upstream)).unwrap_or(&part.lists);
        let shaped = shape::shape(&naming.shaping, kind, &lists[kind as usize]);
        for shape::ShapedItem { original, name, item } in shaped.items {
            let exposed = match kind {
                ListKind::Tools | ListKind::Prompts => naming.expose_name(&name),
                ListKind::Resources | ListKind::Templates => naming.expose_uri(&name),
            };
            if let Some(&winner) = seen.get(&exposed) {
                list.shadowed.push(Shadowed {
                    exposed,
                    winner: kept[winner].0.clone(),
                    loser: upstream.clone(),
                });
                continue;
            }
            seen.insert(exposed.clone(), kept.len());
            let blocked = kind == ListKind::Tools && parts.pins.blocks(upstream, &original);
            kept.push((upstream.clone(), original, exposed, item.into_owned(), blocked));
        }
    }
    let named = matches!(kind, ListKind::Tools | ListKind::Prompts);
    let fitted = named.then(|| {
        let candidates: Vec<names::Candidate> = (kept.iter())
            .map(|(upstream, original, exposed, _, _)| names::Candidate {
                server: upstream.as_str(),
                original,
                exposed,
            })
            .collect();
        names::fit(&candidates, parts.name_budget)
    });
    for (n, (upstream, original, candidate, mut edited, blocked)) in kept.into_iter().enumerate() {
        let exposed = fitted
            .as_ref()
            .and_then(|f| f.get(n).cloned())
            .unwrap_or(candidate);
        if blocked {
            list.blocked
                .insert(exposed, parts.pins.blocked(&upstream, &original));
            continue;
        }
        edited.set_str(kind.key_field(), &exposed);
        if named {
            names::mark_original(&mut edited, kind, upstream.as_str(), &original);
        }
        list.items.push(ExposedItem {
            upstream,
            original,
            exposed: exposed.into(),
            json: edited.to_raw(),
        });
    }
    if named {
        (list.items)
            .sort_by(|a, b| (a.upstream.as_str(), &*a.exposed).cmp(&(b.upstream.as_str(), &*b.exposed)));
    }
    list.index = (list.items.iter().enumerate())
        .map(|(i, item)| (item.exposed.to_string(), i))
        .collect();
    list
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
