//! Tool search: a pure, I/O-free BM25F index over tool definitions (name, title, description,
//! parameter names and descriptions), built once per catalog snapshot, queried in microseconds.
//! Per-term posting lists hold each tool's precomputed score, so a query is a few lookups and adds.

mod synonyms;
mod tokens;

use serde_json::Value;
use std::collections::HashMap;

/// The longest query considered, in bytes (the rest is ignored), and the most distinct terms.
const MAX_QUERY_BYTES: usize = 1024;
const MAX_QUERY_TERMS: usize = 32;
/// The most tokens one field of one tool contributes (a bound on index size and build time).
const MAX_FIELD_TOKENS: usize = 4096;

/// BM25 saturation: how fast repeated occurrences stop adding.
const K1: f32 = 1.2;
/// A query term's synonyms count this much of the term itself.
const SYNONYM_WEIGHT: f32 = 0.5;

/// The fields of a tool that are searched, with their weight and length normalisation (b).
#[derive(Debug, Clone, Copy)]
enum Field {
    /// The namespace before the first `__` of the exposed name (the server).
    Server,
    /// The exposed name after the namespace.
    Name,
    /// `title` and `annotations.title`.
    Title,
    Description,
    /// The names of `inputSchema.properties`.
    ParamName,
    /// Their descriptions and titles.
    ParamText,
}

const FIELDS: usize = 6;

impl Field {
    fn weight(self) -> f32 {
        match self {
            Field::Server => 1.5,
            Field::Name => 3.0,
            Field::Title => 2.0,
            Field::Description => 1.0,
            Field::ParamName => 0.7,
            Field::ParamText => 0.3,
        }
    }

    fn b(self) -> f32 {
        match self {
            Field::Server | Field::Name | Field::Title | Field::ParamName => 0.3,
            Field::Description | Field::ParamText => 0.75,
        }
    }
}

/// One search result: the tool's position in the iterator the index was built from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub position: usize,
    pub score: f32,
}

/// The index: for each term, the tools holding it with that term's BM25F score in each.
#[derive(Default)]
pub struct SearchIndex {
    terms: HashMap<Box<str>, u32>,
    postings: Vec<Vec<(u32, f32)>>,
    len: usize,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("tools", &self.len)
            .field("terms", &self.terms.len())
            .finish()
    }
}

/// One tool's term frequencies per field, and each field's length in tokens.
struct ToolTerms {
    freqs: HashMap<u32, [f32; FIELDS]>,
    lengths: [f32; FIELDS],
}

impl SearchIndex {
    /// Index tools in iteration order (position = index in the iterator); each item is a tool's
    /// JSON as hosts see it. Text that is not a JSON object indexes as an empty tool.
    pub fn new<'a>(tools: impl IntoIterator<Item = &'a str>) -> SearchIndex {
        let mut terms: HashMap<Box<str>, u32> = HashMap::new();
        let mut docs: Vec<ToolTerms> = Vec::new();
        let mut buf = String::new();
        for text in tools {
            docs.push(tool_terms(text, &mut terms, &mut buf));
        }
        let n = docs.len();
        let mut avg = [0f32; FIELDS];
        for doc in &docs {
            for (a, l) in avg.iter_mut().zip(doc.lengths) {
                *a += l;
            }
        }
        for a in &mut avg {
            *a = if n == 0 { 1.0 } else { (*a / n as f32).max(1.0) };
        }
        let fields = [
            Field::Server,
            Field::Name,
            Field::Title,
            Field::Description,
            Field::ParamName,
            Field::ParamText,
        ];
        // Weighted, length-normalised term frequency per (term, tool), BM25F style.
        let mut postings: Vec<Vec<(u32, f32)>> = vec![Vec::new(); terms.len()];
        for (position, doc) in docs.iter().enumerate() {
            for (&term, freq) in &doc.freqs {
                let mut tf = 0.0;
                for (i, field) in fields.iter().enumerate() {
                    if freq[i] > 0.0 {
                        let norm = 1.0 - field.b() + field.b() * doc.lengths[i] / avg[i];
                        tf += field.weight() * freq[i] / norm;
                    }
                }
                postings[term as usize].push((position as u32, tf));
            }
        }
        for list in &mut postings {
            let df = list.len() as f32;
            let idf = (1.0 + (n as f32 - df + 0.5) / (df + 0.5)).ln();
            for (_, score) in list.iter_mut() {
                let tf = *score;
                *score = idf * tf * (K1 + 1.0) / (tf + K1);
            }
            list.sort_unstable_by_key(|&(position, _)| position);
            list.shrink_to_fit();
        }
        SearchIndex {
            terms,
            postings,
            len: n,
        }
    }

    /// Best first, at most `limit`, only positions `visible(position)` admits (filtered before
    /// the top `limit` is taken), ties broken by position; an empty or all-stopword query
    /// returns nothing.
    pub fn search(&self, query: &str, limit: usize, visible: &dyn Fn(usize) -> bool) -> Vec<Hit> {
        let weighted = self.query_terms(query);
        if weighted.is_empty() || limit == 0 || self.len == 0 {
            return Vec::new();
        }
        let mut scores = vec![0f32; self.len];
        for &(term, weight) in &weighted {
            for &(position, score) in &self.postings[term as usize] {
                scores[position as usize] += weight * score;
            }
        }
        let mut top: Vec<Hit> = Vec::with_capacity(limit.min(self.len));
        for (position, &score) in scores.iter().enumerate() {
            if score <= 0.0 || !visible(position) {
                continue;
            }
            if top.len() == limit && top.last().is_some_and(|worst| worst.score >= score) {
                continue;
            }
            // Strictly better than every later hit; among equals, the earlier position stays first.
            let at = top.partition_point(|h| h.score >= score);
            if top.len() == limit {
                top.pop();
            }
            top.insert(at, Hit { position, score });
        }
        top
    }

    /// The number of tools indexed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The query's known terms with their weight (1 for the query's own, less for a synonym),
    /// each once; bounded by `MAX_QUERY_BYTES` and `MAX_QUERY_TERMS`.
    fn query_terms(&self, query: &str) -> Vec<(u32, f32)> {
        let mut end = query.len().min(MAX_QUERY_BYTES);
        while !query.is_char_boundary(end) {
            end -= 1;
        }
        let mut own: Vec<String> = Vec::new();
        let mut buf = String::new();
        tokens::for_each_token(&query[..end], &mut buf, &mut |t| {
            if own.len() < MAX_QUERY_TERMS && !own.iter().any(|o| o == t) {
                own.push(t.to_owned());
            }
        });
        let mut weighted: Vec<(u32, f32)> = Vec::with_capacity(own.len() * 2);
        let mut add = |term: &str, weight: f32| {
            if let Some(&id) = self.terms.get(term) {
                match weighted.iter_mut().find(|(t, _)| *t == id) {
                    Some(entry) => entry.1 = entry.1.max(weight),
                    None => weighted.push((id, weight)),
                }
            }
        };
        for term in &own {
            add(term, 1.0);
        }
        for term in &own {
            synonyms::for_each_synonym(term, &mut |s| add(s, SYNONYM_WEIGHT));
        }
        weighted
    }
}

/// Parses one tool and counts its terms per field, interning new terms into `terms`.
fn tool_terms(text: &str, terms: &mut HashMap<Box<str>, u32>, buf: &mut String) -> ToolTerms {
    let mut doc = ToolTerms {
        freqs: HashMap::new(),
        lengths: [0.0; FIELDS],
    };
    let Ok(Value::Object(tool)) = serde_json::from_str::<Value>(text) else {
        return doc;
    };
    let mut add = |field: Field, text: &str, doc: &mut ToolTerms| {
        let i = field as usize;
        let mut count = 0;
        tokens::for_each_token(text, buf, &mut |t| {
            if count >= MAX_FIELD_TOKENS {
                return;
            }
            count += 1;
            let next = terms.len() as u32;
            let id = match terms.get(t) {
                Some(&id) => id,
                None => {
                    terms.insert(t.into(), next);
                    next
                }
            };
            doc.freqs.entry(id).or_insert([0.0; FIELDS])[i] += 1.0;
            doc.lengths[i] += 1.0;
        });
    };
    if let Some(name) = tool.get("name").and_then(Value::as_str) {
        match name.split_once("__") {
            Some((server, rest)) => {
                add(Field::Server, server, &mut doc);
                add(Field::Name, rest, &mut doc);
            }
            None => add(Field::Name, name, &mut doc),
        }
    }
    let annotations_title = tool
        .get("annotations")
        .and_then(|a| a.get("title"))
        .and_then(Value::as_str);
    let title = tool.get("title").and_then(Value::as_str);
    if let Some(title) = title {
        add(Field::Title, title, &mut doc);
    }
    if let Some(other) = annotations_title.filter(|a| Some(*a) != title) {
        add(Field::Title, other, &mut doc);
    }
    if let Some(description) = tool.get("description").and_then(Value::as_str) {
        add(Field::Description, description, &mut doc);
    }
    let properties = tool
        .get("inputSchema")
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    for (name, schema) in properties.into_iter().flatten() {
        add(Field::ParamName, name, &mut doc);
        for key in ["title", "description"] {
            if let Some(text) = schema.get(key).and_then(Value::as_str) {
                add(Field::ParamText, text, &mut doc);
            }
        }
    }
    doc
}

#[cfg(test)]
mod tests;
