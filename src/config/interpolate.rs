//! `${VAR}` interpolation of the config's string values: `${NAME}`, `${NAME:-default}` (the
//! syntax of Claude Code's `.mcp.json`, so imported and `mcp_json` files mean the same), `$$`.

pub(super) enum InterpError {
    Missing(String),
    Syntax(String),
}

/// Expands `input`: `${NAME}` is the variable `NAME` (unset is an error); `${NAME:-default}` is
/// `NAME`, or `default` when `NAME` is unset or empty (as in the shell); `$$` is a literal `$`;
/// any other `$` is kept as is. A default is text up to the first `}`, in which `$$` is a `$`
/// and `${` is refused (defaults do not nest). Substituted values are not expanded again.
pub(super) fn interpolate(input: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, InterpError> {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('{') {
            let end = tail.find('}').ok_or_else(|| {
                InterpError::Syntax(
                    "unterminated \"${\" (missing \"}\"; write \"$$\" for a literal \"$\")".to_string(),
                )
            })?;
            let inner = &tail[..end];
            let (name, default) = match inner.split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (inner, None),
            };
            if !valid_name(name) {
                return Err(InterpError::Syntax(format!(
                    "invalid variable name {name:?} in \"${{...}}\" (expected letters, digits and '_')"
                )));
            }
            let value = match (env(name), default) {
                (Some(value), Some(default)) if value.is_empty() => expand_default(default)?,
                (Some(value), _) => value,
                (None, Some(default)) => expand_default(default)?,
                (None, None) => return Err(InterpError::Missing(name.to_string())),
            };
            out.push_str(&value);
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Whether `name` is a variable name: a letter or `_`, then letters, digits and `_`.
pub(super) fn valid_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The text of a `${NAME:-default}` default: `$$` is a `$`; a nested `${` is refused.
fn expand_default(default: &str) -> Result<String, InterpError> {
    let mut out = String::with_capacity(default.len());
    let mut chars = default.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('$', Some('$')) => {
                chars.next();
                out.push('$');
            }
            ('$', Some('{')) => {
                return Err(InterpError::Syntax(format!(
                    "the default {default:?} holds \"${{\": defaults are plain text (write \"$$\" for a literal \"$\")"
                )))
            }
            (c, _) => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(var: &str) -> Option<String> {
        match var {
            "SET" => Some("value".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn ok(input: &str) -> String {
        match interpolate(input, &env) {
            Ok(v) => v,
            Err(InterpError::Missing(v)) => panic!("{input:?}: {v} missing"),
            Err(InterpError::Syntax(why)) => panic!("{input:?}: {why}"),
        }
    }

    #[test]
    fn a_default_stands_in_for_an_unset_or_empty_variable() {
        assert_eq!(ok("${SET:-d}"), "value");
        assert_eq!(ok("${UNSET:-d}"), "d");
        assert_eq!(ok("${EMPTY:-d}"), "d");
        assert_eq!(ok("${EMPTY}"), "");
        assert_eq!(ok("${UNSET:-}"), "");
        assert_eq!(ok("a${UNSET:-http://x:1/p}b"), "ahttp://x:1/pb");
        assert_eq!(ok("${UNSET:-a:-b}"), "a:-b");
        assert_eq!(ok("${UNSET:-$$5}"), "$5");
        assert_eq!(ok("${UNSET:-$x}"), "$x");
        assert_eq!(ok("${UNSET:-$${B}"), "${B");
        assert_eq!(ok("$${UNSET:-d}"), "${UNSET:-d}");
    }

    #[test]
    fn defaults_do_not_nest_and_names_stay_checked() {
        let syntax = |s: &str| matches!(interpolate(s, &env), Err(InterpError::Syntax(_)));
        assert!(syntax("${UNSET:-${SET}}"));
        assert!(syntax("${:-d}"));
        assert!(syntax("${A B:-d}"));
        assert!(syntax("${UNSET:-d"));
        assert!(matches!(interpolate("${UNSET}", &env), Err(InterpError::Missing(v)) if v == "UNSET"));
    }
}
