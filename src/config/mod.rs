//! Configuration: owns the TOML file format, its strict parsing (unknown keys and type errors
//! reported with line numbers), `${VAR}` interpolation and validation into a typed [`Config`]
//! (servers, gateway settings, `[[policy]]` rules).

use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;

mod audit;
mod auth;
mod cluster;
mod gateway;
mod id;
mod include;
mod interpolate;
mod mcp_json;
mod operator;
mod paths;
mod policy;
mod preflight;
mod profiles;
mod raw;
mod server;
mod shaping;
mod sources;
mod telemetry;
mod transport;
mod validate;
pub use audit::{AuditConfig, AuditSink, DEFAULT_QUEUE_SIZE as DEFAULT_AUDIT_QUEUE_SIZE};
pub use auth::{ApiKey, AuthConfig, Introspection, StepUp};
pub use cluster::ClusterConfig;
use gateway::{build_gateway, path_problem};
pub use id::{IdMap, UpstreamId};
use interpolate::{interpolate, InterpError};
pub use operator::operator_address;
pub use policy::{PolicyRule, RateLimit, RatePeriod};
pub use preflight::{Finding, Severity};
pub use profiles::{resource_url, Profile, ProfileFace};
use raw::RawConfig;
use server::build_server;
pub use shaping::{Filter, Shaping};
use sources::Sources;
pub use telemetry::{LogFormat, TelemetryConfig};
pub use transport::HttpMode;
pub use validate::Problem;

const MIB_16: usize = 16 * 1024 * 1024;

/// A string that must not leak into logs: `Debug` prints `"***"`. There is deliberately no
/// `Display`; use [`Secret::expose`] where the real value is needed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"***\"")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// TOML syntax, unknown key or wrong type; the message starts with `source:line:column:`.
    #[error("{message}")]
    Parse { message: String },
    /// A semantically invalid value; the message starts with `source:line:` where known.
    #[error("{message}")]
    Invalid { message: String },
    #[error("{location}: environment variable \"{var}\" is not set")]
    MissingEnv { var: String, location: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub gateway: GatewayConfig,
    /// In file order; the gateway merges upstream lists in this order. Only the enabled ones.
    pub servers: Vec<ServerConfig>,
    /// The servers with `enabled = false`, in file order: validated like the others (so turning
    /// one on cannot surprise), never started, named by `/status`.
    pub disabled: Vec<ServerConfig>,
    /// The `[[policy]]` rules in file order; empty when there is none (everything is allowed).
    pub policy: Vec<PolicyRule>,
    /// `[auth]`; `None` authenticates nobody (only on loopback, or with
    /// `gateway.allow_unauthenticated`).
    pub auth: Option<AuthConfig>,
    /// `[audit]`; `None` keeps no audit log.
    pub audit: Option<AuditConfig>,
    /// `[cluster]`; `None` seals with a key made for this process alone (one replica).
    pub cluster: Option<ClusterConfig>,
    /// `[profiles.NAME]` in file order: more endpoints, each with a subset of the catalog.
    pub profiles: Vec<Profile>,
    /// `[telemetry]` (its defaults when absent).
    pub telemetry: TelemetryConfig,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayConfig {
    pub listen: SocketAddr,
    /// Where `/status`, `/healthz` and `/readyz` are served instead of `listen` (not behind
    /// `[auth]`: bind it to a private address); `None` keeps them on `listen`.
    pub admin_listen: Option<SocketAddr>,
    pub path: String,
    pub separator: String,
    pub session_idle_timeout: Duration,
    pub request_timeout: Duration,
    /// No request waits longer, whatever the per-server timeouts or progress say.
    pub max_request_timeout: Duration,
    /// Requests one host session may have in flight at once (across all upstreams).
    pub max_in_flight_per_session: usize,
    /// How long a stop waits for in-flight calls before cancelling them.
    pub drain_timeout: Duration,
    /// On stop, how long `/readyz` answers 503 while new sessions and calls are still served
    /// (a balancer checking `/readyz` moves away), before the drain begins.
    pub shutdown_delay: Duration,
    pub page_size: usize,
    pub max_body_bytes: usize,
    /// Empty means the built-in rule.
    pub allowed_hosts: Vec<String>,
    pub allowed_origins: Vec<String>,
    /// When `GET /readyz` answers 200.
    pub ready_when: ReadyWhen,
    /// The endpoint's canonical URI as hosts reach it (`resource` of the protected resource
    /// metadata, the default audience); default `http://{listen}{path}`.
    pub public_url: String,
    /// Serve a non-loopback `listen` without `[auth]`.
    pub allow_unauthenticated: bool,
}

/// The rule of `GET /readyz` (`gateway.ready_when`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReadyWhen {
    /// Every upstream is ready (`"all"`, the default).
    #[default]
    All,
    /// At least one upstream is ready, or none is configured (`"any"`).
    Any,
    /// Every upstream has had its first start attempt, whatever came of it (`"attempted"`).
    Attempted,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            admin_listen: None,
            path: "/mcp".to_string(),
            separator: "__".to_string(),
            session_idle_timeout: Duration::from_secs(1800),
            request_timeout: Duration::from_secs(300),
            max_request_timeout: Duration::from_secs(3600),
            max_in_flight_per_session: 64,
            drain_timeout: Duration::from_secs(10),
            shutdown_delay: Duration::ZERO,
            page_size: 500,
            max_body_bytes: MIB_16,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            ready_when: ReadyWhen::All,
            public_url: "http://127.0.0.1:8080/mcp".to_string(),
            allow_unauthenticated: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// The key of the `[servers.NAME]` table.
    pub name: String,
    /// The same name as the upstream's identity.
    pub id: UpstreamId,
    /// Prefix for exposed names; "" exposes them unprefixed.
    pub namespace: String,
    pub isolation: Isolation,
    /// Which protocol era to speak to the server.
    pub era: Era,
    /// Overrides [`GatewayConfig::request_timeout`] when set.
    pub request_timeout: Option<Duration>,
    /// Whether a progress notification starts the request's timeout over (never past
    /// [`GatewayConfig::max_request_timeout`]).
    pub timeout_resets_on_progress: bool,
    /// Requests this server may have in flight at once; beyond, calls fail fast as overloaded.
    pub max_in_flight: usize,
    /// How often a ready connection is checked (`ping`, or `server/discover` on a modern
    /// server); `None` disables the check.
    pub health_check_interval: Option<Duration>,
    /// How long a health check may take before the connection counts as hung.
    pub health_check_timeout: Duration,
    /// How long opening a connection may take (spawn or connect, the era probe, `initialize`
    /// and its answer) before it counts as failed.
    pub handshake_timeout: Duration,
    pub max_line_bytes: usize,
    pub transport: TransportConfig,
    /// Which of its tools, prompts and resources hosts see, and under which tool names.
    pub shaping: std::sync::Arc<Shaping>,
}

impl ServerConfig {
    /// The per-request timeout for this server: its own, else the gateway's, never above the
    /// gateway's hard maximum.
    pub fn effective_request_timeout(&self, gateway: &GatewayConfig) -> Duration {
        self.request_timeout
            .unwrap_or(gateway.request_timeout)
            .min(gateway.max_request_timeout)
    }
}

/// How mcpmux picks the protocol era it speaks to an upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// Probe with `server/discover`, fall back to `initialize` (the default).
    Auto,
    /// Always `initialize` (for a dual-era server whose features need the session era).
    Session,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    Shared,
    PerSession,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransportConfig {
    Stdio {
        command: String,
        args: Vec<String>,
        /// The server's own variables, on top of what it inherits.
        env: Vec<(String, Secret)>,
        /// Its working directory; [`Config::load`] makes it absolute (the config file's
        /// directory when unset).
        cwd: Option<PathBuf>,
        /// Pass mcpmux's whole environment instead of the minimal set (`upstream::child_env`).
        inherit_env: bool,
    },
    Http {
        url: String,
        headers: Vec<(String, Secret)>,
        mode: HttpMode,
    },
}

impl Config {
    /// Reads and parses `path` with its includes and `mcp_json` files, interpolating from the
    /// process environment; relative paths of stdio servers are resolved against the directory
    /// of the file that wrote them (see [`Config::resolve_paths`]).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Config::load_tracked(path).0
    }

    /// [`Config::load`], and every file it read or looked for (the file, its includes, its
    /// `mcp_json` files, missing ones too): what to watch for changes, even when loading failed.
    pub fn load_tracked(path: &Path) -> (Result<Config, ConfigError>, Vec<PathBuf>) {
        let mut sources = Sources::default();
        let mut files = Vec::new();
        let tree = match include::read(path, &mut sources, &mut files) {
            Ok(tree) => tree,
            Err(err) => return (Err(err), files),
        };
        files.extend(tree.mcp_json.iter().map(|f| f.path.clone()));
        let mut root = tree.root;
        let result = mcp_json::add_servers(&mut sources, &mut root, &tree.mcp_json)
            .and_then(|()| Config::from_tree(root, &sources, &|var| std::env::var(var).ok()))
            .map(|mut config| {
                config.resolve_paths(&paths::base_dir(path));
                config
            });
        (result, files)
    }

    /// Parses `text`; `source_name` prefixes error messages, `env` resolves `${VAR}`. Relative
    /// paths are left as written (they follow the process's working directory); `include` and
    /// `mcp_json` are not followed (they need a file: [`Config::load`]).
    ///
    /// Interpolation runs after TOML parsing on every string value: `${NAME}` is replaced by
    /// the variable `NAME` (unset is an error), `${NAME:-default}` by `default` when `NAME` is
    /// unset or empty, `$$` is a literal `$`, and any other `$` is kept as is. An unterminated
    /// `${` is an error; substituted values are not expanded again (see [`interpolate`]).
    pub fn from_toml_str(
        text: &str,
        source_name: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let mut sources = Sources::default();
        let mut root = sources.parse(source_name, None, text)?;
        root.remove("include");
        root.remove("mcp_json");
        Config::from_tree(root, &sources, env)
    }

    /// The merged tree of `sources` into a validated configuration.
    fn from_tree(
        root: toml_edit::Table,
        sources: &Sources,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        use serde::Deserialize;
        let document = toml_edit::de::Deserializer::from(toml_edit::DocumentMut::from(root));
        let raw = RawConfig::deserialize(document).map_err(|e| sources.parse_error(e.message(), e.span()))?;
        let source_name = sources.main();
        let ctx = Ctx { sources, env };
        let raw_gateway = raw.gateway.unwrap_or_default();
        let gateway = build_gateway(&ctx, &raw_gateway)?;
        let auth = match &raw.auth {
            Some(table) => Some(auth::build_auth(&ctx, table, &gateway.public_url)?),
            None => None,
        };
        if auth.is_none() && !gateway.listen.ip().is_loopback() && !gateway.allow_unauthenticated {
            let msg = format!(
                "gateway.listen {} accepts connections from other machines and there is no [auth] table: \
                 anyone who can reach it could call every tool. Add [auth], listen on 127.0.0.1, or set \
                 gateway.allow_unauthenticated = true (e.g. behind an authenticating proxy)",
                gateway.listen
            );
            return Err(match &raw_gateway.listen {
                Some(v) => ctx.invalid(&v.span(), msg),
                None => ConfigError::Invalid {
                    message: format!("{source_name}: {msg}"),
                },
            });
        }
        let mut servers: Vec<ServerConfig> = Vec::with_capacity(raw.servers.0.len());
        let mut spans = Vec::with_capacity(raw.servers.0.len());
        let mut disabled = Vec::new();
        for (key, raw_server) in raw.servers.0 {
            let enabled = raw_server.enabled.as_ref().is_none_or(|v| *v.get_ref());
            let server = build_server(&ctx, &key, raw_server, &gateway)?;
            if !enabled {
                disabled.push(server);
                continue;
            }
            spans.push((server.id.clone(), key.span()));
            if !server.namespace.is_empty() && server.namespace.contains(&gateway.separator) {
                tracing::warn!(
                    server = %server.name,
                    "namespace {:?} contains the separator {:?}; prefixed names may be ambiguous",
                    server.namespace,
                    gateway.separator
                );
            }
            servers.push(server);
        }
        let policy = policy::build_policy(&ctx, raw.policy)?;
        if let (Some(first), None) = (policy.first(), &auth) {
            return Err(ConfigError::Invalid {
                message: format!(
                    "{source_name}:{}: [[policy]] needs [auth]: without authentication no request has a \
                     principal for the rules to decide on",
                    first.line
                ),
            });
        }
        let audit = match &raw.audit {
            Some(table) => Some(audit::build_audit(&ctx, table)?),
            None => None,
        };
        audit::check_rules(source_name, &policy, audit.as_ref())?;
        let cluster = match &raw.cluster {
            Some(table) => Some(cluster::build_cluster(&ctx, table, gateway.listen)?),
            None => None,
        };
        let profiles = profiles::build_profiles(&ctx, raw.profiles, &gateway, (&servers, &disabled))?;
        let telemetry = telemetry::build_telemetry(&ctx, raw.telemetry.as_ref())?;
        let config = Config {
            gateway,
            servers,
            disabled,
            policy,
            auth,
            audit,
            cluster,
            profiles,
            telemetry,
        };
        // The rules of any configuration, pointed at the line of the server they are about.
        config.validate().map_err(|problem| {
            let span = (problem.server.as_ref())
                .and_then(|id| spans.iter().find(|(s, _)| s == id).map(|(_, span)| span));
            match span {
                Some(span) => ctx.invalid(span, &problem.message),
                None => ConfigError::Invalid {
                    message: format!("{source_name}: {problem}"),
                },
            }
        })?;
        Ok(config)
    }
}

struct Ctx<'a> {
    sources: &'a Sources,
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Ctx<'_> {
    /// The configuration file's name, for a rule about the whole of it.
    fn source(&self) -> &str {
        self.sources.main()
    }

    fn at(&self, span: &Range<usize>) -> String {
        self.sources.at(span.start)
    }

    fn invalid(&self, span: &Range<usize>, msg: impl fmt::Display) -> ConfigError {
        ConfigError::Invalid {
            message: format!("{}: {msg}", self.at(span)),
        }
    }

    /// Interpolates one string value; `key` names it in errors (e.g. `servers.docs.url`).
    fn expand(&self, value: &Spanned<String>, key: &str) -> Result<String, ConfigError> {
        interpolate(value.get_ref(), self.env).map_err(|e| match e {
            InterpError::Missing(var) => ConfigError::MissingEnv {
                var,
                location: format!("{}: {key}", self.at(&value.span())),
            },
            InterpError::Syntax(why) => self.invalid(&value.span(), format!("{key}: {why}")),
        })
    }

    fn expand_list(&self, values: &[Spanned<String>], key: &str) -> Result<Vec<String>, ConfigError> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| self.expand(v, &format!("{key}[{i}]")))
            .collect()
    }

    /// A number that must be at least 1.
    fn nonzero<T: Copy + Default + PartialEq>(&self, v: &Spanned<T>, key: &str) -> Result<T, ConfigError> {
        if *v.get_ref() == T::default() {
            return Err(self.invalid(&v.span(), format!("{key} must be at least 1")));
        }
        Ok(*v.get_ref())
    }
}

/// The legacy SSE and message paths that sit next to the MCP path `mcp_path` (`/mcp` gives
/// `/sse` and `/message`; `/api/mcp` gives `/api/sse` and `/api/message`).
pub fn legacy_paths(mcp_path: &str) -> (String, String) {
    let prefix = mcp_path.rsplit_once('/').map_or("", |(head, _)| head);
    (format!("{prefix}/sse"), format!("{prefix}/message"))
}

impl Config {
    /// The profile named `name`.
    pub fn profile(&self, name: &str) -> Option<&Profile> {
        self.profiles.iter().find(|p| p.name == name)
    }

    /// The profile served at request path `path`, and which of its faces that is (legacy SSE
    /// only while the main endpoint has it).
    pub fn profile_at(&self, path: &str) -> Option<(&Profile, ProfileFace)> {
        if self.profiles.is_empty() {
            return None;
        }
        let (sse, message) = legacy_paths(&self.gateway.path);
        let legacy = sse != self.gateway.path && message != self.gateway.path;
        self.profiles.iter().find_map(|profile| {
            if profile.path == path {
                return Some((profile, ProfileFace::Endpoint));
            }
            let (sse, message) = profile.legacy_paths();
            match () {
                _ if legacy && sse == path => Some((profile, ProfileFace::LegacyStream)),
                _ if legacy && message == path => Some((profile, ProfileFace::LegacyMessage)),
                _ => None,
            }
        })
    }
}

#[cfg(test)]
mod gateway_tests;
#[cfg(test)]
mod import_tests;
#[cfg(test)]
mod include_tests;
#[cfg(test)]
mod profiles_tests;
#[cfg(test)]
mod shaping_tests;
#[cfg(test)]
mod tests;
