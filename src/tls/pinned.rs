//! How the operator commands (`mcpmux status`, `reload`, `pins`, `login`) reach a gateway that
//! serves TLS: they read the same configuration file, so they trust exactly the certificate in
//! its `gateway.tls.cert` file, whoever issued it (a private CA, a self-signed one), and the
//! server must still prove it holds that certificate's key.

use super::files::{certificates, FileProblem, FileRole};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::path::Path;
use std::sync::Arc;

/// A client configuration trusting only the first certificate of `cert_file`.
pub fn pinned_client(cert_file: &Path) -> Result<rustls::ClientConfig, FileProblem> {
    let chain = certificates(cert_file, FileRole::Cert, false)?;
    let Some(leaf) = chain.into_iter().next() else {
        return Err(FileProblem::new(
            FileRole::Cert,
            cert_file,
            "holds no certificate",
        ));
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = PinnedLeaf {
        leaf,
        algorithms: provider.signature_verification_algorithms,
        file: cert_file.display().to_string(),
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| FileProblem::new(FileRole::Cert, cert_file, err.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(config)
}

/// Accepts the one certificate it holds; the handshake's signatures are verified as usual.
#[derive(Debug)]
struct PinnedLeaf {
    leaf: CertificateDer<'static>,
    algorithms: WebPkiSupportedAlgorithms,
    file: String,
}

impl ServerCertVerifier for PinnedLeaf {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match end_entity.as_ref() == self.leaf.as_ref() {
            true => Ok(ServerCertVerified::assertion()),
            false => Err(rustls::Error::General(format!(
                "the gateway serves a certificate other than the one in {} (rotated just now? try again)",
                self.file
            ))),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// An HTTP client for an operator command: the built-in web roots, or with `pinned_cert` only
/// the first certificate of that file.
pub fn operator_client(
    timeout: std::time::Duration,
    pinned_cert: Option<&Path>,
) -> Result<reqwest::Client, String> {
    let builder = reqwest::Client::builder().timeout(timeout);
    let builder = match pinned_cert {
        Some(file) => {
            builder.use_preconfigured_tls(pinned_client(file).map_err(|e| format!("gateway.tls.cert {e}"))?)
        }
        None => builder,
    };
    builder
        .build()
        .map_err(|e| format!("cannot make an HTTP client: {e}"))
}
