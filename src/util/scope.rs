//! OAuth scope hierarchies: whether the scopes a principal holds satisfy the scopes an operation
//! needs, where a broader scope implies the narrower ones below it.
//!
//! Scopes form a tree by their `:`-separated segments: `mcp` covers `mcp:tools` and
//! `mcp:tools:read`; `mcp:tools` covers `mcp:tools:read` but not `mcp:toolsmith` nor `mcp`.
//! Hierarchies an authorization server spells otherwise (`admin` implying `write`) are declared in
//! `[auth.scope_implies]` and expanded when a principal is authenticated; this module only knows
//! the segment rule.

/// Whether holding `granted` satisfies a need for `needed`: the same scope, or one of its
/// ancestors by `:` segments.
pub fn covers(granted: &str, needed: &str) -> bool {
    match needed.strip_prefix(granted) {
        Some("") => !granted.is_empty(),
        Some(rest) => !granted.is_empty() && rest.starts_with(':'),
        None => false,
    }
}

/// Whether some scope of `granted` covers `needed`.
pub fn holds<S: AsRef<str>>(granted: &[S], needed: &str) -> bool {
    granted.iter().any(|g| covers(g.as_ref(), needed))
}

/// The scopes of `needed` that no scope of `granted` covers, in their order.
pub fn lacking<'n, S: AsRef<str>>(
    granted: &[S],
    needed: impl IntoIterator<Item = &'n String>,
) -> Vec<String> {
    needed
        .into_iter()
        .filter(|n| !holds(granted, n))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_covers_itself_and_what_lies_below_it() {
        assert!(covers("mcp:tools", "mcp:tools"));
        assert!(covers("mcp", "mcp:tools"));
        assert!(covers("mcp", "mcp:tools:read"));
        assert!(covers("mcp:tools", "mcp:tools:read"));
    }

    #[test]
    fn a_scope_covers_nothing_beside_or_above_it() {
        assert!(!covers("mcp:tools", "mcp"), "narrower does not imply broader");
        assert!(
            !covers("mcp:tools", "mcp:toolsmith"),
            "a prefix that is not a segment"
        );
        assert!(!covers("mcp:tools", "mcp:write"));
        assert!(
            !covers("mcp:", "mcp:tools"),
            "an empty segment is not an ancestor"
        );
        assert!(!covers("", "mcp"));
        assert!(!covers("", ""));
    }

    #[test]
    fn lacking_lists_only_what_nothing_covers() {
        let granted = ["mcp", "files:read"];
        let needed: Vec<String> = ["mcp:tools", "files:write", "files:read:big", "other"]
            .map(String::from)
            .to_vec();
        assert_eq!(lacking(&granted, &needed), ["files:write", "other"]);
        assert!(holds(&granted, "mcp:write"));
        assert!(lacking(&granted, &needed[..1]).is_empty());
    }
}
