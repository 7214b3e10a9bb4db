//! `[profiles.NAME]`: another endpoint at its own `path` with a subset of the catalog (its
//! `servers`, then `tools`/`prompts`/`resources` include/exclude globs over exposed names),
//! checked with errors at their lines; where each profile is served and its resource URL.

use super::discovery::{self, Discovery, ProfileMatch, RawProfileMatch};
use super::raw::{Ordered, RawFilter};
use super::shaping::Filter;
use super::spanned::Spanned;
use super::{path_problem, ConfigError, Ctx, GatewayConfig, ServerConfig, UpstreamId};
use schemars::JsonSchema;
use serde::Deserialize;

/// Paths mcpmux serves itself beside the MCP endpoints (a profile may not take them).
const RESERVED_PATHS: [&str; 3] = ["/status", "/healthz", "/readyz"];
/// The protected resource metadata lives under this prefix.
const WELL_KNOWN: &str = "/.well-known/";

/// One profile: an endpoint of its own that sees part of the catalog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// The key of `[profiles.NAME]`.
    pub name: String,
    /// Where it is served (starts with `/`, distinct from every other endpoint).
    pub path: String,
    /// The servers whose items it sees, in file order; `None`: every server.
    pub servers: Option<Vec<UpstreamId>>,
    /// Globs over exposed tool names.
    pub tools: Filter,
    /// Globs over exposed prompt names.
    pub prompts: Filter,
    /// Globs over exposed resource URIs and resource template URIs.
    pub resources: Filter,
    /// What its `tools/list` answers: the catalog, the meta-tools, or whichever fits.
    pub discovery: Discovery,
    /// For `discovery = "auto"`: the most estimated tokens (bytes / 4) of the serialized
    /// `tools/list` served as the catalog.
    pub token_budget: u64,
    /// When a request to the main endpoint is served as this profile.
    pub matcher: Option<ProfileMatch>,
    /// The line of its table.
    pub line: usize,
}

impl Profile {
    /// Whether it sees the items of `upstream` at all.
    pub fn has_server(&self, upstream: &UpstreamId) -> bool {
        self.servers
            .as_ref()
            .is_none_or(|servers| servers.contains(upstream))
    }

    /// The legacy HTTP+SSE paths of this profile: `{path}/sse` and `{path}/message` (under its
    /// own path, so profiles side by side never share them).
    pub fn legacy_paths(&self) -> (String, String) {
        let base = self.path.trim_end_matches('/');
        (format!("{base}/sse"), format!("{base}/message"))
    }
}

/// Which of a profile's faces a request path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfileFace {
    /// Its Streamable HTTP endpoint (`path`).
    Endpoint,
    /// Its legacy SSE stream (`{path}/sse`).
    LegacyStream,
    /// Its legacy message endpoint (`{path}/message`).
    LegacyMessage,
}

/// The resource URL of the endpoint served at `path`, as hosts reach it: `gateway.public_url`
/// with its MCP path replaced by `path` (a public URL whose path does not end with
/// `gateway.path`, a proxy's prefix, keeps that prefix and gets `path` appended to it).
pub fn resource_url(gateway: &GatewayConfig, path: &str) -> String {
    let public = gateway.public_url.trim_end_matches('/');
    let Ok(url) = url::Url::parse(public) else {
        return format!("{public}{path}");
    };
    let own = url.path().trim_end_matches('/');
    let main = gateway.path.trim_end_matches('/');
    let prefix = own.strip_suffix(main).unwrap_or(own);
    format!("{}{prefix}{path}", url.origin().ascii_serialization())
}

/// `[profiles.NAME]`: another endpoint with a subset of the catalog.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProfile {
    /// Where the profile is served, e.g. "/mcp/review" (required; distinct from every other
    /// endpoint).
    path: Option<Spanned<String>>,
    /// The servers whose tools, prompts and resources it sees. Default: every server.
    servers: Option<Vec<Spanned<String>>>,
    /// Globs over exposed tool names (`server__tool`) it keeps or removes.
    tools: Option<RawFilter>,
    /// Globs over exposed prompt names it keeps or removes.
    prompts: Option<RawFilter>,
    /// Globs over exposed resource URIs it keeps or removes.
    resources: Option<RawFilter>,
    /// What its tools/list answers: "list" (default) the catalog itself; "search" only the
    /// meta-tools mcpmux__search_tools, mcpmux__describe_tool and mcpmux__call_tool; "auto" the
    /// catalog while its serialized tools/list fits token_budget, else the meta-tools.
    discovery: Option<Spanned<String>>,
    /// For discovery = "auto": the most estimated tokens (the serialized tools/list's bytes / 4)
    /// served as the catalog. Default 8000.
    token_budget: Option<Spanned<u64>>,
    /// Also serve this profile on the main endpoint to a request whose token claim or header
    /// matches: { claim = "groups", value = "agents" } or { header = "X-Mcpmux-Profile",
    /// value = "agent" } (decided per request; the first matching profile wins).
    #[serde(rename = "match")]
    matcher: Option<Spanned<RawProfileMatch>>,
}

/// The profiles of the file, checked: each path well formed and free, each server configured
/// (a disabled one is accepted and logged: it contributes nothing until it is enabled; one in
/// `failed`, which did not build, is taken as named), each glob valid. The problem of each
/// profile that does not build goes to `errors` (and the profile is left out).
pub(super) fn build_profiles(
    ctx: &Ctx<'_>,
    raw: Ordered<RawProfile>,
    gateway: &GatewayConfig,
    (servers, disabled, failed): (&[ServerConfig], &[super::DisabledServer], &[UpstreamId]),
    errors: &mut Vec<ConfigError>,
) -> Vec<Profile> {
    let mut taken: Vec<(String, String)> = vec![(gateway.path.clone(), "gateway.path".into())];
    let (sse, message) = super::legacy_paths(&gateway.path);
    if sse != gateway.path && message != gateway.path {
        taken.push((sse, "the legacy SSE stream of gateway.path".into()));
        taken.push((message, "the legacy SSE message endpoint of gateway.path".into()));
    }
    for path in RESERVED_PATHS {
        taken.push((path.to_string(), "an operator endpoint".into()));
    }
    let mut out: Vec<Profile> = Vec::with_capacity(raw.0.len());
    for (key, table) in raw.0 {
        let known = (servers, disabled, failed);
        if let Some(profile) = ctx.section(errors, || build_profile(ctx, &key, &table, &mut taken, known)) {
            out.push(profile);
        }
    }
    out
}

/// One `[profiles.NAME]`; its paths are added to `taken`.
fn build_profile(
    ctx: &Ctx<'_>,
    key: &Spanned<String>,
    table: &RawProfile,
    taken: &mut Vec<(String, String)>,
    (servers, disabled, failed): (&[ServerConfig], &[super::DisabledServer], &[UpstreamId]),
) -> Result<Profile, ConfigError> {
    let name = key.get_ref().clone();
    let at = format!("profiles.{name}");
    let line = (ctx.sources.locate(key.span().start))
        .map_or(0, |(file, local)| super::raw::line_col(&file.text, local).0);
    if name.is_empty() {
        return Err(ctx.invalid(&key.span(), "a profile name must not be empty"));
    }
    let Some(raw_path) = &table.path else {
        let msg = format!("{at}.path is required (where the profile is served, e.g. \"/mcp/{name}\")");
        return Err(ctx.invalid(&key.span(), msg));
    };
    let path = ctx.expand(raw_path, &format!("{at}.path"))?;
    if let Some(why) = path_problem(&path) {
        return Err(ctx.invalid(&raw_path.span(), format!("{at}.path {path:?} {why}")));
    }
    if path.starts_with(WELL_KNOWN) {
        let msg = format!("{at}.path {path:?} is under {WELL_KNOWN}, where mcpmux serves metadata");
        return Err(ctx.invalid(&raw_path.span(), msg));
    }
    let profile_paths = {
        let probe = Profile {
            name: name.clone(),
            path: path.clone(),
            servers: None,
            tools: Filter::default(),
            prompts: Filter::default(),
            resources: Filter::default(),
            discovery: Discovery::default(),
            token_budget: discovery::DEFAULT_TOKEN_BUDGET,
            matcher: None,
            line,
        };
        let (sse, message) = probe.legacy_paths();
        [path.clone(), sse, message]
    };
    for (mine, what) in profile_paths
        .iter()
        .zip(["path", "legacy SSE stream", "legacy message endpoint"])
    {
        if let Some((_, owner)) = taken.iter().find(|(p, _)| p == mine) {
            let msg = match what {
                "path" => format!("{at}.path {path:?} is already {owner}"),
                _ => format!("{at}.path {path:?}: its {what} {mine:?} is already {owner}"),
            };
            return Err(ctx.invalid(&raw_path.span(), msg));
        }
    }
    for (mine, what) in profile_paths
        .iter()
        .zip(["path", "legacy SSE stream", "legacy message endpoint"])
    {
        taken.push((mine.clone(), format!("the {what} of profiles.{name}")));
    }
    let members = match &table.servers {
        None => None,
        Some(list) => {
            let mut ids = Vec::with_capacity(list.len());
            for (i, server) in list.iter().enumerate() {
                let key = format!("{at}.servers[{i}]");
                let wanted = ctx.expand(server, &key)?;
                let id = UpstreamId::new(&wanted);
                if disabled.iter().any(|s| s.id == id) {
                    tracing::info!(
                        profile = %name,
                        server = %wanted,
                        "{key} names a disabled server (enabled = false): it adds nothing to the profile until it is enabled"
                    );
                } else if !servers.iter().any(|s| s.id == id) && !failed.contains(&id) && !ctx.incomplete {
                    let built = servers.iter().map(|s| s.name.as_str());
                    let known: Vec<&str> = built.chain(failed.iter().map(|id| id.as_str())).collect();
                    let msg = format!("{key}: no server {wanted:?} is configured (servers: {known:?})");
                    return Err(ctx.invalid(&server.span(), msg));
                }
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
            Some(ids)
        }
    };
    Ok(Profile {
        name,
        path,
        servers: members,
        tools: filter(ctx, &table.tools, &format!("{at}.tools"))?,
        prompts: filter(ctx, &table.prompts, &format!("{at}.prompts"))?,
        resources: filter(ctx, &table.resources, &format!("{at}.resources"))?,
        discovery: discovery::discovery(ctx, &table.discovery, &at)?,
        token_budget: discovery::token_budget(ctx, &table.token_budget, &at)?,
        matcher: discovery::profile_match(ctx, &table.matcher, &at)?,
        line,
    })
}

/// An `include`/`exclude` table of globs, each checked at its line.
fn filter(ctx: &Ctx<'_>, raw: &Option<RawFilter>, key: &str) -> Result<Filter, ConfigError> {
    let fail = |span: &std::ops::Range<usize>, msg: String| ctx.invalid(span, msg);
    super::shaping::glob_filter(raw, key, |pattern, at| ctx.expand(pattern, at), fail)
}
