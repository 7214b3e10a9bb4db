//! Every problem of a configuration at once. The structural pass deserialises the merged tree
//! again and again, each time reporting the error and taking out the key it is about (an
//! unknown key, a value of the wrong type, a table missing a required key), so the rest of its
//! table is still checked. Once none is left, each section that had one (a server, a profile, a
//! `[[policy]]` rule, `[gateway]`, `[auth]`, `[audit]`, `[cluster]`) is dropped whole, so that
//! the semantic checks never see it and report no follow-on errors about it (a misspelt
//! `comand` is not also a missing `command`). The semantic checks then collect one error per
//! section (see `Ctx::section`).

use super::raw::RawConfig;
use super::sources::Sources;
use super::ConfigError;
use serde::Deserialize;
use std::ops::Range;
use toml_edit::{Item, Table, TableLike, Value};

/// More errors than this and the rest are not looked for (a file that is not a configuration).
const MOST: usize = 200;

/// What the structural pass dropped, so that the semantic checks do not cascade.
#[derive(Default)]
pub(super) struct Dropped {
    /// Top-level tables dropped whole (`gateway`, `auth`, `audit`, `cluster`, ...).
    pub(super) sections: Vec<String>,
    /// Servers dropped: still names profiles and policy may use.
    pub(super) servers: Vec<String>,
}

impl Dropped {
    pub(super) fn section(&self, name: &str) -> bool {
        self.sections.iter().any(|s| s == name)
    }
}

/// One segment of a path into the tree.
#[derive(Clone, Debug)]
enum Seg {
    Key(String),
    Index(usize),
}

/// The raw tables of `root`, every structural error (in `errors`), and what was dropped to get
/// there; `None` when an error could not be placed in the tree (then it is the last reported).
pub(super) fn deserialize(
    mut root: Table,
    sources: &Sources,
    errors: &mut Vec<ConfigError>,
) -> Option<(RawConfig, Dropped)> {
    let mut dropped = Dropped::default();
    let mut sections: Vec<Vec<Seg>> = Vec::new();
    let mut pruned = false;
    loop {
        let document = toml_edit::de::Deserializer::from(toml_edit::DocumentMut::from(root.clone()));
        let err = match RawConfig::deserialize(document) {
            Ok(raw) if pruned || sections.is_empty() => return Some((raw, dropped)),
            Ok(_) => {
                // Every problem is known: now drop the sections that had one, whole (the last
                // element of a list first, so that the indices still hold).
                sections.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| index(b).cmp(&index(a))));
                for section in &sections {
                    remove(&mut root, section);
                }
                pruned = true;
                continue;
            }
            Err(err) if pruned => {
                errors.push(sources.parse_error(err.message(), err.span()));
                return None;
            }
            Err(err) => err,
        };
        errors.push(sources.parse_error(err.message(), err.span()));
        let path = err.span().and_then(|span| find(&root, &span));
        let (Some(path), true) = (path, errors.len() < MOST) else {
            return None;
        };
        let section = path[..section_len(&path)].to_vec();
        if !sections.iter().any(|s| same(s, &section)) {
            note(&section, &mut dropped);
            sections.push(section);
        }
        if !remove(&mut root, &path) {
            return None;
        }
    }
}

fn index(path: &[Seg]) -> usize {
    match path.last() {
        Some(Seg::Index(i)) => *i,
        _ => 0,
    }
}

fn same(a: &[Seg], b: &[Seg]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|pair| match pair {
            (Seg::Key(x), Seg::Key(y)) => x == y,
            (Seg::Index(x), Seg::Index(y)) => x == y,
            _ => false,
        })
}

/// How much of `path` names the section it is in.
fn section_len(path: &[Seg]) -> usize {
    match path.first() {
        Some(Seg::Key(k)) if matches!(k.as_str(), "servers" | "profiles" | "policy") => path.len().min(2),
        _ => 1,
    }
}

fn note(section: &[Seg], dropped: &mut Dropped) {
    match section {
        [Seg::Key(top), Seg::Key(name)] if top == "servers" => dropped.servers.push(name.clone()),
        [Seg::Key(top), ..] => dropped.sections.push(top.clone()),
        _ => {}
    }
}

fn contains(span: Option<Range<usize>>, at: &Range<usize>) -> bool {
    span.is_some_and(|s| s.start <= at.start && (at.start < s.end || s.start == s.end))
}

/// The path of the deepest key or element whose key or value holds `at`.
fn find(table: &dyn TableLike, at: &Range<usize>) -> Option<Vec<Seg>> {
    for (key, item) in table.iter() {
        let here = Seg::Key(key.to_string());
        if let Some(mut deeper) = find_in(item, at) {
            deeper.insert(0, here);
            return Some(deeper);
        }
        let key_span = table.key(key).and_then(|k| k.span());
        if contains(key_span, at) || contains(item.span(), at) {
            return Some(vec![here]);
        }
    }
    None
}

fn find_in(item: &Item, at: &Range<usize>) -> Option<Vec<Seg>> {
    match item {
        Item::Table(t) => find(t, at),
        Item::Value(Value::InlineTable(t)) => find(t, at),
        Item::ArrayOfTables(list) => list.iter().enumerate().find_map(|(i, t)| {
            let inner = find(t, at).or_else(|| contains(t.span(), at).then(Vec::new))?;
            Some([vec![Seg::Index(i)], inner].concat())
        }),
        Item::Value(Value::Array(list)) => list.iter().enumerate().find_map(|(i, v)| {
            let inner = match v {
                Value::InlineTable(t) => find(t, at),
                _ => None,
            };
            let inner = inner.or_else(|| contains(v.span(), at).then(Vec::new))?;
            Some([vec![Seg::Index(i)], inner].concat())
        }),
        _ => None,
    }
}

/// Take the item at `path` out of the tree; false when there is none.
fn remove(table: &mut dyn TableLike, path: &[Seg]) -> bool {
    match path {
        [Seg::Key(k)] => table.remove(k).is_some(),
        [Seg::Key(k), rest @ ..] => table.get_mut(k).is_some_and(|item| remove_in(item, rest)),
        _ => false,
    }
}

fn remove_in(item: &mut Item, path: &[Seg]) -> bool {
    match (item, path) {
        (Item::ArrayOfTables(list), [Seg::Index(i)]) if *i < list.len() => {
            list.remove(*i);
            true
        }
        (Item::ArrayOfTables(list), [Seg::Index(i), rest @ ..]) => {
            list.get_mut(*i).is_some_and(|t| remove(t, rest))
        }
        (Item::Value(Value::Array(list)), [Seg::Index(i)]) if *i < list.len() => {
            list.remove(*i);
            true
        }
        (Item::Value(Value::Array(list)), [Seg::Index(i), rest @ ..]) => match list.get_mut(*i) {
            Some(Value::InlineTable(t)) => remove(t, rest),
            _ => false,
        },
        (item, path) => item.as_table_like_mut().is_some_and(|t| remove(t, path)),
    }
}
