//! The `config` target: `Config::from_toml_str` on arbitrary UTF-8 returns a validated config
//! or an error that names where the problem is; it never panics or hangs.

use mcpmux::config::{Config, ConfigError, TransportConfig};

const SOURCE: &str = "fuzz.toml";

/// Variables whose name starts with A-M are set (to a value that itself looks like a reference,
/// which must not be expanded again); the others are unset.
fn env(name: &str) -> Option<String> {
    name.starts_with(|c: char| ('A'..='M').contains(&c))
        .then(|| format!("${{{name}}}$$v"))
}

pub fn check_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Config::from_toml_str(text, SOURCE, &env) {
        Ok(config) => check_valid(&config),
        Err(err) => {
            let message = err.to_string();
            assert!(
                message.starts_with(&format!("{SOURCE}:")),
                "an error must say where: {message:?}"
            );
            assert!(!matches!(err, ConfigError::Io { .. }));
        }
    }
}

/// What validation promises about an accepted config.
fn check_valid(config: &Config) {
    let gw = &config.gateway;
    assert!(gw.path.starts_with('/'), "{:?}", gw.path);
    assert!(gw.path == "/" || !gw.path.ends_with('/'), "{:?}", gw.path);
    assert!(!gw.separator.is_empty());
    assert!(gw.page_size >= 1 && gw.max_body_bytes >= 1);
    assert!(!gw.session_idle_timeout.is_zero() && !gw.request_timeout.is_zero());
    assert!(gw
        .allowed_hosts
        .iter()
        .chain(&gw.allowed_origins)
        .all(|h| !h.is_empty()));
    for (i, server) in config.servers.iter().enumerate() {
        assert!(!server.name.is_empty());
        let ns = &server.namespace;
        assert!(
            ns.is_empty()
                || (ns.len() <= 64 && ns.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))),
            "namespace {ns:?}"
        );
        let clash = config.servers[..i]
            .iter()
            .any(|s| !ns.is_empty() && s.namespace == *ns);
        assert!(!clash, "namespace {ns:?} used twice");
        assert!(server.max_line_bytes >= 1);
        assert!(server.request_timeout.is_none_or(|t| !t.is_zero()));
        match &server.transport {
            TransportConfig::Stdio {
                command, env, cwd, ..
            } => {
                assert!(!command.is_empty());
                assert!(env
                    .iter()
                    .all(|(k, v)| !k.is_empty() && !k.contains('=') && !v.expose().contains('\0')));
                assert!(cwd.as_ref().is_none_or(|d| !d.as_os_str().is_empty()));
            }
            TransportConfig::Http { url, headers, .. } => {
                let lower = url.to_ascii_lowercase();
                assert!(
                    lower.starts_with("http://") || lower.starts_with("https://"),
                    "{url:?}"
                );
                for (name, value) in headers {
                    assert!(!name.is_empty());
                    assert!(
                        !value.expose().chars().any(|c| c.is_control() && c != '\t'),
                        "{name}"
                    );
                }
            }
        }
    }
}
