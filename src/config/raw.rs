//! The configuration file as written: raw TOML tables (unknown keys refused), server tables
//! in file order, and parse errors turned into `file:line:column` messages.

use super::spanned::Spanned;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// The mcpmux configuration file (TOML).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "mcpmux configuration")]
pub(super) struct RawConfig {
    // `include` and `mcp_json` are taken out of the tree before it is deserialised (see
    // `include.rs`): these two fields only put them in the schema.
    /// Other TOML files merged into this one, in order (a string is a list of one); paths are
    /// relative to this file, `~/` is the home folder. Later keys win; tables merge key by key.
    #[allow(dead_code)]
    pub(super) include: Option<PathList>,
    /// MCP clients' JSON files (Claude Desktop, Claude Code, Cursor, VS Code `mcpServers`) whose
    /// servers are added on every load (a string is a list of one); relative to this file. A
    /// missing file is a warning; a TOML server of the same name wins.
    #[allow(dead_code)]
    pub(super) mcp_json: Option<PathList>,
    /// The endpoint: where it listens, its paths, timeouts and limits.
    pub(super) gateway: Option<RawGateway>,
    /// The upstream MCP servers, one `[servers.NAME]` table each (NAME is also the default
    /// namespace of its tools: `NAME__tool`).
    #[serde(default)]
    pub(super) servers: Ordered<RawServer>,
    /// Per-principal access rules, in order (`[[policy]]`); needs `[auth]`.
    #[serde(default)]
    pub(super) policy: Vec<Spanned<RawPolicy>>,
    /// Who may use the gateway: JWT access tokens of an OAuth authorization server, API keys,
    /// token introspection. Without it nobody is authenticated (loopback only).
    pub(super) auth: Option<super::auth::RawAuth>,
    /// The hash-chained audit log of calls.
    pub(super) audit: Option<super::audit::RawAudit>,
    /// Several replicas serving as one (a shared sealing key).
    pub(super) cluster: Option<super::cluster::RawCluster>,
    /// Where upstream grants live, sealed at rest (AEAD), and the keys that seal them.
    pub(super) vault: Option<super::vault::RawVault>,
    /// What mcpmux reports of its work: traces (OTLP), log format, the access log.
    pub(super) telemetry: Option<super::telemetry::RawTelemetry>,
    /// More endpoints, one `[profiles.NAME]` each, each with a subset of the catalog.
    #[serde(default)]
    pub(super) profiles: Ordered<super::profiles::RawProfile>,
    /// Upstream tool definitions pinned in a lock file on first sight, and what a change does.
    pub(super) pinning: Option<super::pinning::RawPinning>,
}

/// One file path or a list of them (`include`, `mcp_json`); the loader takes these keys out of
/// the tree before deserialising it, so this only describes them.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub(super) enum PathList {
    /// One path.
    One(String),
    /// Paths, in order.
    Many(Vec<String>),
}

/// `[gateway]`.
#[derive(Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGateway {
    /// Address the MCP endpoint listens on, IP:port. Default "127.0.0.1:8080"; a non-loopback
    /// address needs `[auth]` or `allow_unauthenticated = true`.
    pub(super) listen: Option<Spanned<String>>,
    /// Serve /status, /healthz, /readyz and /reload on this IP:port instead of `listen` (not
    /// behind `[auth]`: keep it private). Default: on `listen`.
    pub(super) admin_listen: Option<Spanned<String>>,
    /// URL path of the MCP endpoint. Default "/mcp" (legacy SSE beside it at /sse and /message).
    pub(super) path: Option<Spanned<String>>,
    /// Between a server's namespace and its tool names in exposed names. Default "__".
    pub(super) separator: Option<Spanned<String>>,
    /// Longest exposed tool or prompt name (namespace included), 16 to 256. Names that are
    /// longer or leave [A-Za-z0-9_-] are mapped and shortened (readable head + short hash).
    /// Default 64 (the Claude, OpenAI and Gemini limit).
    #[schemars(range(min = 16, max = 256))]
    pub(super) max_name_length: Option<Spanned<usize>>,
    /// Characters of `max_name_length` left for the host's own prefix (e.g. 24 for Claude
    /// Code's "mcp__mcpmux__" and a margin); at least 16 must remain. Default 0.
    pub(super) name_reserve: Option<Spanned<usize>>,
    /// Seconds a host session may stay idle before it is dropped. Default 1800.
    #[schemars(range(min = 1))]
    pub(super) session_idle_timeout_secs: Option<Spanned<u64>>,
    /// Seconds a request to a server may take (servers may override). Default 300.
    #[schemars(range(min = 1))]
    pub(super) request_timeout_secs: Option<Spanned<u64>>,
    /// Seconds no request ever exceeds, whatever timeouts or progress say. Default 3600.
    #[schemars(range(min = 1))]
    pub(super) max_request_timeout_secs: Option<Spanned<u64>>,
    /// Requests one host session may have in flight at once. Default 64.
    #[schemars(range(min = 1))]
    pub(super) max_in_flight_per_session: Option<Spanned<usize>>,
    /// Seconds a stop waits for in-flight calls before answering them with an error. Default 10.
    pub(super) drain_timeout_secs: Option<Spanned<u64>>,
    /// Seconds /readyz answers 503 on stop while everything is still served, before the drain
    /// (lets a load balancer move away). Default 0; 5 with [cluster] (replicas stand behind a
    /// balancer: above the fall × interval of its health checks).
    pub(super) shutdown_delay_secs: Option<Spanned<u64>>,
    /// Items per page of tools/prompts/resources lists. Default 500.
    #[schemars(range(min = 1))]
    pub(super) page_size: Option<Spanned<usize>>,
    /// Largest request body accepted, in bytes. Default 16777216 (16 MiB).
    #[schemars(range(min = 1))]
    pub(super) max_body_bytes: Option<Spanned<usize>>,
    /// Host header values accepted (DNS-rebinding protection). Default: the built-in rule
    /// (loopback names for a loopback listen).
    pub(super) allowed_hosts: Option<Vec<Spanned<String>>>,
    /// Origin header values accepted from browsers. Default: none besides the built-in rule.
    pub(super) allowed_origins: Option<Vec<Spanned<String>>>,
    /// When GET /readyz answers 200: "all" upstreams ready (default), "any" one ready, or
    /// "attempted" (every upstream had its first start attempt).
    #[schemars(extend("enum" = ["all", "any", "attempted"]))]
    pub(super) ready_when: Option<Spanned<String>>,
    /// The endpoint's URL as hosts reach it (protected resource metadata, default JWT
    /// audience). Default "http://{listen}{path}".
    pub(super) public_url: Option<Spanned<String>>,
    /// Serve a non-loopback `listen` without `[auth]` (e.g. behind an authenticating proxy).
    /// Default false.
    pub(super) allow_unauthenticated: Option<Spanned<bool>>,
    /// Serve HTTP/2 besides HTTP/1.1 on `listen` and `admin_listen`: with prior knowledge (h2c)
    /// on plain TCP, for a balancer or a host that speaks it. false: HTTP/1.1 only. Default true.
    pub(super) http2: Option<Spanned<bool>>,
    /// HTTPS on `listen` (and `admin_listen`): `{ cert, key }` PEM files, relative to this file,
    /// re-read when they change; `client_ca` adds mutual TLS. Default: plain HTTP.
    pub(super) tls: Option<super::tls::RawServeTls>,
}

/// `[servers.NAME]`: one upstream MCP server, stdio (`command`) or HTTP (`url`).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    /// Program to run as a stdio server (a relative path follows this file's folder; a bare
    /// name is looked up in PATH). Exactly one of `command` and `url`.
    pub(super) command: Option<Spanned<String>>,
    /// Arguments of `command`.
    pub(super) args: Option<Vec<Spanned<String>>>,
    /// Environment variables set for `command`, on top of the minimal inherited set.
    pub(super) env: Option<Ordered<Spanned<String>>>,
    /// Working directory of `command`. Default: this file's folder.
    pub(super) cwd: Option<Spanned<String>>,
    /// Pass mcpmux's whole environment to `command` instead of the minimal set. Default false.
    pub(super) inherit_env: Option<Spanned<bool>>,
    /// URL of an HTTP server (http:// or https://). Exactly one of `command` and `url`.
    pub(super) url: Option<Spanned<String>>,
    /// HTTP headers sent to a `url` server (e.g. Authorization = "Bearer ${TOKEN}").
    pub(super) headers: Option<Ordered<Spanned<String>>>,
    /// How mcpmux signs in to a `url` server beyond static `headers`: { mode = "oauth" },
    /// "token_exchange", "client_credentials" or "forward" (see docs/configuration.md).
    pub(super) auth: Option<super::upstream_auth::RawUpstreamAuth>,
    /// Prefix of its exposed names (`NAMESPACE__tool`); "" exposes them unprefixed. Default:
    /// the server's name.
    pub(super) namespace: Option<Spanned<String>>,
    /// "shared": one connection for every host session (default); "per-session": one
    /// connection (process) per host session.
    #[schemars(extend("enum" = ["shared", "per-session"]))]
    pub(super) isolation: Option<Spanned<String>>,
    /// Protocol era spoken to the server: "auto" probes server/discover and falls back to
    /// initialize (default); "session" always uses initialize.
    #[schemars(extend("enum" = ["auto", "session"]))]
    pub(super) era: Option<Spanned<String>>,
    /// HTTP transport of a `url` server: "auto" (Streamable HTTP, falling back to legacy SSE;
    /// default), "streamable-http" or "sse".
    #[schemars(extend("enum" = ["auto", "streamable-http", "sse"]))]
    pub(super) transport: Option<Spanned<String>>,
    /// TLS toward a `https://` server: `{ ca, cert, key, server_name }` (a CA to trust besides the
    /// bundled and system roots, a client certificate, the name to verify). Paths relative to this
    /// file. There is no way to skip verification.
    pub(super) tls: Option<Spanned<super::tls::RawUpstreamTls>>,
    /// Seconds a request to this server may take. Default: gateway.request_timeout_secs.
    #[schemars(range(min = 1))]
    pub(super) request_timeout_secs: Option<Spanned<u64>>,
    /// Whether a progress notification starts the request's timeout over. Default false.
    pub(super) timeout_resets_on_progress: Option<Spanned<bool>>,
    /// Requests this server may have in flight at once; beyond, calls fail fast. Default 256.
    #[schemars(range(min = 1))]
    pub(super) max_in_flight: Option<Spanned<usize>>,
    /// Seconds between health checks of a ready connection; 0 disables them. Default 30.
    pub(super) health_check_interval_secs: Option<Spanned<u64>>,
    /// Seconds a health check may take before the connection counts as hung. Default 10.
    #[schemars(range(min = 1))]
    pub(super) health_check_timeout_secs: Option<Spanned<u64>>,
    /// Seconds opening a connection may take (connect and initialize). Default 30. For a stdio
    /// server it counts from its first output on stdout: before it (installing), it may stay
    /// silent up to 10 times as long.
    #[schemars(range(min = 1))]
    pub(super) handshake_timeout_secs: Option<Spanned<u64>>,
    /// Longest line a stdio server may write, in bytes. Default 16777216 (16 MiB).
    #[schemars(range(min = 1))]
    pub(super) max_line_bytes: Option<Spanned<usize>>,
    /// false keeps the server in the file without starting it. Default true.
    pub(super) enabled: Option<Spanned<bool>>,
    /// Variables of mcpmux's environment this server cannot start without (such as a VS Code
    /// input's, which `mcpmux import` and `mcp_json` write here): while one is unset, this
    /// server is not started (it is disabled, with the reason in check-config, the log and
    /// /status) and the rest of the configuration serves. Default: none.
    pub(super) needs_env: Option<Vec<Spanned<String>>>,
    /// Which of the server's tools are exposed (globs over its own tool names).
    pub(super) tools: Option<RawFilter>,
    /// Which of the server's prompts are exposed (globs over its own prompt names).
    pub(super) prompts: Option<RawFilter>,
    /// Which of the server's resources are exposed (globs over their URIs).
    pub(super) resources: Option<RawFilter>,
    /// Tools exposed under another name: { own_name = "new_name" }.
    pub(super) rename: Option<Ordered<Spanned<String>>>,
    /// Tool descriptions replaced: { tool_name = "description" } (a renamed tool by its new name).
    pub(super) descriptions: Option<Ordered<Spanned<String>>>,
}

/// `tools`, `prompts` or `resources` of a server: `{ include = [...], exclude = [...] }`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFilter {
    /// Globs (`*`, `?`) of the names kept. Default: every name.
    pub(super) include: Option<Vec<Spanned<String>>>,
    /// Globs of the names removed (after `include`). Default: none.
    pub(super) exclude: Option<Vec<Spanned<String>>>,
}

/// One `[[policy]]` rule: whom it applies to and what it allows or denies.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    /// Principals (JWT `sub` or API key name) the rule applies to. Default: anyone.
    pub(super) principals: Option<Vec<Spanned<String>>>,
    /// Groups the rule applies to (any one of them). Default: any group.
    pub(super) groups: Option<Vec<Spanned<String>>>,
    /// Scopes the principal must hold for the rule to apply. Default: none needed.
    pub(super) scopes: Option<Vec<Spanned<String>>>,
    /// Globs over exposed tool/prompt names and resource URIs the rule allows.
    pub(super) allow: Option<Vec<Spanned<String>>>,
    /// Globs over exposed names and URIs the rule denies (deny wins).
    pub(super) deny: Option<Vec<Spanned<String>>>,
    /// Calls allowed per principal, "N/sec", "N/min" or "N/hour" (N at least 1).
    pub(super) rate_limit: Option<Spanned<String>>,
    /// Record the arguments of matching calls in the audit log (needs `[audit]`). Default false.
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

impl<V: JsonSchema> JsonSchema for Ordered<V> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        format!("Table_of_{}", V::schema_name()).into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "additionalProperties": generator.subschema_for::<V>(),
        })
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

/// A deserializer's message in the file's terms (keys, tables), on one line, without trailing
/// space.
pub(super) fn friendly(message: &str) -> String {
    super::suggest::unknown_key(message.trim_end())
        .replace('\n', ", ")
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
        .replace("struct RawVault", "the [vault] table")
        .replace("struct RawTelemetry", "the [telemetry] table")
        .replace("struct RawPinning", "the [pinning] table")
        .replace("struct RawServeTls", "the [gateway] tls table")
        .replace("struct RawApiKey", "an [[auth.api_keys]] table")
        .replace("struct RawStepUp", "an [[auth.step_up]] table")
}
