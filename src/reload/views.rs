//! What a reload changed of each host's view: the lists its endpoint (the whole catalog, or a
//! profile's view) and the policy for its principal let it see, before and after. A host is told
//! only of the lists whose view changed (a rule that hides one tool: `tools/list_changed` alone).

use crate::catalog::{profile, Catalog, ListKind};
use crate::config::Config;
use crate::policy::{Policy, PrincipalFacts, Viewer};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// One side of a reload: the catalog, the policy and the configuration (its profiles).
pub struct Side<'a> {
    pub catalog: &'a Catalog,
    pub policy: &'a Policy,
    pub config: &'a Config,
}

/// The lists whose view changed between `before` and `after`, per endpoint and principal
/// (worked out once for each: many sessions of one principal cost one).
pub struct ViewChanges<'a> {
    before: Side<'a>,
    after: Side<'a>,
    known: HashMap<String, Vec<ListKind>>,
}

impl<'a> ViewChanges<'a> {
    pub fn new(before: Side<'a>, after: Side<'a>) -> ViewChanges<'a> {
        ViewChanges {
            before,
            after,
            known: HashMap::new(),
        }
    }

    /// The lists a host at `profile` (`None`: the main endpoint) authenticated as `viewer`
    /// sees differently after than before.
    pub fn of(&mut self, profile: Option<&str>, viewer: Option<&dyn Viewer>) -> Vec<ListKind> {
        let key = who(profile, viewer);
        if let Some(kinds) = self.known.get(&key) {
            return kinds.clone();
        }
        let before = viewer.map(|v| v.facts());
        // An API key's groups and scopes are the configuration's: the new ones hold after.
        let renewed = viewer.and_then(|v| renewed_key(self.after.config, v));
        let after = match &renewed {
            Some((name, groups, scopes)) => Some(PrincipalFacts::new(
                name,
                groups.iter().map(String::as_str),
                scopes.iter().map(String::as_str),
            )),
            None => viewer.map(|v| v.facts()),
        };
        let kinds: Vec<ListKind> = (ListKind::ALL.into_iter())
            .filter(|&kind| {
                digest(&self.before, profile, before.as_ref(), kind)
                    != digest(&self.after, profile, after.as_ref(), kind)
            })
            .collect();
        self.known.insert(key, kinds.clone());
        kinds
    }
}

/// The name, groups and scopes `config` gives the API key `viewer` authenticated with; `None`
/// for a token's principal, or a key `config` no longer has (its next request is refused).
fn renewed_key<'c>(config: &'c Config, viewer: &dyn Viewer) -> Option<(&'c str, &'c [String], Vec<String>)> {
    let auth = config.auth.as_ref()?;
    let key = auth.api_key(viewer.api_key()?)?;
    Some((&key.name, &key.groups, auth.key_scopes(key)))
}

/// A key naming the endpoint and everything the rules match on.
fn who(profile: Option<&str>, viewer: Option<&dyn Viewer>) -> String {
    let mut key = format!("{}\u{0}", profile.unwrap_or(""));
    if let Some(viewer) = viewer {
        let facts = viewer.facts();
        key.push_str(facts.name);
        for part in [&facts.groups, &facts.scopes] {
            key.push('\u{0}');
            key.push_str(&part.join("\u{1}"));
        }
        // A key's facts are renewed from the configuration, a token's are not.
        key.push_str(if viewer.api_key().is_some() {
            "\u{0}key"
        } else {
            "\u{0}token"
        });
    }
    key
}

/// A digest of what a host at `profile` authenticated as `facts` sees of list `kind` on `side`
/// (the items, byte for byte, in order, and how a profile discovers tools): equal digests, same
/// view. A profile `side` does not
/// have, or a policy without a principal, sees nothing.
fn digest(side: &Side<'_>, profile: Option<&str>, facts: Option<&PrincipalFacts<'_>>, kind: ListKind) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let serving = match profile {
        None => None,
        Some(name) => match side.config.profile(name) {
            Some(serving) => Some(serving),
            None => return hasher.finish(),
        },
    };
    let view = match (side.policy.is_open(), facts) {
        (true, _) => None,
        (false, Some(facts)) => Some(side.policy.for_principal(facts)),
        (false, None) => return hasher.finish(),
    };
    // A profile that lists the meta-tools instead (or may) lists something else.
    if let (ListKind::Tools, Some(profile)) = (kind, serving) {
        (profile.discovery.as_str(), profile.token_budget).hash(&mut hasher);
    }
    let items = side.catalog.list(kind).items.iter();
    let visible = items
        .filter(|item| serving.is_none_or(|p| profile::admits_item(p, kind, item)))
        .filter(|item| view.as_ref().is_none_or(|v| v.allows(&item.exposed)));
    for item in visible {
        item.json.get().hash(&mut hasher);
    }
    hasher.finish()
}

#[cfg(test)]
#[path = "views_tests.rs"]
mod tests;
