//! The listeners' TLS: a rustls server configuration from the files of `[gateway] tls` (the
//! certificate chain and key; with `client_ca`, client certificates verified against it), ALPN
//! offering HTTP/2 and HTTP/1.1 (HTTP/1.1 only when HTTP/2 is off).

use super::files::{self, FileProblem, FileRole};
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;
use std::path::PathBuf;
use std::sync::Arc;

/// The files of `[gateway] tls`, absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Require (or, with [`ServerOptions::client_cert_optional`], ask for) a client
    /// certificate that chains to one of these CAs.
    pub client_ca: Option<PathBuf>,
}

impl ServerFiles {
    /// Every file, in the order they are read.
    pub fn paths(&self) -> impl Iterator<Item = &PathBuf> {
        [&self.cert, &self.key].into_iter().chain(self.client_ca.as_ref())
    }
}

/// How the listener uses its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerOptions {
    /// Offer HTTP/2 by ALPN (besides HTTP/1.1).
    pub http2: bool,
    /// With `client_ca`: a client without a certificate is admitted to the handshake (another
    /// credential, such as a bearer token, must then admit its requests). A certificate that
    /// is sent is verified all the same.
    pub client_cert_optional: bool,
}

/// The server configuration `files` describe, every file read and checked now.
pub fn server_config(files: &ServerFiles, options: ServerOptions) -> Result<ServerConfig, FileProblem> {
    let identity = files::identity(&files.cert, &files.key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|err| FileProblem::new(FileRole::Cert, &files.cert, format!("cannot be used: {err}")))?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let roots = files::roots(path, FileRole::ClientCa)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = match options.client_cert_optional {
                true => verifier.allow_unauthenticated(),
                false => verifier,
            };
            let verifier = verifier.build().map_err(|err| {
                FileProblem::new(
                    FileRole::ClientCa,
                    path,
                    format!("cannot verify client certificates: {err}"),
                )
            })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = (builder.with_single_cert(identity.chain, identity.key))
        .map_err(|err| files::unusable_key(&files.key, &err))?;
    config.alpn_protocols = match options.http2 {
        true => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        false => vec![b"http/1.1".to_vec()],
    };
    Ok(config)
}
