//! Configuration: owns the TOML file format, its strict parsing (unknown keys and type errors
//! reported with line numbers), `${VAR}` interpolation and validation into a typed [`Config`]
//! (servers, gateway settings, `[[policy]]` rules).

use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use spanned::Spanned;

mod audit;
mod auth;
mod build;
mod cluster;
mod command_lookup;
mod discovery;
mod gateway;
mod id;
mod include;
mod interpolate;
mod load;
mod mcp_json;
mod operator;
mod paths;
mod pinning;
mod policy;
mod preflight;
mod problems;
mod profiles;
mod raw;
pub mod schema;
mod server;
mod shaping;
mod sources;
mod spanned;
mod suggest;
mod telemetry;
mod tls;
mod transport;
mod upstream_auth;
mod validate;
mod vault;
pub use audit::{AuditConfig, AuditSink, DEFAULT_QUEUE_SIZE as DEFAULT_AUDIT_QUEUE_SIZE};
pub use auth::{ApiKey, AuthConfig, Introspection, StepUp};
pub use cluster::{ClusterConfig, DEFAULT_SHUTDOWN_DELAY as CLUSTER_SHUTDOWN_DELAY};
pub use discovery::{Discovery, ProfileMatch};
pub use gateway::bind_hint;
use gateway::{build_gateway, path_problem};
pub use id::{IdMap, UpstreamId};
use interpolate::{interpolate, InterpError};
pub use load::{Loaded, Report};
pub use operator::{operator_address, OperatorEndpoint};
pub use pinning::{PinMode, PinningConfig, DEFAULT_LOCK_PATH};
pub use policy::{rule_site, PolicyRule, RateLimit, RatePeriod};
pub use preflight::{Finding, Severity};
pub use profiles::{resource_url, Profile, ProfileFace};
use server::build_server;
pub use shaping::{Filter, Shaping};
use sources::Sources;
pub use telemetry::{LogFormat, TelemetryConfig, DEFAULT_SERVICE_NAME};
pub use transport::HttpMode;
pub use upstream_auth::{ClientCredentials, ClientProof, OAuthClient, TokenExchange, UpstreamAuth};
pub use validate::{valid_exposed_name, Problem};
pub use vault::{VaultConfig, DEFAULT_VAULT_PATH};

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
    /// Several of the above (never fewer than two), in file order of discovery; Display
    /// prints one per line.
    #[error("{}", errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Many { errors: Vec<ConfigError> },
}

impl ConfigError {
    /// One error for `errors` (none gives `None`; one is itself; more are [`ConfigError::Many`]).
    fn gather(errors: Vec<ConfigError>) -> Option<ConfigError> {
        let mut flat: Vec<ConfigError> = Vec::with_capacity(errors.len());
        for err in errors {
            match err {
                ConfigError::Many { errors } => flat.extend(errors),
                err => flat.push(err),
            }
        }
        match flat.len() {
            0 => None,
            1 => flat.pop(),
            _ => Some(ConfigError::Many { errors: flat }),
        }
    }

    /// Each error on its own (one line each): the parts of a [`ConfigError::Many`], else itself.
    pub fn each(&self) -> Vec<&ConfigError> {
        match self {
            ConfigError::Many { errors } => errors.iter().collect(),
            err => vec![err],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub gateway: GatewayConfig,
    /// In file order; the gateway merges upstream lists in this order. Only the enabled ones.
    pub servers: Vec<ServerConfig>,
    /// The servers with `enabled = false`, and those waiting for a `needs_env` variable, in
    /// file order: never started, named by `/status`. Each is checked like the others; what
    /// would stop it from starting is a warning, not an error (a disabled table may be a
    /// placeholder: `[servers.github]` with only `enabled`).
    pub disabled: Vec<DisabledServer>,
    /// The `[[policy]]` rules in file order; empty when there is none (everything is allowed).
    pub policy: Vec<PolicyRule>,
    /// `[auth]`; `None` authenticates nobody (only on loopback, or with
    /// `gateway.allow_unauthenticated`).
    pub auth: Option<AuthConfig>,
    /// `[audit]`; `None` keeps no audit log.
    pub audit: Option<AuditConfig>,
    /// `[cluster]`; `None` seals with a key made for this process alone (one replica).
    pub cluster: Option<ClusterConfig>,
    /// `[vault]` (its defaults when absent): where upstream grants live and their keys.
    pub vault: VaultConfig,
    /// `[profiles.NAME]` in file order: more endpoints, each with a subset of the catalog.
    pub profiles: Vec<Profile>,
    /// `[telemetry]` (its defaults when absent): traces, log format, the access log.
    pub telemetry: TelemetryConfig,
    /// `[pinning]` (its defaults when absent): pinned tool definitions and their lock file.
    pub pinning: PinningConfig,
}

/// A `[servers.NAME]` table with `enabled = false`, or one that waits for a variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DisabledServer {
    pub name: String,
    pub id: UpstreamId,
    /// Why it could not start as written (`file:line: ...`), if it could not.
    pub problem: Option<String>,
    /// Why it is not started when its table does not say `enabled = false`: a variable of its
    /// `needs_env` that is not set.
    pub waiting: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayConfig {
    pub listen: SocketAddr,
    /// Where `/status`, `/healthz` and `/readyz` are served instead of `listen` (not behind
    /// `[auth]`: bind it to a private address); `None` keeps them on `listen`.
    pub admin_listen: Option<SocketAddr>,
    pub path: String,
    pub separator: String,
    /// Longest exposed tool or prompt name (`max_name_length`), before the reserve.
    pub max_name_length: usize,
    /// Characters of `max_name_length` the host's own prefix needs (`name_reserve`).
    pub name_reserve: usize,
    pub session_idle_timeout: Duration,
    pub request_timeout: Duration,
    /// No request waits longer, whatever the per-server timeouts or progress say.
    pub max_request_timeout: Duration,
    /// Requests one host session may have in flight at once (across all upstreams).
    pub max_in_flight_per_session: usize,
    /// How long a stop waits for in-flight calls before cancelling them.
    pub drain_timeout: Duration,
    /// On stop, how long `/readyz` answers 503 while new sessions and calls are still served
    /// (a balancer checking `/readyz` moves away), before the drain begins. Default zero; with
    /// `[cluster]`, [`CLUSTER_SHUTDOWN_DELAY`].
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
    /// Serve HTTP/2 (h2c with prior knowledge, ALPN over TLS) besides HTTP/1.1 (`http2`).
    pub http2: bool,
    /// HTTPS on the listeners (`tls`): the files, absolute.
    pub tls: Option<crate::tls::ServerFiles>,
}

impl GatewayConfig {
    /// The scheme of the listeners' URLs: `https` with `tls`.
    pub fn scheme(&self) -> &'static str {
        scheme(self.tls.is_some())
    }

    /// Whether hosts present client certificates the listener verifies (`tls.client_ca`): a
    /// certificate then authenticates a host, with or without `[auth]`.
    pub fn client_certificates(&self) -> bool {
        self.tls.as_ref().is_some_and(|tls| tls.client_ca.is_some())
    }

    /// The longest exposed tool or prompt name: `max_name_length - name_reserve`.
    pub fn name_budget(&self) -> usize {
        self.max_name_length.saturating_sub(self.name_reserve)
    }
}

/// The scheme of a listener with TLS (`https`) or without (`http`).
pub(crate) fn scheme(tls: bool) -> &'static str {
    match tls {
        true => "https",
        false => "http",
    }
}

/// The bounds and default of `gateway.max_name_length`, and the fewest characters
/// `name_reserve` must leave.
pub struct NameLimits {
    pub min: usize,
    pub max: usize,
    pub default: usize,
}

/// `gateway.max_name_length`: 16..=256, 64 by default; the budget is never below `min`.
pub const MAX_NAME_LENGTH: NameLimits = NameLimits {
    min: 16,
    max: 256,
    default: 64,
};

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
            max_name_length: MAX_NAME_LENGTH.default,
            name_reserve: 0,
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
            http2: true,
            tls: None,
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
    /// How long opening a connection may take (connect, the era probe, `initialize` and its
    /// answer) before it counts as failed; a stdio child's counts from its first output on
    /// stdout (before it, up to ten times this: it may be installing).
    pub handshake_timeout: Duration,
    pub max_line_bytes: usize,
    pub transport: TransportConfig,
    /// How mcpmux signs in to it (outbound identity) beyond static headers.
    pub auth: UpstreamAuth,
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
        /// `tls`: a CA, a client certificate, the name to verify (paths absolute).
        tls: Option<crate::tls::client::ClientFiles>,
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
        Config::load_all(path).into_result()
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
        let config = Config::from_tree(root, &sources, env);
        // Every configuration a unit test loads is also one the schema must accept.
        #[cfg(test)]
        if config.is_ok() {
            schema_tests::assert_schema_accepts(text);
        }
        config
    }

    /// The merged tree of `sources` into a validated configuration, or every problem found
    /// (see `problems`): each section (a server, a profile, a `[[policy]]` rule, `[gateway]`,
    /// `[auth]`, `[audit]`, `[cluster]`) is checked on its own, and a rule about several is
    /// skipped when one of them failed.
    fn from_tree(
        root: toml_edit::Table,
        sources: &Sources,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let (errors, built) = Config::from_tree_partial(root, sources, env, Vec::new(), &mut Vec::new());
        match (ConfigError::gather(errors), built) {
            (Some(err), _) => Err(err),
            (None, Some(config)) => Ok(config),
            (None, None) => Err(ConfigError::Invalid {
                message: format!("{}: the configuration does not load", sources.main()),
            }),
        }
    }

    /// [`Config::from_tree`] keeping what built despite the problems: every problem (`errors`
    /// holds those found reading the files, whose sections are then missing: names of servers
    /// are not checked against what is left), in the order of the files and their lines, and
    /// the configuration of the sections that built (`None` when the structural pass could not
    /// go on). `sites` gets the offsets of the keys the checks on the machine are about.
    fn from_tree_partial(
        root: toml_edit::Table,
        sources: &Sources,
        env: &dyn Fn(&str) -> Option<String>,
        mut errors: Vec<ConfigError>,
        sites: &mut Vec<(String, usize)>,
    ) -> (Vec<ConfigError>, Option<Config>) {
        let incomplete = !errors.is_empty();
        let built = problems::deserialize(root, sources, &mut errors).map(|(raw, dropped)| {
            let ctx = Ctx {
                sources,
                env,
                missing: Default::default(),
                incomplete,
            };
            Config::build(raw, &dropped, &ctx, &mut errors, sites)
        });
        // In the order of the files and their lines, as an editor lists them.
        errors.sort_by_cached_key(|err| sources.order_of(&err.to_string()));
        (errors, built)
    }
}

struct Ctx<'a> {
    sources: &'a Sources,
    env: &'a dyn Fn(&str) -> Option<String>,
    /// The `${VAR}`s found unset, not yet claimed by a section (see [`Ctx::section`]).
    missing: std::cell::RefCell<Vec<ConfigError>>,
    /// A file of the configuration could not be read: a name that is not there (a server a
    /// profile names) may be in it, and is not an error of its own.
    incomplete: bool,
}

impl Ctx<'_> {
    /// Build one section, adding its problem to `errors`: the unset `${VAR}`s it names (every
    /// one of them, and then nothing else about it: what it would say of an empty value is a
    /// follow-on), else its first error.
    fn section<T>(
        &self,
        errors: &mut Vec<ConfigError>,
        build: impl FnOnce() -> Result<T, ConfigError>,
    ) -> Option<T> {
        let before = self.missing.borrow().len();
        let result = build();
        let missing: Vec<ConfigError> = self.missing.borrow_mut().drain(before..).collect();
        if !missing.is_empty() {
            errors.extend(missing);
            return None;
        }
        result.map_err(|err| errors.push(err)).ok()
    }

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
        match interpolate(value.get_ref(), self.env) {
            Ok(text) => Ok(text),
            // Noted for the section, which reports every one; the value reads as empty
            // meanwhile, and what follows from that is not reported.
            Err(InterpError::Missing(var)) => {
                self.missing.borrow_mut().push(ConfigError::MissingEnv {
                    var,
                    location: format!("{}: {key}", self.at(&value.span())),
                });
                Ok(String::new())
            }
            Err(InterpError::Syntax(why)) => Err(self.invalid(&value.span(), format!("{key}: {why}"))),
        }
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
mod key_fixtures;
#[cfg(test)]
mod problems_tests;
#[cfg(test)]
mod profiles_tests;
#[cfg(test)]
mod schema_tests;
#[cfg(test)]
mod shaping_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tls_tests;
#[cfg(test)]
mod upstream_auth_tests;
