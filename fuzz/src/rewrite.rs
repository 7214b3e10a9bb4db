//! The rewrites the gateway applies to parsed messages: exposed names and URIs (and their
//! resolution back), sealed list cursors, URI-template matching, the modern envelope and its header
//! codec, `Mcp-Param-*` headers and result/error shaping. Part of the `message` target.

use super::Knobs;
use mcpmux::catalog::cursor::Cursors;
use mcpmux::catalog::{uri, CatalogStore, ListKind, Naming};
use mcpmux::config::UpstreamId;
use mcpmux::protocol::message::{parse_message, raw};
use mcpmux::protocol::{modern, modern_params, modern_result, Message, RawObject, ResponsePayload};
use mcpmux::seal::{ClusterKey, Sealer};
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::HashMap;

/// The namespace the catalog checks use for their prefixed upstream.
const NS: &str = "fz";

pub fn check_rewrites(data: &[u8], text: &str) {
    let mut knobs = Knobs::new(data);
    check_cursor(text, &mut knobs);
    check_uri(text);
    check_header_codec(text);
    if let Some((template, target)) = text.split_once('\n') {
        check_template(template, target);
    }
    let Ok(msg) = parse_message(text) else {
        return;
    };
    match &msg {
        Message::Request { method, params, .. } | Message::Notification { method, params } => {
            let params = RawObject::parse_opt(params.as_deref());
            check_envelope(method, params.as_ref());
            if let Some(p) = &params {
                for key in ["uri", "uriTemplate", "name"] {
                    if let Some(value) = p.get_str(key) {
                        check_uri(&value);
                        check_header_codec(&value);
                    }
                }
                if let (Some(t), Some(u)) = (p.get_str("uriTemplate"), p.get_str("uri")) {
                    check_template(&t, &u);
                }
                check_param_headers(p);
            }
        }
        Message::Response { payload, .. } => check_result(payload),
    }
}

/// The gateway's own sealed list cursors: any text either opens or is refused (never a panic),
/// open(seal(n)) == n for its own list and viewer only, and paging stays in bounds.
fn check_cursor(text: &str, knobs: &mut Knobs<'_>) {
    let len = usize::from(knobs.byte()) * 3;
    let page_size = usize::from(knobs.byte() % 40);
    let key = ClusterKey::parse("AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=").expect("a valid key");
    let sealer = Sealer::new(&key, &[]);
    let cursors = Cursors::shared(&sealer);
    let viewer = Cursors::bound_to(&sealer, text.as_bytes());
    if let Some(n) = cursors.open(ListKind::Tools, text) {
        assert_eq!(
            cursors.open(ListKind::Tools, &cursors.seal(ListKind::Tools, n)),
            Some(n)
        );
    }
    let offset = u64::from_le_bytes(std::array::from_fn(|_| knobs.byte())) as usize;
    let sealed = viewer.seal(ListKind::Prompts, offset);
    assert_eq!(viewer.open(ListKind::Prompts, &sealed), Some(offset));
    assert_eq!(viewer.open(ListKind::Tools, &sealed), None);
    if !text.is_empty() {
        assert_eq!(cursors.open(ListKind::Prompts, &sealed), None);
    }
    for c in [None, Some(text)] {
        let Some((start, end, next)) = cursors.page(ListKind::Tools, len, c, page_size) else {
            assert!(c.is_some(), "the first page always exists");
            continue;
        };
        assert!(start <= end && end <= len, "{start}..{end} of {len}");
        assert!(end - start <= page_size.max(1));
        assert!(end > start || start == len || len == 0);
        match next {
            Some(next) => {
                assert!(end < len);
                assert_eq!(cursors.open(ListKind::Tools, &next), Some(end));
            }
            None => assert_eq!(end, len),
        }
    }
}

/// Exposed resource URIs split back into the namespace and the upstream's URI.
fn check_uri(text: &str) {
    if let Some((ns, original)) = uri::split(text) {
        assert!(!ns.is_empty() && !ns.contains('/'));
        assert_eq!(uri::expose(ns, original), text);
    }
    assert_eq!(uri::split(&uri::expose(NS, text)), Some((NS, text)));
    assert_eq!(uri::expose("", text), text);
}

/// The `Mcp-Name` / `Mcp-Param-*` value codec: decode(encode(s)) == s, and an encoded value is
/// always a legal header value (visible ASCII, no surrounding whitespace).
fn check_header_codec(text: &str) {
    let encoded = modern::encode_header_value(text);
    assert!(
        encoded.bytes().all(|b| (0x20..=0x7e).contains(&b) || b == b'\t'),
        "{encoded:?}"
    );
    assert_eq!(encoded.trim_matches([' ', '\t']), encoded);
    assert_eq!(modern::decode_header_value(&encoded).as_deref(), Ok(text));
    if let Ok(decoded) = modern::decode_header_value(text) {
        assert_eq!(
            modern::decode_header_value(&modern::encode_header_value(&decoded)),
            Ok(decoded)
        );
    }
}

/// RFC 6570 matching never panics or backtracks without bound, and agrees with a naive
/// reference on inputs small enough for it.
fn check_template(template: &str, target: &str) {
    let got = uri::template_matches(template, target);
    let vars = template.matches('{').count();
    if target.len() <= 48 && vars <= 3 {
        assert_eq!(
            got,
            reference::matches(template, target),
            "{template:?} vs {target:?}"
        );
    }
    // An exposed template still matches its exposed expansions only through the prefix.
    if got {
        let exposed_t = uri::expose(NS, template);
        let exposed_u = uri::expose(NS, target);
        assert!(
            uri::template_matches(&exposed_t, &exposed_u),
            "{exposed_t:?} vs {exposed_u:?}"
        );
    }
}

/// Modern envelope and request headers: headers computed from a body pass the body's own
/// check, and adding mcpmux's envelope keeps every other member.
fn check_envelope(method: &str, params: Option<&RawObject>) {
    let _ = modern::is_modern(params);
    if let Ok(meta) = modern::request_meta(params) {
        let headers = modern::request_headers(method, params, &meta.protocol_version);
        let lookup: HashMap<&str, &str> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let has_name = modern::name_field(method).is_none_or(|f| params.and_then(|p| p.get_str(f)).is_some());
        let result = modern::check_headers(|h| lookup.get(h).copied(), method, params, &meta);
        if has_name && meta.protocol_version.trim() == meta.protocol_version {
            assert_eq!(result, Ok(()), "{headers:?}");
        }
    }
    let caps = raw(r#"{"sampling":{}}"#.into());
    let info = raw(r#"{"name":"mcpmux","version":"0"}"#.into());
    let raw_params = params.map(RawObject::to_raw);
    let wrapped = modern::with_envelope(raw_params.as_deref(), &caps, &info, Some("debug"));
    let obj = RawObject::parse(wrapped.get()).unwrap_or_else(|e| panic!("{}: {e}", wrapped.get()));
    let meta = modern::request_meta(Some(&obj)).unwrap_or_else(|e| panic!("{}: {e}", wrapped.get()));
    assert_eq!(meta.protocol_version, modern::MODERN_VERSION);
    assert_eq!(meta.log_level.as_deref(), Some("debug"));
    if let Some(p) = params {
        for (k, v) in p.members().filter(|(k, _)| *k != "_meta") {
            assert_eq!(obj.get(k).map(RawValue::get), Some(v.get()), "member {k:?}");
        }
    }
}

/// `Mcp-Param-*` headers computed for `params.arguments` under `params.inputSchema` pass the
/// gateway's own check of those arguments.
fn check_param_headers(params: &RawObject) {
    let schema = params
        .get("inputSchema")
        .and_then(|s| serde_json::from_str::<Value>(s.get()).ok());
    let Some(schema) = schema else { return };
    let arguments = params
        .get("arguments")
        .and_then(|a| serde_json::from_str::<Value>(a.get()).ok())
        .unwrap_or(Value::Null);
    let annotations = modern_params::param_headers(&schema);
    let values = modern_params::param_header_values(&annotations, &arguments);
    for (name, value) in &values {
        assert!(name.starts_with("mcp-param-"));
        assert_eq!(
            modern::decode_header_value(value).map(|_| ()),
            Ok(()),
            "{name}: {value:?}"
        );
    }
    let mut names: Vec<String> = annotations.iter().map(|a| a.header()).collect();
    names.sort();
    names.dedup();
    if names.len() == annotations.len() {
        let lookup: HashMap<&str, &str> = values.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let checked =
            modern_params::check_param_headers(|h| lookup.get(h).copied(), &annotations, &arguments);
        assert_eq!(checked, Ok(()), "{values:?}");
    }
}

/// Result and error shaping between eras, and the catalog built from list results.
fn check_result(payload: &ResponsePayload) {
    let info = raw(r#"{"name":"mcpmux","version":"0"}"#.into());
    match payload {
        ResponsePayload::Result(result) => {
            let hint = RawObject::parse(result.get())
                .ok()
                .map(|r| modern_result::CacheHint::of_result(&r));
            let shaped = modern_result::shape_result(result, hint, &info);
            match RawObject::parse(result.get()) {
                Ok(before) => {
                    let after =
                        RawObject::parse(shaped.get()).unwrap_or_else(|e| panic!("{}: {e}", shaped.get()));
                    assert!(after.contains("resultType"));
                    let meta = after.get_object("_meta");
                    assert!(
                        meta.is_some_and(|m| m.contains(modern::META_SERVER_INFO)),
                        "{}",
                        shaped.get()
                    );
                    if let Some(hint) = hint {
                        let again = modern_result::CacheHint::of_result(&after);
                        assert_eq!(again, hint, "{}", shaped.get());
                    }
                    let touched = ["resultType", "ttlMs", "cacheScope", "_meta"];
                    for (k, v) in before.members().filter(|(k, _)| !touched.contains(k)) {
                        assert_eq!(after.get(k).map(RawValue::get), Some(v.get()), "member {k:?}");
                    }
                    check_catalog(&after);
                }
                Err(_) => assert_eq!(shaped.get(), result.get(), "a non-object result passes unchanged"),
            }
        }
        ResponsePayload::Error(error) => {
            let modern_err = modern_result::shape_error(error);
            let legacy = modern_result::legacy_resource_error(error);
            for e in [&modern_err, &legacy] {
                assert!(serde_json::from_str::<Value>(e.get()).is_ok(), "{}", e.get());
            }
        }
    }
}

/// Items of a list result exposed under a prefixed and an unprefixed upstream: every item of
/// the prefixed one is found again by the name or URI hosts see, and prefixed URIs route back.
fn check_catalog(result: &RawObject) {
    let (prefixed, unprefixed) = (UpstreamId::new("prefixed"), UpstreamId::new("unprefixed"));
    let store = CatalogStore::new(vec![
        (prefixed.clone(), Naming::new(NS, "__")),
        (unprefixed.clone(), Naming::new(String::new(), "__")),
    ]);
    for kind in ListKind::ALL {
        let Some(items) = result.get_array(kind.field()) else {
            continue;
        };
        let items: Vec<RawObject> = items
            .iter()
            .filter_map(|i| RawObject::parse(i.get()).ok())
            .collect();
        store.replace(&prefixed, kind, items.clone());
        store.replace(&unprefixed, kind, items);
        let catalog = store.snapshot();
        let list = catalog.list(kind);
        for item in &list.items {
            let exposed = RawObject::parse(item.json.get()).unwrap_or_else(|e| panic!("{}: {e}", item.json));
            let key = match kind {
                ListKind::Tools | ListKind::Prompts => "name",
                ListKind::Resources => "uri",
                ListKind::Templates => "uriTemplate",
            };
            let shown = exposed
                .get_str(key)
                .unwrap_or_else(|| panic!("{} lost {key}", item.json));
            let found = list.lookup(&shown).map(|i| (&i.upstream, i.original.as_str()));
            assert_eq!(found, Some((&item.upstream, item.original.as_str())));
            if item.upstream == prefixed && kind == ListKind::Resources {
                assert_eq!(
                    catalog.resolve_uri(&shown),
                    Ok((prefixed.clone(), item.original.clone()))
                );
            }
        }
    }
}

/// The plain backtracking matcher, written for clarity over speed: the meaning
/// `uri::template_matches` must keep (positions inside a UTF-8 character never match).
pub mod reference {
    enum Part<'a> {
        Literal(&'a str),
        Simple,
        Reserved,
        Query,
    }

    fn parse(template: &str) -> Vec<Part<'_>> {
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Literal(&rest[..open]));
            }
            let Some(close) = rest[open..].find('}') else {
                parts.push(Part::Literal(&rest[open..]));
                return parts;
            };
            parts.push(match rest[open + 1..open + close].chars().next() {
                Some('+') | Some('#') => Part::Reserved,
                Some('?') | Some('&') => Part::Query,
                _ => Part::Simple,
            });
            rest = &rest[open + close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest));
        }
        parts
    }

    pub fn matches(template: &str, uri: &str) -> bool {
        go(&parse(template), uri)
    }

    fn go(parts: &[Part<'_>], uri: &str) -> bool {
        let Some((first, rest)) = parts.split_first() else {
            return uri.is_empty();
        };
        let tails = |from: usize, to: usize| {
            (from..=to)
                .filter(|n| uri.is_char_boundary(*n))
                .any(|n| go(rest, &uri[n..]))
        };
        match first {
            Part::Literal(lit) => uri.strip_prefix(lit).is_some_and(|tail| go(rest, tail)),
            Part::Simple => tails(1, uri.find(['/', '?', '#']).unwrap_or(uri.len())),
            Part::Reserved => tails(0, uri.len()),
            Part::Query => {
                go(rest, uri)
                    || ((uri.starts_with('?') || uri.starts_with('&'))
                        && tails(1, uri.find('#').unwrap_or(uri.len())))
            }
        }
    }
}
