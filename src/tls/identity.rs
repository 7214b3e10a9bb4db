//! The name a verified client certificate gives its holder: the subject's common name, else
//! its first DNS name. A name with control characters (which would forge log lines) or none at
//! all gives no name.

use std::sync::Arc;

use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

/// The holder's name from the end-entity certificate `leaf` (DER), if it has a usable one.
pub fn certificate_subject(leaf: &[u8]) -> Option<String> {
    let (_, cert) = X509Certificate::from_der(leaf).ok()?;
    let common_name = (cert.subject().iter_common_name())
        .find_map(|cn| cn.as_str().ok())
        .filter(|cn| usable(cn));
    let name = common_name.map(str::to_string).or_else(|| {
        let names = cert.subject_alternative_name().ok()??;
        names.value.general_names.iter().find_map(|name| match name {
            GeneralName::DNSName(dns) if usable(dns) => Some(dns.to_string()),
            _ => None,
        })
    });
    name
}

fn usable(name: &str) -> bool {
    !name.trim().is_empty() && !name.chars().any(char::is_control)
}

/// A client certificate the listener verified against `gateway.tls.client_ca`, carried by each
/// request of its connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCertificate {
    /// Its holder's name ([`certificate_subject`]); `None` when it has no usable one.
    pub subject: Option<Arc<str>>,
}

impl ClientCertificate {
    /// From the end-entity certificate (DER) of a verified chain.
    pub fn from_leaf(leaf: &[u8]) -> ClientCertificate {
        ClientCertificate {
            subject: certificate_subject(leaf).map(Arc::from),
        }
    }
}
