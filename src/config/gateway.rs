//! `[gateway]` as written, checked into a [`GatewayConfig`]: addresses, the endpoint path,
//! timeouts and limits with their bounds, the Host/Origin lists, readiness and the public URL.

use super::raw::RawGateway;
use super::spanned::Spanned;
use super::{auth, ConfigError, Ctx, GatewayConfig, ReadyWhen};
use std::net::SocketAddr;
use std::time::Duration;

pub(super) fn path_problem(path: &str) -> Option<&'static str> {
    if !path.starts_with('/') {
        Some("must start with '/'")
    } else if path.len() > 1 && path.ends_with('/') {
        Some("must not end with '/' (unless it is exactly \"/\")")
    } else if path
        .chars()
        .any(|c| matches!(c, '?' | '#') || c.is_whitespace() || c.is_control())
    {
        Some("must not contain '?', '#', whitespace or control characters")
    } else {
        None
    }
}

pub(super) fn build_gateway(ctx: &Ctx<'_>, raw: &RawGateway) -> Result<GatewayConfig, ConfigError> {
    let mut gw = GatewayConfig::default();
    let socket = |v: &Spanned<String>, key: &str, example: &str| -> Result<SocketAddr, ConfigError> {
        let s = ctx.expand(v, key)?;
        s.parse().map_err(|_| {
            ctx.invalid(
                &v.span(),
                format!("{key}: {s:?} is not a socket address (expected IP:port, e.g. \"127.0.0.1:{example}\" or \"[::1]:{example}\")"),
            )
        })
    };
    if let Some(v) = &raw.listen {
        gw.listen = socket(v, "gateway.listen", "8080")?;
    }
    if let Some(v) = &raw.admin_listen {
        gw.admin_listen = Some(socket(v, "gateway.admin_listen", "9090")?);
    }
    if let Some(v) = &raw.path {
        let s = ctx.expand(v, "gateway.path")?;
        if let Some(why) = path_problem(&s) {
            return Err(ctx.invalid(&v.span(), format!("gateway.path {s:?} {why}")));
        }
        gw.path = s;
    }
    if let Some(v) = &raw.separator {
        let s = ctx.expand(v, "gateway.separator")?;
        if s.is_empty() {
            return Err(ctx.invalid(&v.span(), "gateway.separator must not be empty"));
        }
        gw.separator = s;
    }
    names(ctx, raw, &mut gw)?;
    if let Some(v) = &raw.session_idle_timeout_secs {
        gw.session_idle_timeout = Duration::from_secs(ctx.nonzero(v, "gateway.session_idle_timeout_secs")?);
    }
    if let Some(v) = &raw.request_timeout_secs {
        gw.request_timeout = Duration::from_secs(ctx.nonzero(v, "gateway.request_timeout_secs")?);
    }
    if let Some(v) = &raw.max_request_timeout_secs {
        gw.max_request_timeout = Duration::from_secs(ctx.nonzero(v, "gateway.max_request_timeout_secs")?);
    }
    match &raw.request_timeout_secs {
        Some(v) if gw.request_timeout > gw.max_request_timeout => {
            let msg = "gateway.request_timeout_secs must not exceed gateway.max_request_timeout_secs";
            return Err(ctx.invalid(&v.span(), msg));
        }
        Some(_) => {}
        None => gw.request_timeout = gw.request_timeout.min(gw.max_request_timeout),
    }
    if let Some(v) = &raw.max_in_flight_per_session {
        gw.max_in_flight_per_session = ctx.nonzero(v, "gateway.max_in_flight_per_session")?;
    }
    if let Some(v) = &raw.drain_timeout_secs {
        gw.drain_timeout = Duration::from_secs(*v.get_ref());
    }
    if let Some(v) = &raw.shutdown_delay_secs {
        gw.shutdown_delay = Duration::from_secs(*v.get_ref());
    }
    if let Some(v) = &raw.page_size {
        gw.page_size = ctx.nonzero(v, "gateway.page_size")?;
    }
    if let Some(v) = &raw.max_body_bytes {
        gw.max_body_bytes = ctx.nonzero(v, "gateway.max_body_bytes")?;
    }
    let no_empty = |values: &[Spanned<String>], key: &str| -> Result<Vec<String>, ConfigError> {
        let out = ctx.expand_list(values, key)?;
        match out.iter().position(|s| s.is_empty()) {
            Some(i) => Err(ctx.invalid(&values[i].span(), format!("{key}[{i}] must not be empty"))),
            None => Ok(out),
        }
    };
    if let Some(values) = &raw.allowed_hosts {
        gw.allowed_hosts = no_empty(values, "gateway.allowed_hosts")?;
    }
    if let Some(values) = &raw.allowed_origins {
        gw.allowed_origins = no_empty(values, "gateway.allowed_origins")?;
    }
    if let Some(v) = &raw.ready_when {
        const RULES: [(&str, ReadyWhen); 3] = [
            ("all", ReadyWhen::All),
            ("any", ReadyWhen::Any),
            ("attempted", ReadyWhen::Attempted),
        ];
        let text = ctx.expand(v, "gateway.ready_when")?;
        gw.ready_when = match RULES.iter().find(|(name, _)| *name == text) {
            Some((_, rule)) => *rule,
            None => {
                let msg =
                    format!("gateway.ready_when {text:?} is not one of \"all\", \"any\", \"attempted\"");
                return Err(ctx.invalid(&v.span(), msg));
            }
        };
    }
    if let Some(v) = &raw.allow_unauthenticated {
        gw.allow_unauthenticated = *v.get_ref();
    }
    if let Some(v) = &raw.http2 {
        gw.http2 = *v.get_ref();
    }
    if let Some(tls) = &raw.tls {
        gw.tls = Some(super::tls::build_serve_tls(ctx, tls)?);
    }
    gw.public_url = auth::public_url(
        ctx,
        raw.public_url.as_ref(),
        gw.listen,
        &gw.path,
        gw.tls.is_some(),
    )?;
    Ok(gw)
}

/// `max_name_length` within its bounds, and a `name_reserve` that leaves a budget of at least
/// the smallest `max_name_length`.
fn names(ctx: &Ctx<'_>, raw: &RawGateway, gw: &mut GatewayConfig) -> Result<(), ConfigError> {
    let limits = super::MAX_NAME_LENGTH;
    if let Some(v) = &raw.max_name_length {
        let n = *v.get_ref();
        if !(limits.min..=limits.max).contains(&n) {
            let msg = format!(
                "gateway.max_name_length {n} must be between {} and {} (64 is the limit of the Claude, OpenAI and Gemini APIs)",
                limits.min, limits.max
            );
            return Err(ctx.invalid(&v.span(), msg));
        }
        gw.max_name_length = n;
    }
    if let Some(v) = &raw.name_reserve {
        let n = *v.get_ref();
        if gw.max_name_length.saturating_sub(n) < limits.min {
            let msg = format!(
                "gateway.name_reserve {n} leaves {} of gateway.max_name_length {} for names; at least {} must remain",
                gw.max_name_length.saturating_sub(n),
                gw.max_name_length,
                limits.min
            );
            return Err(ctx.invalid(&v.span(), msg));
        }
        gw.name_reserve = n;
    }
    Ok(())
}

/// What to do about `gateway.{key}` = `addr` when binding it failed with `error`: for an
/// address another program holds, say so and suggest `free` (a port free on the same address
/// just now), and name the default for a file without `[gateway]` (such as `mcpmux import`
/// writes); nothing for other errors. The text follows the error, after a colon.
pub fn bind_hint(addr: SocketAddr, key: &str, error: &std::io::Error, free: Option<u16>) -> String {
    if error.kind() != std::io::ErrorKind::AddrInUse {
        return String::new();
    }
    let default = GatewayConfig::default().listen;
    let whose = match (key, addr == default) {
        ("listen", true) => {
            format!(" ({default} is where mcpmux listens when the file sets no gateway.listen)")
        }
        _ => String::new(),
    };
    let suggestion = match free {
        Some(port) => format!(
            "; give it another port in the configuration file, e.g. [gateway] {key} = \"{}\" (free just now)",
            SocketAddr::new(addr.ip(), port)
        ),
        None => format!("; give it another port in the configuration file: [gateway] {key} = \"IP:PORT\""),
    };
    format!(": another program (or another mcpmux) holds that address{whose}{suggestion}")
}
