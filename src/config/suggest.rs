//! "Did you mean …?" for an unknown key: the valid key nearest to a misspelt one by edit
//! distance (insertions, deletions, substitutions and swaps of two neighbours, each counting
//! one), offered when it is near enough to be the likely intent; the whole list of valid keys
//! only when none is.

/// The deserialiser's "unknown field `x`, expected one of `a`, `b`" in the file's terms: the
/// nearest key suggested, or the valid keys listed when none is near. Other messages are
/// returned unchanged.
pub(super) fn unknown_key(message: &str) -> String {
    let Some(rest) = message.strip_prefix("unknown field `") else {
        return message.to_string();
    };
    let Some((unknown, rest)) = rest.split_once('`') else {
        return message.to_string();
    };
    let valid = quoted(rest);
    match nearest(unknown, &valid) {
        Some(near) => format!("unknown key `{unknown}`: did you mean `{near}`?"),
        None if valid.is_empty() => format!("unknown key `{unknown}`: this table takes no keys"),
        None => format!("unknown key `{unknown}`, expected one of {}", rest_list(&valid)),
    }
}

/// The names in backticks of `text`, in order.
fn quoted(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

fn rest_list(valid: &[&str]) -> String {
    let names: Vec<String> = valid.iter().map(|k| format!("`{k}`")).collect();
    names.join(", ")
}

/// The first of `valid` at the least distance from `unknown` (case aside), if that distance is
/// at most a third of the word's length (at least one), else the first valid key that starts
/// with `unknown` (of four characters or more: `request_timeout` for `request_timeout_secs`).
pub(super) fn nearest<'a>(unknown: &str, valid: &[&'a str]) -> Option<&'a str> {
    let lower = unknown.to_ascii_lowercase();
    let limit = (lower.chars().count() / 3).max(1);
    let mut best: Option<(usize, &str)> = None;
    for key in valid {
        let d = distance(&lower, key);
        if d <= limit && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, key));
        }
    }
    let prefix = || {
        (lower.chars().count() >= 4)
            .then(|| valid.iter().find(|k| k.starts_with(&lower)).copied())
            .flatten()
    };
    best.map(|(_, key)| key).or_else(prefix)
}

/// The optimal-string-alignment distance of `a` and `b` (Damerau–Levenshtein where no
/// substring is edited twice), over characters.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows: two back (for swaps), the last, the current.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut last: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut row = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (last[j] + 1).min(row[j - 1] + 1).min(last[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            row[j] = d;
        }
        before = std::mem::replace(&mut last, row);
    }
    last[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_inserts_deletes_substitutions_and_swaps() {
        assert_eq!(distance("listen", "listen"), 0);
        assert_eq!(distance("listn", "listen"), 1);
        assert_eq!(distance("comand", "command"), 1);
        assert_eq!(distance("lsiten", "listen"), 1);
        assert_eq!(distance("argz", "args"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("port", "path"), 3);
    }

    #[test]
    fn the_nearest_key_is_suggested_when_it_is_near_enough() {
        let gateway = [
            "listen",
            "admin_listen",
            "path",
            "separator",
            "request_timeout_secs",
        ];
        assert_eq!(nearest("listn", &gateway), Some("listen"));
        assert_eq!(nearest("Listen", &gateway), Some("listen"));
        assert_eq!(nearest("listen_on", &gateway), Some("listen"));
        assert_eq!(nearest("admin_lsiten", &gateway), Some("admin_listen"));
        assert_eq!(nearest("request_timeout", &gateway), Some("request_timeout_secs"));
        assert_eq!(nearest("port", &gateway), None);
        assert_eq!(nearest("colour", &gateway), None);
        assert_eq!(nearest("x", &gateway), None);
    }

    #[test]
    fn the_message_suggests_or_else_lists() {
        let near = "unknown field `listn`, expected one of `listen`, `admin_listen`, `path`";
        assert_eq!(unknown_key(near), "unknown key `listn`: did you mean `listen`?");
        let far = "unknown field `colour`, expected `command` or `url`";
        assert_eq!(
            unknown_key(far),
            "unknown key `colour`, expected one of `command`, `url`"
        );
        let none = "unknown field `x`, there are no fields";
        assert_eq!(unknown_key(none), "unknown key `x`: this table takes no keys");
        assert_eq!(unknown_key("invalid type: string"), "invalid type: string");
    }
}
