//! One `[servers.NAME]` table: its transport (stdio `command` or HTTP `url`), namespace,
//! isolation, era, limits, timeouts and shaping, validated with errors that name the key and line.

use super::raw::{Ordered, RawServer};
use super::shaping::RawShaping;
use super::spanned::Spanned;
use super::validate::{valid_namespace, NS_RULE};
use super::{
    ConfigError, Ctx, Era, GatewayConfig, Isolation, Secret, ServerConfig, TransportConfig, UpstreamId,
    MIB_16,
};
use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

/// Requests one server may have in flight unless `max_in_flight` says otherwise.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 256;
const DEFAULT_HEALTH_CHECK_INTERVAL: Duration = Duration::from_secs(30);
const DEFAULT_HEALTH_CHECK_TIMEOUT: Duration = Duration::from_secs(10);
/// How long opening a connection may take unless `handshake_timeout_secs` says otherwise: room
/// for a slow remote server, yet short enough that a server that never answers is reported
/// failed (and retried) within half a minute. A stdio server's counts from its first output
/// (a cold `npx`/`uvx` install before it may take 10 times as long: `upstream::startup`).
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// `servers.NAME` path of a server key, quoting keys that are not bare TOML keys.
fn server_path(name: &str) -> String {
    if name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
    {
        format!("servers.{name}")
    } else {
        format!("servers.{name:?}")
    }
}

fn is_header_name(name: &str) -> bool {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    !name.is_empty() && name.bytes().all(token)
}

/// Validation context for one `[servers.NAME]` table.
pub(super) struct ServerCtx<'a> {
    ctx: &'a Ctx<'a>,
    name: &'a str,
    path: String,
    key_span: Range<usize>,
}

impl ServerCtx<'_> {
    pub(super) fn fail(&self, span: Option<&Range<usize>>, msg: impl fmt::Display) -> ConfigError {
        let span = span.unwrap_or(&self.key_span);
        self.ctx.invalid(span, format!("server {:?}: {msg}", self.name))
    }

    pub(super) fn expand(&self, value: &Spanned<String>, key: &str) -> Result<String, ConfigError> {
        self.ctx.expand(value, &format!("{}.{key}", self.path))
    }

    pub(super) fn expand_list(
        &self,
        values: &[Spanned<String>],
        key: &str,
    ) -> Result<Vec<String>, ConfigError> {
        self.ctx.expand_list(values, &format!("{}.{key}", self.path))
    }

    /// A file's path as written, relative paths following the file that wrote it.
    pub(super) fn file_path(&self, value: &Spanned<String>, key: &str) -> Result<PathBuf, ConfigError> {
        let path = PathBuf::from(self.expand(value, key)?);
        if path.as_os_str().is_empty() {
            return Err(self.fail(Some(&value.span()), format!("{key} must not be empty")));
        }
        Ok(match self.ctx.sources.dir_at(value.span().start) {
            Some(dir) => super::paths::join(dir, &path),
            None => path,
        })
    }

    /// One of a fixed set of values; absent means the first.
    pub(super) fn choice<T: Copy>(
        &self,
        value: Option<&Spanned<String>>,
        key: &str,
        options: &[(&str, T)],
    ) -> Result<T, ConfigError> {
        let Some(v) = value else { return Ok(options[0].1) };
        let text = self.expand(v, key)?;
        match options.iter().find(|(name, _)| *name == text) {
            Some((_, value)) => Ok(*value),
            None => {
                let names: Vec<String> = options.iter().map(|(n, _)| format!("{n:?}")).collect();
                let msg = format!("unknown {key} {text:?} (expected {})", names.join(" or "));
                Err(self.fail(Some(&v.span()), msg))
            }
        }
    }

    /// A table of secret strings (`env` or `headers`), with names checked by `valid_name`.
    fn secrets(
        &self,
        table: &Option<Ordered<Spanned<String>>>,
        key: &str,
        valid_name: fn(&str) -> bool,
    ) -> Result<Vec<(String, Secret)>, ConfigError> {
        let header = key == "headers";
        let what = if header {
            "HTTP header"
        } else {
            "environment variable"
        };
        let mut out = Vec::new();
        for (k, v) in table.iter().flat_map(|t| t.0.iter()) {
            let name = k.get_ref();
            if !valid_name(name) {
                return Err(self.fail(Some(&k.span()), format!("invalid {what} name {name:?}")));
            }
            let value = self.expand(v, &format!("{key}.{name}"))?;
            // env values may span lines; header values may not hold control characters
            if value
                .chars()
                .any(|c| c == '\0' || (header && c.is_control() && c != '\t'))
            {
                let msg = format!("{key}.{name} contains a NUL or control character");
                return Err(self.fail(Some(&v.span()), msg));
            }
            out.push((name.clone(), Secret(value)));
        }
        Ok(out)
    }

    fn stdio(&self, command: &Spanned<String>, raw: &RawServer) -> Result<TransportConfig, ConfigError> {
        if raw.headers.is_some() {
            return Err(self.fail(
                None,
                "`headers` is only valid for `url` (Streamable HTTP) servers",
            ));
        }
        if raw.tls.is_some() {
            return Err(self.fail(None, "`tls` is only valid for `url` servers (https://)"));
        }
        self.http_mode(raw)?;
        let cmd = self.expand(command, "command")?;
        if cmd.is_empty() {
            return Err(self.fail(Some(&command.span()), "`command` must not be empty"));
        }
        let args = match &raw.args {
            Some(args) => self.ctx.expand_list(args, &format!("{}.args", self.path))?,
            None => Vec::new(),
        };
        let env_name = |n: &str| !n.is_empty() && !n.contains(['=', '\0']);
        let env = self.secrets(&raw.env, "env", env_name)?;
        let mut cwd = match &raw.cwd {
            Some(v) => match self.expand(v, "cwd")? {
                dir if dir.is_empty() => return Err(self.fail(Some(&v.span()), "`cwd` must not be empty")),
                dir => Some(PathBuf::from(dir)),
            },
            None => None,
        };
        // Read from files: relative paths follow the file that wrote them (an included one's).
        let sources = self.ctx.sources;
        let mut cmd = cmd;
        if let Some(file_dir) = sources.dir_at(command.span().start) {
            let dir = match (cwd.take(), &raw.cwd) {
                (Some(dir), Some(v)) => {
                    super::paths::join(sources.dir_at(v.span().start).unwrap_or(file_dir), &dir)
                }
                _ => file_dir.to_path_buf(),
            };
            if let Some(resolved) = super::paths::command_path(&cmd, &dir) {
                cmd = resolved;
            }
            cwd = Some(dir);
        }
        Ok(TransportConfig::Stdio {
            command: cmd,
            args,
            env,
            cwd,
            inherit_env: raw.inherit_env.as_ref().is_some_and(|v| *v.get_ref()),
        })
    }

    fn http(&self, url: &Spanned<String>, raw: &RawServer) -> Result<TransportConfig, ConfigError> {
        let stdio_only = [
            ("args", raw.args.is_some()),
            ("env", raw.env.is_some()),
            ("cwd", raw.cwd.is_some()),
            ("inherit_env", raw.inherit_env.is_some()),
        ];
        if let Some((k, _)) = stdio_only.iter().find(|(_, present)| *present) {
            return Err(self.fail(None, format!("`{k}` is only valid for `command` (stdio) servers")));
        }
        let u = self.expand(url, "url")?;
        let lower = u.to_ascii_lowercase();
        let rest = lower
            .strip_prefix("http://")
            .or_else(|| lower.strip_prefix("https://"));
        if rest.is_none_or(|r| r.is_empty() || r.starts_with('/')) {
            let msg = format!("`url` {u:?} must be an http:// or https:// URL with a host");
            return Err(self.fail(Some(&url.span()), msg));
        }
        let headers = self.secrets(&raw.headers, "headers", is_header_name)?;
        let mode = self.http_mode(raw)?;
        let tls = match &raw.tls {
            Some(tls) => Some(super::tls::build_upstream_tls(
                self.ctx,
                tls.get_ref(),
                self.name,
                &u,
                &tls.span(),
            )?),
            None => None,
        };
        Ok(TransportConfig::Http {
            url: u,
            headers,
            mode,
            tls,
        })
    }
}

pub(super) fn build_server(
    ctx: &Ctx<'_>,
    key: &Spanned<String>,
    raw: RawServer,
    gateway: &GatewayConfig,
) -> Result<ServerConfig, ConfigError> {
    let name = key.get_ref().clone();
    if name.is_empty() {
        return Err(ctx.invalid(
            &key.span(),
            "server name (the key after `servers.`) must not be empty",
        ));
    }
    let sc = ServerCtx {
        ctx,
        name: &name,
        path: server_path(&name),
        key_span: key.span(),
    };
    let transport = match (&raw.command, &raw.url) {
        (Some(command), None) => sc.stdio(command, &raw)?,
        (None, Some(url)) => sc.http(url, &raw)?,
        (Some(_), Some(_)) => {
            return Err(sc.fail(
                None,
                "set exactly one of `command` (stdio) or `url` (Streamable HTTP), not both",
            ))
        }
        (None, None) => return Err(sc.fail(None, "missing `command` (stdio) or `url` (Streamable HTTP)")),
    };
    let namespace = match &raw.namespace {
        Some(v) => match sc.expand(v, "namespace")? {
            ns if ns.is_empty() || valid_namespace(&ns) => ns,
            ns => {
                let msg = format!("namespace {ns:?} must be {NS_RULE} (or \"\" for no prefix)");
                return Err(sc.fail(Some(&v.span()), msg));
            }
        },
        None if valid_namespace(&name) => name.clone(),
        None => {
            let msg =
                format!("the server name is not a valid namespace ({NS_RULE}); set `namespace` explicitly");
            return Err(sc.fail(None, msg));
        }
    };
    let isolation = sc.choice(
        raw.isolation.as_ref(),
        "isolation",
        &[
            ("shared", Isolation::Shared),
            ("per-session", Isolation::PerSession),
        ],
    )?;
    let era = sc.choice(
        raw.era.as_ref(),
        "era",
        &[("auto", Era::Auto), ("session", Era::Session)],
    )?;
    let key = |k: &str| format!("{}.{k}", sc.path);
    let request_timeout = (raw.request_timeout_secs.as_ref())
        .map(|v| {
            ctx.nonzero(v, &key("request_timeout_secs"))
                .map(Duration::from_secs)
        })
        .transpose()?;
    if let Some(v) = raw.request_timeout_secs.as_ref() {
        if Duration::from_secs(*v.get_ref()) > gateway.max_request_timeout {
            let msg = "request_timeout_secs must not exceed gateway.max_request_timeout_secs";
            return Err(sc.fail(Some(&v.span()), msg));
        }
    }
    let timeout_resets_on_progress = raw
        .timeout_resets_on_progress
        .as_ref()
        .is_some_and(|v| *v.get_ref());
    let max_in_flight = (raw.max_in_flight.as_ref())
        .map(|v| ctx.nonzero(v, &key("max_in_flight")))
        .transpose()?
        .unwrap_or(DEFAULT_MAX_IN_FLIGHT);
    let health_check_interval = match raw.health_check_interval_secs.as_ref() {
        Some(v) if *v.get_ref() == 0 => None,
        Some(v) => Some(Duration::from_secs(*v.get_ref())),
        None => Some(DEFAULT_HEALTH_CHECK_INTERVAL),
    };
    let health_check_timeout = (raw.health_check_timeout_secs.as_ref())
        .map(|v| {
            ctx.nonzero(v, &key("health_check_timeout_secs"))
                .map(Duration::from_secs)
        })
        .transpose()?
        .unwrap_or(DEFAULT_HEALTH_CHECK_TIMEOUT);
    let handshake_timeout = (raw.handshake_timeout_secs.as_ref())
        .map(|v| {
            ctx.nonzero(v, &key("handshake_timeout_secs"))
                .map(Duration::from_secs)
        })
        .transpose()?
        .unwrap_or(DEFAULT_HANDSHAKE_TIMEOUT);
    let max_line_bytes = (raw.max_line_bytes.as_ref())
        .map(|v| ctx.nonzero(v, &key("max_line_bytes")))
        .transpose()?
        .unwrap_or(MIB_16);
    let auth = sc.upstream_auth(&raw)?;
    let exposed = |name: &str| match namespace.as_str() {
        "" => name.to_string(),
        ns => format!("{ns}{}{name}", gateway.separator),
    };
    let raw_shaping = RawShaping {
        tools: &raw.tools,
        prompts: &raw.prompts,
        resources: &raw.resources,
        rename: &raw.rename,
        descriptions: &raw.descriptions,
    };
    let shaping = sc.shaping(raw_shaping, (&exposed, gateway.name_budget()))?;
    Ok(ServerConfig {
        id: UpstreamId::new(&name),
        name,
        namespace,
        isolation,
        era,
        request_timeout,
        timeout_resets_on_progress,
        max_in_flight,
        health_check_interval,
        health_check_timeout,
        handshake_timeout,
        max_line_bytes,
        transport,
        auth,
        shaping: std::sync::Arc::new(shaping),
    })
}
