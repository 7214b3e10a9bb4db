//! What changed between a pinned tool definition and the one a server sends now, for people:
//! the members that differ, and per member the old and new value (a line diff for the
//! description and the schemas, whose changes hide in long text).

use super::lock::MEMBERS;
use serde_json::{Map, Value};

/// The members whose values differ between `pinned` and `current` (absent counts as a value),
/// in [`MEMBERS`] order.
pub fn changed_members(pinned: &Map<String, Value>, current: &Map<String, Value>) -> Vec<&'static str> {
    (MEMBERS.into_iter())
        .filter(|m| pinned.get(*m) != current.get(*m))
        .collect()
}

/// A readable diff of the two definitions: one block per changed member.
pub fn render(pinned: &Map<String, Value>, current: &Map<String, Value>) -> String {
    let mut out = String::new();
    for member in changed_members(pinned, current) {
        let (old, new) = (pinned.get(member), current.get(member));
        out.push_str(&format!("  {member}:\n"));
        match member {
            "description" | "inputSchema" | "outputSchema" => {
                for line in line_diff(&as_lines(old), &as_lines(new)) {
                    out.push_str("    ");
                    out.push_str(&line);
                    out.push('\n');
                }
            }
            _ => {
                out.push_str(&format!("    - {}\n", compact(old)));
                out.push_str(&format!("    + {}\n", compact(new)));
            }
        }
    }
    out
}

/// A member's value as lines: a string's own lines, other JSON pretty-printed; none when absent.
fn as_lines(value: Option<&Value>) -> Vec<String> {
    match value {
        None => Vec::new(),
        Some(Value::String(text)) => text.lines().map(str::to_string).collect(),
        Some(other) => (serde_json::to_string_pretty(other).unwrap_or_default().lines())
            .map(str::to_string)
            .collect(),
    }
}

fn compact(value: Option<&Value>) -> String {
    match value {
        None => "(absent)".to_string(),
        Some(value) => value.to_string(),
    }
}

/// The lines of `old` and `new` marked `- ` (only in old), `+ ` (only in new) or `  ` (both),
/// from their longest common subsequence.
pub fn line_diff(old: &[String], new: &[String]) -> Vec<String> {
    let (n, m) = (old.len(), new.len());
    // lcs[i][j]: the longest common subsequence of old[i..] and new[j..].
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = match old[i] == new[j] {
                true => lcs[i + 1][j + 1] + 1,
                false => lcs[i + 1][j].max(lcs[i][j + 1]),
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && old[i] == new[j] {
            out.push(format!("  {}", old[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(format!("- {}", old[i]));
            i += 1;
        } else {
            out.push(format!("+ {}", new[j]));
            j += 1;
        }
    }
    out
}
