//! A client certificate as a credential: the listener verified it against
//! `gateway.tls.client_ca` during the handshake, and its subject names the principal
//! `cert:<subject>` (no groups, no scopes: `[[policy]] principals` name it). Beside a bearer
//! credential, the certificate's subject travels with the bearer's principal and both are
//! audited.

use super::{Credential, Principal};
use crate::tls::identity::ClientCertificate;
use std::sync::Arc;

/// The prefix of a certificate principal's name.
pub const PREFIX: &str = "cert:";

/// Why a verified certificate admits nobody.
pub const NAMELESS: &str = "the client certificate names no subject (no common name, no DNS name)";

/// The principal a client certificate alone establishes, or `None` when it names nobody.
pub fn principal(certificate: &ClientCertificate) -> Option<Arc<Principal>> {
    let subject = certificate.subject.as_deref()?;
    Some(Arc::new(Principal {
        name: format!("{PREFIX}{subject}"),
        issuer: None,
        client_id: None,
        groups: Vec::new(),
        scopes: Vec::new(),
        token: None,
        claims: Vec::new(),
        credential: Credential::Certificate,
        certificate: Some(subject.to_string()),
    }))
}

/// `principal` (from a bearer credential) with the subject of the certificate its connection
/// also presented.
pub fn beside(principal: Arc<Principal>, certificate: Option<&ClientCertificate>) -> Arc<Principal> {
    match certificate.and_then(|c| c.subject.as_deref()) {
        None => principal,
        Some(subject) => {
            let mut both = Arc::unwrap_or_clone(principal);
            both.certificate = Some(subject.to_string());
            Arc::new(both)
        }
    }
}
