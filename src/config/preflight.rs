//! Checks of a valid configuration against the machine it is about to run on: commands that
//! are not there, working directories that do not exist, nothing to serve, an endpoint open to
//! the network. `mcpmux check-config` prints them (errors fail it); `serve` logs them.

use super::command_lookup::find_command;
use super::{Config, TransportConfig, UpstreamAuth};
use crate::util::platform::Platform;
use std::ffi::OsString;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The gateway would run, but a server cannot start (or there is nothing to serve).
    Error,
    /// It works, but probably not as meant.
    Warning,
}

/// One thing found; the message names the config key it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub severity: Severity,
    pub message: String,
    /// The dotted key it is about (`servers.NAME.command`), when it is about one.
    pub key: Option<String>,
    /// `file:line` of that key (see `Loaded::preflight`), once known.
    pub at: Option<String>,
}

impl Finding {
    fn new(severity: Severity, key: Option<&str>, message: String) -> Finding {
        Finding {
            severity,
            message,
            key: key.map(str::to_string),
            at: None,
        }
    }

    /// The message after its `file:line` when it has one (for a log line, whose level says
    /// the severity).
    pub fn located(&self) -> String {
        match &self.at {
            Some(at) => format!("{at}: {}", self.message),
            None => self.message.clone(),
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let label = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        match &self.at {
            Some(at) => write!(f, "{at}: {label}: {}", self.message),
            None => write!(f, "{label}: {}", self.message),
        }
    }
}

impl Config {
    /// What would go wrong running this configuration here. `path` is the `PATH` a command
    /// without a slash is looked up in (the server's own `env.PATH` wins); `workdir` is the
    /// directory a server without `cwd` starts in.
    pub fn preflight(&self, path: Option<OsString>, workdir: &Path) -> Vec<Finding> {
        let mut found = Vec::new();
        let mut error = |key: &str, message: String| {
            found.push(Finding::new(
                Severity::Error,
                Some(key),
                format!("{key}: {message}"),
            ))
        };
        for server in &self.servers {
            let TransportConfig::Stdio {
                command, env, cwd, ..
            } = &server.transport
            else {
                continue;
            };
            let key = format!("servers.{}", server.name);
            let dir = match cwd {
                Some(dir) => workdir.join(dir),
                None => workdir.to_path_buf(),
            };
            if !dir.is_dir() {
                let what = if dir.exists() {
                    "is not a directory"
                } else {
                    "does not exist"
                };
                error(
                    &format!("{key}.cwd"),
                    format!("the working directory {} {what}", dir.display()),
                );
                continue;
            }
            let own_path = env
                .iter()
                .find(|(k, _)| Platform::HERE.same_variable(k, "PATH"))
                .map(|(_, v)| v.expose().into());
            if let Err(why) = find_command(command, own_path.or(path.clone()), &dir) {
                error(&format!("{key}.command"), why);
            }
        }
        if let Some(why) = self.audit_path_problem(workdir) {
            error("audit.path", why);
        }
        if let Some(problem) = self.tls_problem() {
            error(
                &format!("gateway.tls.{}", problem.role.key()),
                problem.to_string(),
            );
        }
        for server in &self.servers {
            let TransportConfig::Http { tls: Some(files), .. } = &server.transport else {
                continue;
            };
            if let Err(problem) = crate::tls::client::client_config(Some(files)) {
                let key = format!("servers.{}.tls.{}", server.name, problem.role.key());
                error(&key, problem.to_string());
            }
        }
        for server in &self.disabled {
            if let Some(waiting) = &server.waiting {
                let key = format!("servers.{}", server.name);
                found.push(Finding::new(
                    Severity::Warning,
                    Some(&format!("{key}.needs_env")),
                    format!("{key} is {waiting}"),
                ));
            }
            if let Some(problem) = &server.problem {
                let key = format!("servers.{}", server.name);
                found.push(Finding::new(
                    Severity::Warning,
                    Some(&key),
                    format!("{key} has enabled = false, and as written it could not start once enabled: {problem}"),
                ));
            }
        }
        for server in (self.servers.iter()).filter(|s| s.auth == UpstreamAuth::Forward) {
            let key = format!("servers.{}.auth", server.name);
            found.push(Finding::new(
                Severity::Warning,
                Some(&key),
                format!(
                    "{key}: mode = \"forward\" sends the host's own bearer token upstream: token \
                     passthrough, which the MCP security best practices forbid; use token_exchange"
                ),
            ));
        }
        if self.servers.is_empty() {
            let message = match self.disabled.len() {
                0 => "no [servers.NAME] table: the gateway would serve an empty catalog",
                _ => "every server has enabled = false: the gateway would serve an empty catalog",
            };
            found.push(Finding::new(Severity::Warning, None, message.into()));
        }
        let listen = self.gateway.listen;
        if self.auth.is_none() && !self.gateway.client_certificates() && !listen.ip().is_loopback() {
            // Only reachable with gateway.allow_unauthenticated = true (else the config is refused).
            found.push(Finding::new(
                Severity::Warning,
                Some("gateway.listen"),
                format!(
                    "gateway.listen {listen} accepts connections from other machines and there is no \
                     [auth] table (gateway.allow_unauthenticated = true): anyone who can reach it can \
                     call every tool of every server unless an authenticating proxy is in front"
                ),
            ));
        }
        if let Some(admin) = self.gateway.admin_listen {
            found.extend(admin_findings(admin, listen));
        }
        if let Some(why) = self.advertise_problem() {
            found.push(Finding::new(Severity::Warning, Some("cluster.advertise"), why));
        }
        found
    }

    /// Why the listeners could not serve TLS with the files of `gateway.tls` (the first file
    /// that cannot be used, and why), as `serve` would find it.
    fn tls_problem(&self) -> Option<crate::tls::FileProblem> {
        let files = self.gateway.tls.as_ref()?;
        crate::tls::server::server_config(files, self.listener_tls_options()).err()
    }

    /// How the main listener uses `gateway.tls`: HTTP/2 by ALPN unless `http2 = false`; with
    /// `[auth]` beside `client_ca`, a client certificate is one credential of two, so optional.
    pub fn listener_tls_options(&self) -> crate::tls::ServerOptions {
        crate::tls::ServerOptions {
            http2: self.gateway.http2,
            client_cert_optional: self.auth.is_some(),
        }
    }

    /// Why the other replicas could not reach this one at `cluster.advertise`: a wildcard
    /// address (the default from a `listen` of 0.0.0.0 or [::]).
    fn advertise_problem(&self) -> Option<String> {
        let advertise = &self.cluster.as_ref()?.advertise;
        let url = url::Url::parse(advertise).ok()?;
        let unspecified = match url.host()? {
            url::Host::Ipv4(ip) => ip.is_unspecified(),
            url::Host::Ipv6(ip) => ip.is_unspecified(),
            url::Host::Domain(_) => false,
        };
        unspecified.then(|| {
            format!(
                "cluster.advertise {advertise} is a wildcard address the other replicas cannot reach: \
                 set cluster.advertise to this replica's own address (e.g. \"http://${{POD_IP}}:8080\")"
            )
        })
    }
}

/// `gateway.admin_listen` against `listen` (one port cannot take both) and the network (the
/// operator endpoints are not behind `[auth]`).
fn admin_findings(admin: SocketAddr, listen: SocketAddr) -> Vec<Finding> {
    let mut found = Vec::new();
    let overlap = |a: IpAddr, b: IpAddr| a == b || a.is_unspecified() || b.is_unspecified();
    if admin.port() != 0 && admin.port() == listen.port() && overlap(admin.ip(), listen.ip()) {
        found.push(Finding::new(
            Severity::Error,
            Some("gateway.admin_listen"),
            format!(
                "gateway.admin_listen {admin} and gateway.listen {listen} bind the same port: \
                 give the operator endpoints a port of their own"
            ),
        ));
    }
    if !admin.ip().is_loopback() {
        found.push(Finding::new(
            Severity::Warning,
            Some("gateway.admin_listen"),
            format!(
                "gateway.admin_listen {admin} accepts connections from other machines: /status, \
                 /healthz, /readyz, /metrics and /admin are not behind [auth], so bind it to an \
                 address only your probes, monitoring and operators reach (a private network, a \
                 pod's own port)"
            ),
        ));
    }
    found
}

impl Config {
    /// Why the audit log's file could not be opened here (`serve` would refuse to start).
    fn audit_path_problem(&self, workdir: &Path) -> Option<String> {
        let Some(super::AuditConfig {
            sink: super::AuditSink::File(path),
            ..
        }) = &self.audit
        else {
            return None;
        };
        let path = workdir.join(path);
        if path.is_dir() {
            return Some(format!("{} is a directory", path.display()));
        }
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty())?;
        (!dir.is_dir()).then(|| format!("the directory {} of the audit log does not exist", dir.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::from_toml_str(text, "t.toml", &|_| None).expect("a valid config")
    }

    fn messages(found: &[Finding]) -> Vec<String> {
        found.iter().map(|f| f.to_string()).collect()
    }

    fn system_path() -> Option<OsString> {
        Some("/usr/local/bin:/usr/bin:/bin".into())
    }

    #[test]
    fn a_sound_local_config_has_no_findings() {
        let c = config("[servers.a]\ncommand = \"sh\"\n[servers.b]\nurl = \"http://127.0.0.1:1/mcp\"\n");
        assert_eq!(c.preflight(system_path(), Path::new("/")), vec![]);
    }

    #[test]
    fn a_command_not_on_path_is_an_error_naming_the_key() {
        let c = config("[servers.a]\ncommand = \"mcpmux-surely-not-installed\"\n");
        let found = messages(&c.preflight(system_path(), Path::new("/")));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0]
                .starts_with("error: servers.a.command: `mcpmux-surely-not-installed` is not found on PATH"),
            "{found:?}"
        );
        // The server's own PATH is the one its command is looked up in.
        let own = config("[servers.a]\ncommand = \"sh\"\nenv = { PATH = \"/nowhere\" }\n");
        assert_eq!(own.preflight(system_path(), Path::new("/")).len(), 1);
        let missing = config("[servers.a]\ncommand = \"./bin/server\"\n");
        let found = messages(&missing.preflight(system_path(), Path::new("/")));
        assert!(found[0].contains("`./bin/server` does not exist"), "{found:?}");
    }

    #[test]
    fn a_missing_cwd_is_an_error_and_not_a_missing_command() {
        let c = config("[servers.a]\ncommand = \"sh\"\ncwd = \"/mcpmux/no/such/dir\"\n");
        let found = messages(&c.preflight(system_path(), Path::new("/")));
        assert_eq!(
            found,
            ["error: servers.a.cwd: the working directory /mcpmux/no/such/dir does not exist"]
        );
        let relative = config("[servers.a]\ncommand = \"sh\"\ncwd = \"sub\"\n");
        let found = messages(&relative.preflight(system_path(), Path::new("/mcpmux-base")));
        assert!(found[0].contains("/mcpmux-base/sub does not exist"), "{found:?}");
    }

    #[test]
    fn enforced_policy_settings_are_no_finding() {
        let keys = "\n[auth]\n[[auth.api_keys]]\nname = \"k\"\nkey = \"s\"\n[servers.a]\ncommand = \"sh\"\n";
        let c = config(&format!(
            "[[policy]]\nallow = [\"*\"]\naudit_arguments = true\nrate_limit = \"5/sec\"\n{keys}[audit]\npath = \"-\"\n"
        ));
        assert_eq!(
            messages(&c.preflight(system_path(), Path::new("/"))),
            Vec::<String>::new()
        );
    }

    #[test]
    fn an_admin_listener_on_the_main_port_is_an_error_and_on_the_network_a_warning() {
        let with = |admin: &str, listen: &str| {
            let c = config(&format!(
                "[gateway]\nlisten = \"{listen}\"\nadmin_listen = \"{admin}\"\nallow_unauthenticated = true\n\
                 [servers.a]\ncommand = \"sh\"\n"
            ));
            messages(&c.preflight(system_path(), Path::new("/")))
        };
        let same = with("127.0.0.1:8080", "127.0.0.1:8080");
        assert_eq!(same.len(), 1, "{same:?}");
        assert!(
            same[0].starts_with(
                "error: gateway.admin_listen 127.0.0.1:8080 and gateway.listen 127.0.0.1:8080 bind the same port"
            ),
            "{same:?}"
        );
        // A wildcard address takes the port on every address.
        let wildcard = with("127.0.0.1:8080", "0.0.0.0:8080");
        assert!(
            wildcard.iter().any(|f| f.contains("bind the same port")),
            "{wildcard:?}"
        );
        // Another port, another loopback address, or port 0 (the system picks): no conflict.
        for (admin, listen) in [
            ("127.0.0.1:9090", "127.0.0.1:8080"),
            ("127.0.0.2:8080", "127.0.0.1:8080"),
            ("127.0.0.1:0", "127.0.0.1:0"),
        ] {
            assert_eq!(with(admin, listen), Vec::<String>::new(), "{admin} {listen}");
        }
        let network = with("0.0.0.0:9090", "127.0.0.1:8080");
        assert_eq!(network.len(), 1, "{network:?}");
        assert!(
            network[0].starts_with(
                "warning: gateway.admin_listen 0.0.0.0:9090 accepts connections from other machines"
            ),
            "{network:?}"
        );
    }

    #[test]
    fn an_audit_log_that_cannot_be_opened_is_an_error() {
        let audit = |path: &str| config(&format!("[audit]\npath = {path:?}\n"));
        let found =
            messages(&audit("/mcpmux/no/such/dir/audit.jsonl").preflight(system_path(), Path::new("/")));
        assert_eq!(
            found[0],
            "error: audit.path: the directory /mcpmux/no/such/dir of the audit log does not exist"
        );
        let found = messages(&audit("tmp").preflight(system_path(), Path::new("/")));
        assert_eq!(found[0], "error: audit.path: /tmp is a directory");
        for fine in ["-", "audit.jsonl", "/tmp/audit.jsonl"] {
            let found = messages(&audit(fine).preflight(system_path(), Path::new("/tmp")));
            assert!(!found.iter().any(|f| f.contains("audit")), "{fine}: {found:?}");
        }
    }

    #[test]
    fn no_servers_and_a_network_listen_address_are_warnings() {
        let c = config("[gateway]\nlisten = \"0.0.0.0:8080\"\nallow_unauthenticated = true\n");
        let found = c.preflight(system_path(), Path::new("/"));
        assert!(found.iter().all(|f| f.severity == Severity::Warning), "{found:?}");
        let text = messages(&found).join("\n");
        assert!(text.contains("no [servers.NAME] table"), "{text}");
        assert!(
            text.contains("gateway.listen 0.0.0.0:8080 accepts connections from other machines"),
            "{text}"
        );
    }

    #[test]
    fn a_wildcard_advertise_address_is_a_warning() {
        const KEY: &str = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
        let with = |extra: &str| {
            let c = config(&format!(
                "[gateway]\nlisten = \"0.0.0.0:8080\"\nallow_unauthenticated = true\n\
                 [cluster]\nkey = \"{KEY}\"\n{extra}"
            ));
            let found = messages(&c.preflight(system_path(), Path::new("/")));
            found
                .into_iter()
                .filter(|f| f.contains("cluster.advertise"))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            with(""),
            vec![
                "warning: cluster.advertise http://0.0.0.0:8080 is a wildcard address the other replicas \
                 cannot reach: set cluster.advertise to this replica's own address (e.g. \"http://${POD_IP}:8080\")"
            ]
        );
        assert_eq!(with("advertise = \"http://[::]:8080\"\n").len(), 1);
        assert!(with("advertise = \"http://10.1.2.3:8080\"\n").is_empty());
        assert!(with("advertise = \"http://mcpmux-0.mcpmux:8080\"\n").is_empty());
    }
}

#[cfg(test)]
mod forward_tests {
    use super::*;

    #[test]
    fn a_forward_upstream_is_warned_about_and_token_exchange_is_not() {
        let text = "[auth]\n[[auth.api_keys]]\nname = \"k\"\nkey = \"s\"\n\
                    [servers.legacy]\nurl = \"http://127.0.0.1:1/mcp\"\nauth = { mode = \"forward\" }\n\
                    [servers.jira]\nurl = \"http://127.0.0.1:1/mcp\"\n\
                    auth = { mode = \"token_exchange\", token_endpoint = \"https://idp/t\", client_id = \"c\", audience = \"a\" }\n";
        let config = Config::from_toml_str(text, "t.toml", &|_| None).expect("a valid config");
        let found: Vec<String> = (config.preflight(None, Path::new("/")).iter())
            .map(|f| f.to_string())
            .collect();
        assert_eq!(
            found,
            ["warning: servers.legacy.auth: mode = \"forward\" sends the host's own bearer token upstream: \
              token passthrough, which the MCP security best practices forbid; use token_exchange"]
        );
    }
}
