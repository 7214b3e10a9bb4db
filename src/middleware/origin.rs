//! DNS-rebinding defence: which `Host` and `Origin` headers the endpoint accepts.

use crate::config::GatewayConfig;
use crate::error::DownstreamError;
use http::HeaderMap;

/// The Host/Origin rules derived from the configuration.
#[derive(Debug, Clone)]
pub struct AccessPolicy {
    /// Bound to a loopback address: only loopback host names are accepted.
    loopback_only: bool,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
}

fn is_loopback_name(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Split `host[:port]` (with IPv6 brackets) into the host name.
/// `text` in ASCII lower case, copied only when it has an upper-case letter (most do not).
fn lowercase(text: &str) -> std::borrow::Cow<'_, str> {
    match text.bytes().any(|b| b.is_ascii_uppercase()) {
        true => std::borrow::Cow::Owned(text.to_ascii_lowercase()),
        false => std::borrow::Cow::Borrowed(text),
    }
}

fn host_name(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    authority.rsplit_once(':').map_or(authority, |(h, port)| {
        if port.chars().all(|c| c.is_ascii_digit()) {
            h
        } else {
            authority
        }
    })
}

impl AccessPolicy {
    pub fn from_config(gateway: &GatewayConfig) -> Self {
        AccessPolicy {
            loopback_only: gateway.listen.ip().is_loopback(),
            allowed_hosts: gateway
                .allowed_hosts
                .iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
            allowed_origins: gateway
                .allowed_origins
                .iter()
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
        }
    }

    /// The rules of the operator listener `gateway.admin_listen` at `addr`: loopback host names
    /// only when it is bound to loopback, any other host name when it is not (probes and
    /// scrapers name the pod or node address, not the MCP endpoint's `allowed_hosts`); Origins
    /// as on the endpoint.
    pub fn for_admin(gateway: &GatewayConfig, addr: std::net::SocketAddr) -> Self {
        AccessPolicy {
            loopback_only: addr.ip().is_loopback(),
            allowed_hosts: Vec::new(),
            ..AccessPolicy::from_config(gateway)
        }
    }

    /// Accept or refuse a request by its `Host` and `Origin` headers (403 when refused).
    pub fn check(&self, headers: &HeaderMap) -> Result<(), DownstreamError> {
        if let Some(host) = headers.get(http::header::HOST) {
            let host = host
                .to_str()
                .map_err(|_| DownstreamError::Forbidden("invalid Host header"))?;
            if !self.host_allowed(&lowercase(host)) {
                return Err(DownstreamError::Forbidden(
                    "Host not allowed; to admit it, list it in gateway.allowed_hosts",
                ));
            }
        }
        if let Some(origin) = headers.get(http::header::ORIGIN) {
            let origin = origin
                .to_str()
                .map_err(|_| DownstreamError::Forbidden("invalid Origin header"))?;
            if !self.origin_allowed(&lowercase(origin.trim_end_matches('/'))) {
                return Err(DownstreamError::Forbidden(
                    "Origin not allowed; to admit it, list it in gateway.allowed_origins",
                ));
            }
        }
        Ok(())
    }

    fn host_allowed(&self, authority: &str) -> bool {
        let name = host_name(authority);
        if !self.allowed_hosts.is_empty() {
            return self
                .allowed_hosts
                .iter()
                .any(|h| h == "*" || h == authority || h == name);
        }
        !self.loopback_only || is_loopback_name(name)
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        if self.allowed_origins.iter().any(|o| o == "*" || o == origin) {
            return true;
        }
        let Some((scheme, authority)) = origin.split_once("://") else {
            return false;
        };
        matches!(scheme, "http" | "https") && is_loopback_name(host_name(authority))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    fn policy(listen: &str, hosts: &[&str], origins: &[&str]) -> AccessPolicy {
        let gateway = GatewayConfig {
            listen: listen.parse().unwrap(),
            allowed_hosts: hosts.iter().map(|s| s.to_string()).collect(),
            allowed_origins: origins.iter().map(|s| s.to_string()).collect(),
            ..GatewayConfig::default()
        };
        AccessPolicy::from_config(&gateway)
    }

    #[test]
    fn loopback_binding_refuses_foreign_hosts_and_origins() {
        let p = policy("127.0.0.1:8080", &[], &[]);
        assert!(p.check(&headers(&[("host", "localhost:8080")])).is_ok());
        assert!(p
            .check(&headers(&[
                ("host", "127.0.0.1:8080"),
                ("origin", "http://localhost:6274")
            ]))
            .is_ok());
        assert!(p.check(&headers(&[("host", "[::1]:8080")])).is_ok());
        assert!(p.check(&headers(&[("host", "evil.example.com")])).is_err());
        assert!(p
            .check(&headers(&[
                ("host", "localhost"),
                ("origin", "http://evil.example.com")
            ]))
            .is_err());
        assert!(p
            .check(&headers(&[("host", "localhost"), ("origin", "null")]))
            .is_err());
    }

    #[test]
    fn configured_lists_open_the_gate() {
        let p = policy("0.0.0.0:8080", &["mcp.example.com"], &["https://app.example.com"]);
        assert!(p.check(&headers(&[("host", "mcp.example.com:8080")])).is_ok());
        assert!(p.check(&headers(&[("host", "other.example.com")])).is_err());
        assert!(p
            .check(&headers(&[
                ("host", "mcp.example.com"),
                ("origin", "https://app.example.com")
            ]))
            .is_ok());
        assert!(p
            .check(&headers(&[
                ("host", "mcp.example.com"),
                ("origin", "https://evil.example.com")
            ]))
            .is_err());
        let open = policy("0.0.0.0:8080", &[], &[]);
        assert!(open.check(&headers(&[("host", "anything.internal")])).is_ok());
    }
}
