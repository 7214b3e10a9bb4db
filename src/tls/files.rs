//! Certificates, keys and CA bundles read from PEM files: every failure names the file and the
//! reason (missing, unreadable, no PEM block of the right kind, a certificate that cannot be
//! parsed or has expired, a key that does not match its certificate), so check-config, `serve`
//! and a rotation that went wrong all say the same thing.

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use std::fmt;
use std::path::{Path, PathBuf};
use x509_parser::prelude::{FromDer, X509Certificate};

/// Which setting a file was named by (check-config points at that key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileRole {
    /// A certificate chain (`cert`).
    Cert,
    /// Its private key (`key`).
    Key,
    /// The CAs client certificates must chain to (`client_ca`).
    ClientCa,
    /// CAs to trust (`ca`).
    Ca,
}

impl FileRole {
    /// The setting's name (`cert`, `key`, `client_ca`, `ca`).
    pub fn key(self) -> &'static str {
        match self {
            FileRole::Cert => "cert",
            FileRole::Key => "key",
            FileRole::ClientCa => "client_ca",
            FileRole::Ca => "ca",
        }
    }
}

/// A file that cannot be used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProblem {
    pub role: FileRole,
    pub path: PathBuf,
    pub reason: String,
}

impl FileProblem {
    pub(super) fn new(role: FileRole, path: &Path, reason: impl Into<String>) -> Self {
        FileProblem {
            role,
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for FileProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

impl std::error::Error for FileProblem {}

fn read(path: &Path, role: FileRole) -> Result<Vec<u8>, FileProblem> {
    std::fs::read(path).map_err(|err| {
        let reason = match err.kind() {
            std::io::ErrorKind::NotFound => "does not exist".to_string(),
            std::io::ErrorKind::PermissionDenied => "cannot be read: permission denied".to_string(),
            _ => format!("cannot be read: {err}"),
        };
        FileProblem::new(role, path, reason)
    })
}

fn pem_reason(err: &pem::Error) -> String {
    match err {
        pem::Error::NoItemsFound => "holds no PEM block of the expected kind".to_string(),
        other => format!("is not valid PEM: {other}"),
    }
}

/// Every certificate of a PEM file, in order (a chain: the leaf first). Each one must parse;
/// `check_dates` also refuses a leaf that has expired or is not valid yet.
pub fn certificates(
    path: &Path,
    role: FileRole,
    check_dates: bool,
) -> Result<Vec<CertificateDer<'static>>, FileProblem> {
    let bytes = read(path, role)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| FileProblem::new(role, path, pem_reason(&err)))?;
    if certs.is_empty() {
        let reason = "holds no PEM certificate (-----BEGIN CERTIFICATE-----)";
        return Err(FileProblem::new(role, path, reason));
    }
    for (i, cert) in certs.iter().enumerate() {
        let parsed = X509Certificate::from_der(cert.as_ref())
            .map_err(|err| {
                FileProblem::new(
                    role,
                    path,
                    format!("certificate {} cannot be parsed: {err}", i + 1),
                )
            })?
            .1;
        if check_dates && i == 0 {
            dates_problem(&parsed).map_or(Ok(()), |why| Err(FileProblem::new(role, path, why)))?;
        }
    }
    Ok(certs)
}

/// Why a certificate cannot be used now (expired, not yet valid), if it cannot.
fn dates_problem(cert: &X509Certificate<'_>) -> Option<String> {
    let validity = cert.validity();
    let now = x509_parser::time::ASN1Time::now();
    if validity.not_after < now {
        Some(format!("the certificate expired on {}", validity.not_after))
    } else if validity.not_before > now {
        Some(format!(
            "the certificate is not valid before {}",
            validity.not_before
        ))
    } else {
        None
    }
}

/// The one private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, FileProblem> {
    let bytes = read(path, FileRole::Key)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|err| {
        let reason = match err {
            pem::Error::NoItemsFound => {
                "holds no PEM private key (PKCS#8, PKCS#1 or SEC1: -----BEGIN PRIVATE KEY-----)".to_string()
            }
            other => pem_reason(&other),
        };
        FileProblem::new(FileRole::Key, path, reason)
    })
}

/// A certificate chain and its private key, each file read once.
#[derive(Debug)]
pub struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

/// A certificate chain and its key, checked to belong together and to be valid today.
pub fn identity(cert: &Path, key: &Path) -> Result<Identity, FileProblem> {
    let chain = certificates(cert, FileRole::Cert, true)?;
    let private = private_key(key)?;
    let provider = rustls::crypto::ring::default_provider();
    match CertifiedKey::from_der(chain.clone(), private.clone_key(), &provider) {
        Ok(_) => Ok(Identity { chain, key: private }),
        Err(rustls::Error::InconsistentKeys(_)) => Err(FileProblem::new(
            FileRole::Key,
            key,
            format!("the key does not match the certificate in {}", cert.display()),
        )),
        Err(other) => Err(unusable_key(key, &other)),
    }
}

/// The key at `path` cannot be used (an algorithm rustls does not sign with, ...).
pub(super) fn unusable_key(path: &Path, err: &rustls::Error) -> FileProblem {
    FileProblem::new(FileRole::Key, path, format!("the key cannot be used: {err}"))
}

/// The CA certificates of a PEM bundle, as trust anchors.
pub fn roots(path: &Path, role: FileRole) -> Result<rustls::RootCertStore, FileProblem> {
    let mut store = rustls::RootCertStore::empty();
    for (i, cert) in certificates(path, role, false)?.into_iter().enumerate() {
        store.add(cert).map_err(|err| {
            FileProblem::new(
                role,
                path,
                format!("certificate {} is not a usable CA: {err}", i + 1),
            )
        })?;
    }
    Ok(store)
}
