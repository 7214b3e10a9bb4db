//! Where a running gateway's operator endpoints are, read from its configuration file without
//! validating the rest of it: `mcpmux reload --config FILE` must reach the gateway even when the
//! file now holds a mistake (the gateway then answers with it). With `gateway.tls`, the
//! endpoint is HTTPS and the commands trust exactly the certificate in its `cert` file.

use super::include;
use super::interpolate::interpolate;
use super::sources::Sources;
use super::ConfigError;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// A running gateway's operator endpoints as its configuration file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorEndpoint {
    pub addr: SocketAddr,
    /// With `gateway.tls`: its `cert` file (absolute), the one certificate to trust.
    pub pinned_cert: Option<PathBuf>,
}

impl OperatorEndpoint {
    /// `http://ADDR`, or `https://ADDR` with TLS.
    pub fn base(&self) -> String {
        match self.pinned_cert {
            Some(_) => format!("https://{}", self.addr),
            None => format!("http://{}", self.addr),
        }
    }
}

/// `gateway.admin_listen` when set, else `gateway.listen` (default 127.0.0.1:8080), of the
/// file at `path` and its includes (a wildcard address is reached on loopback), and
/// `gateway.tls.cert` when set.
pub fn operator_address(path: &Path) -> Result<OperatorEndpoint, ConfigError> {
    let mut sources = Sources::default();
    // An included file that does not read is not this command's business.
    let tree = include::read(path, &mut sources, &mut Vec::new(), &mut Vec::new())?;
    let gateway = tree.root.get("gateway").and_then(|g| g.as_table_like());
    let value = ["admin_listen", "listen"]
        .iter()
        .find_map(|key| Some((*key, gateway?.get(key)?)));
    let pinned_cert = (gateway.and_then(|g| g.get("tls")))
        .and_then(|tls| tls.as_table_like()?.get("cert"))
        .map(|item| {
            let (text, _) = expanded(&sources, item, "tls.cert")?;
            Ok::<_, ConfigError>(match item.span().and_then(|s| sources.dir_at(s.start)) {
                Some(dir) => super::paths::join(dir, Path::new(&text)),
                None => PathBuf::from(text),
            })
        })
        .transpose()?;
    let mut addr = match value {
        None => SocketAddr::from(([127, 0, 0, 1], 8080)),
        Some((key, item)) => {
            let (text, at) = expanded(&sources, item, key)?;
            text.parse().map_err(|_| ConfigError::Invalid {
                message: format!("{at}: gateway.{key}: {text:?} is not a socket address"),
            })?
        }
    };
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    Ok(OperatorEndpoint { addr, pinned_cert })
}

/// The string `gateway.{key}` holds at `item`, its `${VAR}`s expanded from the environment, and
/// where it was written (`FILE:LINE`, which an error names).
fn expanded(sources: &Sources, item: &toml_edit::Item, key: &str) -> Result<(String, String), ConfigError> {
    let at = item
        .span()
        .map_or_else(|| sources.main().to_string(), |s| sources.at(s.start));
    let bad = |why: String| ConfigError::Invalid {
        message: format!("{at}: gateway.{key}: {why}"),
    };
    let text = item.as_str().ok_or_else(|| bad("not a string".into()))?;
    let text = interpolate(text, &|var| std::env::var(var).ok()).map_err(|e| match e {
        super::interpolate::InterpError::Missing(var) => {
            bad(format!("environment variable {var:?} is not set"))
        }
        super::interpolate::InterpError::Syntax(why) => bad(why),
    })?;
    Ok((text, at))
}
