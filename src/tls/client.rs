//! TLS toward upstream servers: the roots every connection trusts (the bundled Mozilla roots
//! and the system's store: `SSL_CERT_FILE`, `SSL_CERT_DIR`, else the platform's), plus a server's
//! own `ca`; its client certificate (`cert`, `key`) for mutual TLS; and `server_name`, the name
//! its certificate is verified against (and asked for by SNI) when it differs from the URL's
//! host. There is no way to skip verification.

use super::files::{self, FileProblem, FileRole};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// `[servers.NAME] tls`, its paths absolute.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientFiles {
    /// CA certificates trusted for this server, besides the common roots.
    pub ca: Option<PathBuf>,
    /// A client certificate chain to present, with `key`.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// The name the server's certificate must carry (and SNI), instead of the URL's host.
    pub server_name: Option<String>,
}

/// The bundled Mozilla roots and the system's, read once.
fn common_roots() -> &'static RootCertStore {
    static ROOTS: OnceLock<RootCertStore> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let mut roots = RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let system = rustls_native_certs::load_native_certs();
        for err in &system.errors {
            tracing::debug!(%err, "a certificate of the system's trust store could not be read");
        }
        let (added, ignored) = roots.add_parsable_certificates(system.certs);
        tracing::debug!(
            added,
            ignored,
            "the system's trust store is trusted toward upstreams"
        );
        roots
    })
}

/// The client configuration toward an upstream with `files` (or the common one without).
pub fn client_config(files: Option<&ClientFiles>) -> Result<ClientConfig, FileProblem> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = common_roots().clone();
    if let Some(path) = files.and_then(|f| f.ca.as_ref()) {
        roots.roots.extend(files::roots(path, FileRole::Ca)?.roots);
    }
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|err| problem_without_file(err.to_string()))?;
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|err| problem_without_file(err.to_string()))?;
    let name = match files.and_then(|f| f.server_name.as_deref()) {
        Some(name) => Some(ServerName::try_from(name.to_string()).map_err(|_| {
            problem_without_file(format!("server_name {name:?} is not a DNS name or IP address"))
        })?),
        None => None,
    };
    let ca = files
        .and_then(|f| f.ca.as_ref())
        .map(|path| path.display().to_string());
    let builder = match (name, ca) {
        (None, None) => builder.with_webpki_verifier(verifier),
        (name, ca) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Verifier {
                inner: verifier,
                name,
                ca,
            })),
    };
    match files.map(|f| (&f.cert, &f.key)) {
        Some((Some(cert), Some(key))) => {
            let identity = files::identity(cert, key)?;
            builder
                .with_client_auth_cert(identity.chain, identity.key)
                .map_err(|err| files::unusable_key(key, &err))
        }
        _ => Ok(builder.with_no_client_auth()),
    }
}

fn problem_without_file(reason: String) -> FileProblem {
    FileProblem::new(FileRole::Ca, std::path::Path::new("(tls)"), reason)
}

/// The client configuration one replica forwards to another with: the common roots (with a
/// private CA, give it through `SSL_CERT_FILE` or the system's store), and, when the replicas
/// require client certificates (`gateway.tls.client_ca`), this replica's own certificate.
pub fn replica_client_config(tls: Option<&super::ServerFiles>) -> Result<ClientConfig, FileProblem> {
    let files = tls
        .filter(|files| files.client_ca.is_some())
        .map(|files| ClientFiles {
            cert: Some(files.cert.clone()),
            key: Some(files.key.clone()),
            ..ClientFiles::default()
        });
    client_config(files.as_ref())
}

/// The name `server_name` configures, for the SNI of the connections that can set it.
pub fn sni_name(files: &ClientFiles) -> Option<ServerName<'static>> {
    ServerName::try_from(files.server_name.clone()?).ok()
}

/// Web PKI verification, against a configured name instead of the URL's host when there is
/// one, and with an unknown issuer named against the server's own `ca` file when it has one.
#[derive(Debug)]
struct Verifier {
    inner: Arc<WebPkiServerVerifier>,
    name: Option<ServerName<'static>>,
    ca: Option<String>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let name = self.name.as_ref().unwrap_or(server_name);
        let verified = (self.inner).verify_server_cert(end_entity, intermediates, name, ocsp_response, now);
        match (verified, &self.ca) {
            (Err(rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer)), Some(ca)) => {
                Err(rustls::Error::General(format!(
                    "the server's certificate is not issued by the CA in {ca} nor by the bundled or the system's roots (unknown issuer)"
                )))
            }
            (verified, _) => verified,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// What a TLS failure somewhere in `err`'s chain means for an upstream, in words a person can
/// act on (unknown issuer, expired, name mismatch, a client certificate wanted); `None` when
/// the failure was not TLS's.
pub fn refusal_reason(err: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    use rustls::{AlertDescription as Alert, CertificateError as Cert, Error};
    let mut next = Some(err);
    while let Some(current) = next {
        // An I/O error (tokio-rustls's, perhaps inside a connector's) hides what it wraps from
        // `source()`: look inside.
        let mut inner = current;
        while let Some(wrapped) = inner.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
            inner = wrapped;
        }
        if let Some(tls) = inner.downcast_ref::<Error>() {
            return Some(match tls {
                Error::InvalidCertificate(Cert::UnknownIssuer) => {
                    "the server's certificate is not issued by a CA mcpmux trusts (unknown issuer): trust its CA with tls = { ca = \"ca.pem\" }"
                }
                Error::InvalidCertificate(Cert::Expired | Cert::ExpiredContext { .. }) => {
                    "the server's certificate has expired"
                }
                Error::InvalidCertificate(Cert::NotValidYet | Cert::NotValidYetContext { .. }) => {
                    "the server's certificate is not valid yet (is this machine's clock right?)"
                }
                Error::InvalidCertificate(Cert::NotValidForName | Cert::NotValidForNameContext { .. }) => {
                    "the server's certificate is not valid for the name asked for (name mismatch): set tls.server_name to a name it carries"
                }
                Error::InvalidCertificate(_) => "the server's certificate was refused",
                // Its own words (an unknown issuer named against the server's `ca` file).
                Error::General(_) => return None,
                Error::AlertReceived(Alert::CertificateRequired | Alert::HandshakeFailure | Alert::BadCertificate) => {
                    "the server refused the connection for want of an acceptable client certificate: give one with tls.cert and tls.key"
                }
                _ => "the TLS handshake failed",
            });
        }
        next = current.source();
    }
    None
}
