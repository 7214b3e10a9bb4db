//! Certificates for tests (unit tests here, the end-to-end tests include this file too): a CA,
//! and server and client certificates it signs, valid today or long expired, as PEM text.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
    IsCa, KeyPair, KeyUsagePurpose,
};

/// A certificate and its key, PEM.
pub struct Issued {
    pub cert: String,
    pub key: String,
}

/// What a certificate is for.
#[derive(Clone, Copy)]
pub enum Usage {
    Server,
    Client,
    /// Both: a replica's certificate, served and presented to the other replicas.
    ServerAndClient,
}

/// A test certificate authority.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        TestCa {
            issuer: CertifiedIssuer::self_signed(params, key).unwrap(),
        }
    }

    /// The CA's own certificate, PEM (what a peer trusts).
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A certificate for `usage` with subject CN `common_name` (none when empty) and these DNS
    /// names (an IP address becomes an IP name), valid today.
    pub fn issue(&self, usage: Usage, common_name: &str, names: &[&str]) -> Issued {
        self.issue_with(usage, common_name, names, false)
    }

    /// The same, but expired a long time ago.
    pub fn issue_expired(&self, usage: Usage, common_name: &str, names: &[&str]) -> Issued {
        self.issue_with(usage, common_name, names, true)
    }

    fn issue_with(&self, usage: Usage, common_name: &str, names: &[&str], expired: bool) -> Issued {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name = DistinguishedName::new();
        if !common_name.is_empty() {
            params.distinguished_name.push(DnType::CommonName, common_name);
        }
        params.extended_key_usages = match usage {
            Usage::Server => vec![ExtendedKeyUsagePurpose::ServerAuth],
            Usage::Client => vec![ExtendedKeyUsagePurpose::ClientAuth],
            Usage::ServerAndClient => vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        };
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Issued {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}
