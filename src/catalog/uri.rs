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

/// Match by tracking every position of `uri` the parts seen so far can end at: one pass over
/// `uri` per part, so O(parts × len). The earlier backtracking matcher took time exponential in
/// the number of variables (a host's long URI against a template like `x://{a}{b}{c}{d}` hung a
/// worker) and sliced `uri` inside a UTF-8 character (a panic); the `message` fuzz target found
/// both. Only character boundaries are ever reached.
fn match_parts(parts: &[Part<'_>], uri: &str) -> bool {
    let bytes = uri.as_bytes();
    let len = bytes.len();
    let mut reach = vec![false; len + 1];
    reach[0] = true;
    for part in parts {
        let mut next = vec![false; len + 1];
        match part {
            Part::Literal(lit) => {
                for p in (0..=len).filter(|&p| reach[p]) {
                    if bytes[p..].starts_with(lit.as_bytes()) {
                        next[p + lit.len()] = true;
                    }
                }
            }
            Part::Simple => {
                // A non-empty run without `/`, `?` or `#` from a reached position.
                let mut open = false;
                for p in 0..len {
                    open |= reach[p];
                    if matches!(bytes[p], b'/' | b'?' | b'#') {
                        open = false;
                    } else if open {
                        next[p + 1] = uri.is_char_boundary(p + 1);
                    }
                }
            }
            Part::Reserved => {
                // Anything, or nothing, from the first reached position on.
                let mut open = false;
                for p in 0..=len {
                    open |= reach[p];
                    next[p] = open && uri.is_char_boundary(p);
                }
            }
            Part::Query => {
                // Nothing, or from a reached `?` or `&` up to the next `#`.
                let mut open = false;
                for p in 0..=len {
                    next[p] |= reach[p];
                    let Some(&byte) = bytes.get(p) else { break };
                    open |= reach[p] && matches!(byte, b'?' | b'&');
                    if byte == b'#' {
                        open = false;
                    } else if open {
                        next[p + 1] = uri.is_char_boundary(p + 1);
                    }
                }
            }
        }
        if !next.contains(&true) {
            return false;
        }
        reach = next;
    }
    reach[len]
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

    #[test]
    fn matching_is_linear_and_utf8_safe() {
        // Found by the `message` fuzz target: slicing inside 'é' panicked.
        assert!(!template_matches("x://{a}z", "x://éy"));
        assert!(template_matches("x://{a}z", "x://éz"));
        assert!(!template_matches("{?q}", "?\u{a0}#"));
        // Backtracking over several variables used to take time exponential in their number.
        let long = format!("x://{}", "a".repeat(100_000));
        assert!(!template_matches("x://{a}{b}{c}{d}{e}{f}{g}/z", &long));
        assert!(!template_matches("x://{+a}{+b}{+c}{#d}{?e}{&f}z", &long));
    }
}
