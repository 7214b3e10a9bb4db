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
