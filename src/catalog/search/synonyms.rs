//! A small table of generic English synonyms for query terms ("remove" also looks for "delete"),
//! so a query worded differently from a tool's description still meets it. Only everyday verbs
//! and nouns, nothing specific to one server or product.

use super::tokens::stem;
use std::sync::OnceLock;

/// Groups of words that mean the same thing in a request for a tool.
const GROUPS: &[&[&str]] = &[
    &["remove", "delete", "erase"],
    &["get", "fetch", "retrieve", "obtain"],
    &["find", "search", "lookup", "locate"],
    &["create", "make", "add"],
    &["update", "modify", "edit", "change"],
    &["run", "execute", "invoke"],
    &["show", "display", "view"],
    &["list", "enumerate"],
    &["picture", "image", "photo"],
    &["write", "save", "store"],
    &["start", "begin", "launch"],
    &["stop", "halt", "terminate"],
    &["directory", "folder"],
    &["document", "doc"],
    &["website", "site", "webpage"],
    &["navigate", "visit", "go"],
    &["click", "press", "tap"],
    &["wait", "pause", "sleep"],
    &["copy", "duplicate"],
    &["error", "failure", "exception"],
    &["user", "person", "people", "member"],
    &["close", "shut"],
];

/// The groups with every word stemmed as the index stems it, computed once.
fn stemmed_groups() -> &'static [Vec<String>] {
    static STEMMED: OnceLock<Vec<Vec<String>>> = OnceLock::new();
    STEMMED.get_or_init(|| {
        GROUPS
            .iter()
            .map(|group| {
                group
                    .iter()
                    .map(|w| {
                        let mut s = (*w).to_owned();
                        stem(&mut s);
                        s
                    })
                    .collect()
            })
            .collect()
    })
}

/// Calls `emit` with the other words of every group `term` (a stem) belongs to.
pub(super) fn for_each_synonym(term: &str, emit: &mut dyn FnMut(&str)) {
    for group in stemmed_groups() {
        if group.iter().any(|w| w == term) {
            for w in group.iter().filter(|w| *w != term) {
                emit(w);
            }
        }
    }
}
