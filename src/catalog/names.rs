//! The name budget: the exposed tool and prompt names every model API accepts. A pure function
//! of each item's server, original name and candidate name (namespace + separator + shaped
//! name) and of the whole set of candidates, so the same catalog gets the same names after a
//! restart, on another replica and after a reload.
//!
//! A candidate that already fits (at most `budget` characters of `[A-Za-z0-9_-]`, starting
//! with a letter or `_`: the Claude, OpenAI and Gemini rules at once) is kept as it is. Any
//! other is mapped character by character (a few accented Latin letters to their base letter,
//! everything else outside the alphabet to `_`, a `_` before a leading digit or dash); a mapped
//! name that is still too long, lost a letter with no readable stand-in, or now meets another
//! name is shortened to a readable head, `_` and a short SHA-256 hash of server and original
//! name, the hash growing until the name is unique.

use super::ListKind;
use crate::protocol::RawObject;
use std::collections::{HashMap, HashSet};

/// The budget when the configuration sets none (`gateway.max_name_length`, no reserve).
pub const DEFAULT_BUDGET: usize = 64;

/// The hash length (hex digits) of a shortened name; longer only when two still meet.
const HASH_HEX: usize = 8;

/// The `_meta` member naming where an exposed tool or prompt comes from.
pub const ORIGINAL_META: &str = "mcpmux/original";

/// One name to fit: the upstream's (configuration) name, its own name for the item, and the
/// name hosts would see before the budget.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub server: &'a str,
    pub original: &'a str,
    pub exposed: &'a str,
}

/// Whether `c` may appear in an exposed name.
fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Whether `name` is an exposed name every model API accepts within `budget` characters.
pub fn fits(name: &str, budget: usize) -> bool {
    crate::config::valid_exposed_name(name, budget)
}

/// A readable ASCII stand-in for a few common accented Latin letters.
fn transliterate(c: char) -> Option<&'static str> {
    Some(match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'ā' | 'ă' | 'ą' => "a",
        'À' | 'Á' | 'Â' | 'Ã' | 'Ä' | 'Å' | 'Ā' | 'Ă' | 'Ą' => "A",
        'æ' => "ae",
        'Æ' => "AE",
        'ç' | 'ć' | 'č' => "c",
        'Ç' | 'Ć' | 'Č' => "C",
        'ď' | 'đ' => "d",
        'Ď' | 'Đ' => "D",
        'è' | 'é' | 'ê' | 'ë' | 'ē' | 'ę' | 'ě' => "e",
        'È' | 'É' | 'Ê' | 'Ë' | 'Ē' | 'Ę' | 'Ě' => "E",
        'ì' | 'í' | 'î' | 'ï' | 'ī' => "i",
        'Ì' | 'Í' | 'Î' | 'Ï' | 'Ī' => "I",
        'ł' => "l",
        'Ł' => "L",
        'ñ' | 'ń' | 'ň' => "n",
        'Ñ' | 'Ń' | 'Ň' => "N",
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'ō' | 'ő' => "o",
        'Ò' | 'Ó' | 'Ô' | 'Õ' | 'Ö' | 'Ø' | 'Ō' | 'Ő' => "O",
        'œ' => "oe",
        'Œ' => "OE",
        'ř' => "r",
        'Ř' => "R",
        'ś' | 'š' | 'ş' => "s",
        'Ś' | 'Š' | 'Ş' => "S",
        'ß' => "ss",
        'ť' | 'ţ' => "t",
        'Ť' | 'Ţ' => "T",
        'ù' | 'ú' | 'û' | 'ü' | 'ū' | 'ů' | 'ű' => "u",
        'Ù' | 'Ú' | 'Û' | 'Ü' | 'Ū' | 'Ů' | 'Ű' => "U",
        'ý' | 'ÿ' => "y",
        'Ý' | 'Ÿ' => "Y",
        'ź' | 'ż' | 'ž' => "z",
        'Ź' | 'Ż' | 'Ž' => "Z",
        _ => return None,
    })
}

/// `name` in the alphabet: each character kept, transliterated or replaced by `_`, and a `_`
/// before a first character that may not start a name. Also whether a non-ASCII character had
/// no stand-in (the name lost something a reader would need).
pub fn map(name: &str) -> (String, bool) {
    let mut out = String::with_capacity(name.len());
    let mut lossy = false;
    for c in name.chars() {
        if allowed(c) {
            out.push(c);
        } else if let Some(ascii) = transliterate(c) {
            out.push_str(ascii);
        } else {
            lossy |= !c.is_ascii();
            out.push('_');
        }
    }
    if !out.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        out.insert(0, '_');
    }
    (out, lossy)
}

/// The hex SHA-256 of server and original name (a NUL between them).
fn digest(server: &str, original: &str) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    context.update(server.as_bytes());
    context.update(&[0]);
    context.update(original.as_bytes());
    (context.finish().as_ref().iter())
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `mapped` shortened to fit `budget`: its head, `_` and the first `hex` digits of `digest`.
fn shortened(mapped: &str, digest: &str, hex: usize, budget: usize) -> String {
    let hex = hex.min(digest.len()).min(budget.saturating_sub(1));
    let head = budget.saturating_sub(hex + 1).min(mapped.len());
    // `mapped` is ASCII: any byte index is a character boundary.
    format!("{}_{}", &mapped[..head], &digest[..hex])
}

/// The exposed name of each candidate, in the same order: each fits `budget` and differs from
/// every other (the candidates' own names are distinct, as the merge leaves them).
pub fn fit(candidates: &[Candidate<'_>], budget: usize) -> Vec<String> {
    let mut names: Vec<Option<String>> = (candidates.iter())
        .map(|c| fits(c.exposed, budget).then(|| c.exposed.to_string()))
        .collect();
    let mut taken: HashSet<String> = names.iter().flatten().cloned().collect();
    let mapped: Vec<(String, bool)> = candidates.iter().map(|c| map(c.exposed)).collect();
    // A mapped name two candidates share is neither's: both get a hash.
    let mut uses: HashMap<&str, usize> = HashMap::new();
    for (i, (name, _)) in mapped.iter().enumerate() {
        if names[i].is_none() {
            *uses.entry(name.as_str()).or_default() += 1;
        }
    }
    let mut hashed = Vec::new();
    for (i, (name, lossy)) in mapped.iter().enumerate() {
        if names[i].is_some() {
            continue;
        }
        let alone = uses.get(name.as_str()) == Some(&1);
        if alone && !lossy && name.len() <= budget && !taken.contains(name) {
            taken.insert(name.clone());
            names[i] = Some(name.clone());
        } else {
            hashed.push(i);
        }
    }
    // In an order of their own (not the list's), so the set alone decides who extends a hash.
    hashed.sort_by(|&a, &b| {
        let key = |i: usize| {
            (
                candidates[i].server,
                candidates[i].original,
                candidates[i].exposed,
            )
        };
        key(a).cmp(&key(b))
    });
    for i in hashed {
        let c = &candidates[i];
        let digest = digest(c.server, c.original);
        let mut hex = HASH_HEX;
        let mut name = shortened(&mapped[i].0, &digest, hex, budget);
        while taken.contains(&name) && hex < digest.len() && hex + 1 < budget {
            hex += 2;
            name = shortened(&mapped[i].0, &digest, hex, budget);
        }
        taken.insert(name.clone());
        names[i] = Some(name);
    }
    names.into_iter().map(Option::unwrap_or_default).collect()
}

/// Mark `item` (a tool or prompt as hosts see it) with its origin: `_meta["mcpmux/original"]`
/// = `{"server": …, "name": …}` (merged into its `_meta`, every other member as sent), and a
/// tool without a `title` gets its original name as one.
pub fn mark_original(item: &mut RawObject, kind: ListKind, server: &str, original: &str) {
    let mut meta = item.get_object("_meta").unwrap_or_default();
    let origin = serde_json::json!({ "server": server, "name": original });
    meta.set(ORIGINAL_META, crate::protocol::message::raw(origin.to_string()));
    item.set("_meta", meta.to_raw());
    if kind == ListKind::Tools && !item.contains("title") {
        item.set_str("title", original);
    }
}

#[cfg(test)]
#[path = "names_tests.rs"]
mod tests;
