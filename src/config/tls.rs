//! `[gateway] tls`: the listeners' certificate chain, key and, for mutual TLS, the CAs client
//! certificates must chain to. Paths follow the file that wrote them; the files themselves are
//! read by the checks on the machine (`preflight`) and by `serve`, which refuses to start
//! without them.

use super::spanned::Spanned;
use super::{ConfigError, Ctx};
use crate::tls::ServerFiles;
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// `[gateway] tls = { cert, key, client_ca }`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServeTls {
    /// PEM certificate chain, the server's certificate first (relative to this file). Re-read
    /// when the file changes.
    pub(super) cert: Spanned<String>,
    /// PEM private key of that certificate (PKCS#8, PKCS#1 or SEC1).
    pub(super) key: Spanned<String>,
    /// PEM CA certificates; a client must present a certificate one of them issued (mutual
    /// TLS), and its subject becomes the principal `cert:<CN>`. With [auth], a certificate is
    /// optional: either credential admits.
    pub(super) client_ca: Option<Spanned<String>>,
}

impl RawServeTls {
    /// Each key with where it was written.
    pub(super) fn keys(&self) -> impl Iterator<Item = (&'static str, &Spanned<String>)> {
        [("cert", &self.cert), ("key", &self.key)]
            .into_iter()
            .chain(self.client_ca.as_ref().map(|v| ("client_ca", v)))
    }
}

pub(super) fn build_serve_tls(ctx: &Ctx<'_>, raw: &RawServeTls) -> Result<ServerFiles, ConfigError> {
    let client_ca = match &raw.client_ca {
        Some(v) => Some(file(ctx, v, "gateway.tls.client_ca")?),
        None => None,
    };
    Ok(ServerFiles {
        cert: file(ctx, &raw.cert, "gateway.tls.cert")?,
        key: file(ctx, &raw.key, "gateway.tls.key")?,
        client_ca,
    })
}

/// A file's path: not empty, relative to the file that wrote it.
fn file(ctx: &Ctx<'_>, v: &Spanned<String>, key: &str) -> Result<PathBuf, ConfigError> {
    let path = ctx.expand(v, key)?;
    if path.trim().is_empty() {
        return Err(ctx.invalid(&v.span(), format!("{key} must name a file")));
    }
    Ok(match ctx.sources.dir_at(v.span().start) {
        Some(dir) => super::paths::join(dir, Path::new(&path)),
        None => PathBuf::from(path),
    })
}

/// `[servers.NAME] tls = { ca, cert, key, server_name }`. Unknown keys are refused here (not by
/// serde), so one that looks like a switch to skip verification gets its own answer.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(super) struct RawUpstreamTls {
    /// PEM CA certificates to trust for this server, besides the bundled and system roots
    /// (relative to this file).
    pub(super) ca: Option<Spanned<String>>,
    /// PEM client certificate chain to present (mutual TLS), with `key`.
    pub(super) cert: Option<Spanned<String>>,
    /// PEM private key of `cert`.
    pub(super) key: Option<Spanned<String>>,
    /// The name the server's certificate must carry (and SNI), when it differs from the URL's
    /// host.
    pub(super) server_name: Option<Spanned<String>>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub(super) unknown: std::collections::BTreeMap<String, toml::Value>,
}

impl RawUpstreamTls {
    /// Each file key with where it was written.
    pub(super) fn keys(&self) -> impl Iterator<Item = (&'static str, &Spanned<String>)> {
        [("ca", &self.ca), ("cert", &self.cert), ("key", &self.key)]
            .into_iter()
            .filter_map(|(key, v)| Some((key, v.as_ref()?)))
    }
}

/// Whether a key reads like a switch that turns certificate verification off.
fn skips_verification(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        "verif",
        "insecure",
        "invalid",
        "skip",
        "danger",
        "trust_all",
        "accept_any",
        "no_check",
    ]
    .iter()
    .any(|word| key.contains(word))
}

/// `servers.NAME.tls` of the server at `url`, checked: only for an https:// URL, `cert` and
/// `key` together, a `server_name` that is a DNS name or an IP address, no unknown key (and a
/// clear answer to one that would skip verification: there is none).
pub(super) fn build_upstream_tls(
    ctx: &Ctx<'_>,
    raw: &RawUpstreamTls,
    server: &str,
    url: &str,
    at: &std::ops::Range<usize>,
) -> Result<crate::tls::client::ClientFiles, ConfigError> {
    let key = |k: &str| format!("servers.{server}.tls.{k}");
    if let Some(unknown) = raw.unknown.keys().next() {
        let msg = match skips_verification(unknown) {
            true => format!(
                "{}: mcpmux has no switch to skip certificate verification; trust the server's CA \
                 with `ca = \"ca.pem\"`, or name the host its certificate is for with `server_name`",
                key(unknown)
            ),
            false => format!(
                "{}: unknown key; expected one of `ca`, `cert`, `key`, `server_name`",
                key(unknown)
            ),
        };
        return Err(ctx.invalid(at, msg));
    }
    if !url.to_ascii_lowercase().starts_with("https://") {
        return Err(ctx.invalid(
            at,
            format!("servers.{server}.tls is for an https:// url; {url:?} is not one"),
        ));
    }
    let file = |v: &Option<Spanned<String>>, k: &str| v.as_ref().map(|v| file(ctx, v, &key(k))).transpose();
    let files = crate::tls::client::ClientFiles {
        ca: file(&raw.ca, "ca")?,
        cert: file(&raw.cert, "cert")?,
        key: file(&raw.key, "key")?,
        server_name: match &raw.server_name {
            None => None,
            Some(v) => {
                let name = ctx.expand(v, &key("server_name"))?;
                if rustls::pki_types::ServerName::try_from(name.as_str()).is_err() {
                    let msg = format!(
                        "{} {name:?} is not a DNS name or an IP address",
                        key("server_name")
                    );
                    return Err(ctx.invalid(&v.span(), msg));
                }
                Some(name)
            }
        },
    };
    match (&raw.cert, &raw.key) {
        (Some(v), None) => Err(ctx.invalid(
            &v.span(),
            format!("{} needs {} beside it", key("cert"), key("key")),
        )),
        (None, Some(v)) => Err(ctx.invalid(
            &v.span(),
            format!("{} needs {} beside it", key("key"), key("cert")),
        )),
        _ => Ok(files),
    }
}
