//! A small table of generic English synonyms for query terms ("remove" also looks for "delete"),
//! so a query worded differently from a tool's description still meets it. Only everyday verbs
//! and nouns, nothing specific to one server or product.

use super::tokens::stem;

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

/// Calls `emit` with the stems of the other words of every group `term` (a stem) belongs to.
pub(super) fn for_each_synonym(term: &str, buf: &mut String, emit: &mut dyn FnMut(&str)) {
    for group in GROUPS {
        let member = group.iter().any(|w| {
            buf.clear();
            buf.push_str(w);
            stem(buf);
            buf == term
        });
        if !member {
            continue;
        }
        for w in group.iter() {
            buf.clear();
            buf.push_str(w);
            stem(buf);
            if buf != term {
                emit(buf);
            }
        }
    }
}
