//! The reversible resource-URI scheme: `mcpmux://{namespace}/{original-uri}` for namespaced
//! upstreams, the original URI untouched for `namespace = ""`; plus RFC 6570 template matching.

/// Prefix of every namespaced resource URI mcpmux exposes.
pub const SCHEME_PREFIX: &str = "mcpmux://";

/// The URI (or URI template) a host sees for an upstream's `uri` under `namespace`.
pub fn expose(namespace: &str, uri: &str) -> String {
    if namespace.is_empty() {
        uri.to_string()
    } else {
        let mut out = String::with_capacity(SCHEME_PREFIX.len() + namespace.len() + 1 + uri.len());
        out.push_str(SCHEME_PREFIX);
        out.push_str(namespace);
        out.push('/');
        out.push_str(uri);
        out
    }
}

/// Split an exposed URI into `(namespace, original)`, when it carries the mcpmux prefix.
pub fn split(uri: &str) -> Option<(&str, &str)> {
    let rest = uri.strip_prefix(SCHEME_PREFIX)?;
    let slash = rest.find('/')?;
    let (namespace, original) = (&rest[..slash], &rest[slash + 1..]);
    (!namespace.is_empty()).then_some((namespace, original))
}

/// Whether `uri` can be produced by expanding the RFC 6570 `template` (levels 1-4, approximately:
/// `{var}` matches one non-empty run without `/`, `?`, `#`; `{+var}`, `{#var}` match anything;
/// `{?a,b}` and `{&a}` match an optional query part).
pub fn template_matches(template: &str, uri: &str) -> bool {
    let parts = parse_template(template);
    match_parts(&parts, uri)
}

#[derive(Debug)]
enum Part<'a> {
    Literal(&'a str),
    Simple,
    Reserved,
    Query,
}

fn parse_template(template: &str) -> Vec<Part<'_>> {
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
        let expr = &rest[open + 1..open + close];
        parts.push(match expr.chars().next() {
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

fn match_parts(parts: &[Part<'_>], uri: &str) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return uri.is_empty();
    };
    match first {
        Part::Literal(lit) => uri.strip_prefix(lit).is_some_and(|tail| match_parts(rest, tail)),
        Part::Simple => {
            let limit = uri.find(['/', '?', '#']).unwrap_or(uri.len());
            (1..=limit).rev().any(|n| match_parts(rest, &uri[n..]))
        }
        Part::Reserved => (0..=uri.len())
            .rev()
            .filter(|n| uri.is_char_boundary(*n))
            .any(|n| match_parts(rest, &uri[n..])),
        Part::Query => {
            if match_parts(rest, uri) {
                return true;
            }
            let limit = uri.find('#').unwrap_or(uri.len());
            (uri.starts_with('?') || uri.starts_with('&'))
                && (1..=limit).rev().any(|n| match_parts(rest, &uri[n..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposing_is_reversible_and_empty_namespace_is_untouched() {
        let uri = "demo://resource/static/document/a.md";
        let exposed = expose("everything", uri);
        assert_eq!(
            exposed,
            "mcpmux://everything/demo://resource/static/document/a.md"
        );
        assert_eq!(split(&exposed), Some(("everything", uri)));
        assert_eq!(expose("", uri), uri);
        assert_eq!(split(uri), None);
        assert_eq!(split("mcpmux:///x"), None);
        assert_eq!(
            split(&expose("ns", "file:///etc/x")),
            Some(("ns", "file:///etc/x"))
        );
    }

    #[test]
    fn templates_match_their_expansions() {
        assert!(template_matches("test://item/{id}", "test://item/42"));
        assert!(!template_matches("test://item/{id}", "test://item/"));
        assert!(!template_matches("test://item/{id}", "test://item/4/2"));
        assert!(template_matches(
            "demo://resource/dynamic/text/{resourceId}",
            "demo://resource/dynamic/text/7"
        ));
        assert!(template_matches("file:///{+path}", "file:///a/b/c.txt"));
        assert!(template_matches("x://s{?q,lang}", "x://s?q=1&lang=en"));
        assert!(template_matches("x://s{?q}", "x://s"));
        assert!(!template_matches(
            "test://template/{id}/data",
            "test://template/1/other"
        ));
        assert!(template_matches(
            "test://template/{id}/data",
            "test://template/1/data"
        ));
    }
}
