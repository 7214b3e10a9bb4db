//! The configuration file as written: raw TOML tables (unknown keys refused), server tables
//! in file order, and parse errors turned into `file:line:column` messages.

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::marker::PhantomData;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) gateway: Option<RawGateway>,
    #[serde(default)]
    pub(super) servers: Ordered<RawServer>,
    /// `[[policy]]` tables in file order, each with its span (for its line).
    #[serde(default)]
    pub(super) policy: Vec<Spanned<RawPolicy>>,
    pub(super) auth: Option<super::auth::RawAuth>,
    pub(super) audit: Option<super::audit::RawAudit>,
    pub(super) cluster: Option<super::cluster::RawCluster>,
    #[serde(default)]
    pub(super) profiles: Ordered<super::profiles::RawProfile>,
    pub(super) telemetry: Option<super::telemetry::RawTelemetry>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGateway {
    pub(super) listen: Option<Spanned<String>>,
    pub(super) admin_listen: Option<Spanned<String>>,
    pub(super) path: Option<Spanned<String>>,
    pub(super) separator: Option<Spanned<String>>,
    pub(super) session_idle_timeout_secs: Option<Spanned<u64>>,
    pub(super) request_timeout_secs: Option<Spanned<u64>>,
    pub(super) max_request_timeout_secs: Option<Spanned<u64>>,
    pub(super) max_in_flight_per_session: Option<Spanned<usize>>,
    pub(super) drain_timeout_secs: Option<Spanned<u64>>,
    pub(super) shutdown_delay_secs: Option<Spanned<u64>>,
    pub(super) page_size: Option<Spanned<usize>>,
    pub(super) max_body_bytes: Option<Spanned<usize>>,
    pub(super) allowed_hosts: Option<Vec<Spanned<String>>>,
    pub(super) allowed_origins: Option<Vec<Spanned<String>>>,
    pub(super) ready_when: Option<Spanned<String>>,
    pub(super) public_url: Option<Spanned<String>>,
    pub(super) allow_unauthenticated: Option<Spanned<bool>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    pub(super) command: Option<Spanned<String>>,
    pub(super) args: Option<Vec<Spanned<String>>>,
    pub(super) env: Option<Ordered<Spanned<String>>>,
    pub(super) cwd: Option<Spanned<String>>,
    pub(super) inherit_env: Option<Spanned<bool>>,
    pub(super) url: Option<Spanned<String>>,
    pub(super) headers: Option<Ordered<Spanned<String>>>,
    pub(super) namespace: Option<Spanned<String>>,
    pub(super) isolation: Option<Spanned<String>>,
    pub(super) era: Option<Spanned<String>>,
    pub(super) transport: Option<Spanned<String>>,
    pub(super) request_timeout_secs: Option<Spanned<u64>>,
    pub(super) timeout_resets_on_progress: Option<Spanned<bool>>,
    pub(super) max_in_flight: Option<Spanned<usize>>,
    pub(super) health_check_interval_secs: Option<Spanned<u64>>,
    pub(super) health_check_timeout_secs: Option<Spanned<u64>>,
    pub(super) handshake_timeout_secs: Option<Spanned<u64>>,
    pub(super) max_line_bytes: Option<Spanned<usize>>,
    pub(super) enabled: Option<Spanned<bool>>,
    pub(super) tools: Option<RawFilter>,
    pub(super) prompts: Option<RawFilter>,
    pub(super) resources: Option<RawFilter>,
    pub(super) rename: Option<Ordered<Spanned<String>>>,
    pub(super) descriptions: Option<Ordered<Spanned<String>>>,
}

/// `tools`, `prompts` or `resources` of a server: `{ include = [...], exclude = [...] }`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFilter {
    pub(super) include: Option<Vec<Spanned<String>>>,
    pub(super) exclude: Option<Vec<Spanned<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    pub(super) principals: Option<Vec<Spanned<String>>>,
    pub(super) groups: Option<Vec<Spanned<String>>>,
    pub(super) scopes: Option<Vec<Spanned<String>>>,
    pub(super) allow: Option<Vec<Spanned<String>>>,
    pub(super) deny: Option<Vec<Spanned<String>>>,
    pub(super) rate_limit: Option<Spanned<String>>,
    pub(super) audit_arguments: Option<Spanned<bool>>,
}

/// A TOML table kept in file order, with the span of each key.
pub(super) struct Ordered<V>(pub(super) Vec<(Spanned<String>, V)>);

impl<V> Default for Ordered<V> {
    fn default() -> Self {
        Ordered(Vec::new())
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Ordered<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OrderedVisitor<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for OrderedVisitor<V> {
            type Value = Ordered<V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Ordered(entries))
            }
        }
        deserializer.deserialize_map(OrderedVisitor(PhantomData))
    }
}

// ---- errors with positions ----

/// 1-based (line, column) of a byte offset.
pub(super) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// The `[table]` header (if any) in effect at `offset`, for error context.
pub(super) fn enclosing_table(text: &str, offset: usize) -> Option<String> {
    let (line, _) = line_col(text, offset);
    let current = text.lines().nth(line - 1).unwrap_or("");
    if table_header(current).is_some() {
        return None; // the error is in the header itself
    }
    text.lines().take(line - 1).filter_map(table_header).last()
}

/// Parses a `[a.b]` / `[[a.b]]` header line (quote-aware), dropping any trailing comment.
pub(super) fn table_header(line: &str) -> Option<String> {
    let line = line.trim();
    if !line.starts_with('[') {
        return None;
    }
    let mut quote: Option<char> = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, ']') => {
                let end = if line[i..].starts_with("]]") { i + 2 } else { i + 1 };
                return Some(line[..end].to_string());
            }
            (None, _) => {}
        }
    }
    None
}

/// A deserializer's message in the file's terms (keys, tables), without trailing space.
pub(super) fn friendly(message: &str) -> String {
    message
        .trim_end()
        .replacen("unknown field", "unknown key", 1)
        .replace("struct RawServer", "a server table")
        .replace("struct RawGateway", "a table")
        .replace(
            "struct RawFilter",
            "a tools/prompts/resources table (include, exclude)",
        )
        .replace("struct RawPolicy", "a [[policy]] table")
        .replace("struct RawAuth", "the [auth] table")
        .replace("struct RawAudit", "the [audit] table")
        .replace("struct RawCluster", "the [cluster] table")
        .replace("struct RawTelemetry", "the [telemetry] table")
        .replace("struct RawApiKey", "an [[auth.api_keys]] table")
        .replace("struct RawStepUp", "an [[auth.step_up]] table")
}
