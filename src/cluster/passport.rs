//! The passport a replica puts on a request it forwards to another replica: who the host is
//! (the principal the forwarding replica authenticated, when authentication is on), which
//! replica sent it and when, sealed with the cluster key ([`Purpose::Passport`]). The receiving
//! replica trusts the principal in a passport that opens and is fresh, and nothing else: a host's
//! bearer token never travels between replicas. A passport is bound to its request (method,
//! path, session id and a digest of the body): replayed on any other request, it does not open.

use crate::auth::Principal;
use crate::seal::{Purpose, SealError, Sealer};
use serde::{Deserialize, Serialize};

/// How old a passport may be when it arrives (a forwarded request is sent at once).
pub const MAX_AGE_MS: u64 = 60_000;
/// How far in the future a passport's time may be (clocks of replicas differ a little).
pub const MAX_SKEW_MS: u64 = 5_000;

/// What a passport asserts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Passport {
    /// The host's principal, as the forwarding replica authenticated it.
    #[serde(rename = "p", default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<Principal>,
    /// The forwarding replica's `advertise` URL.
    #[serde(rename = "f")]
    pub from: String,
    /// Milliseconds since the Unix epoch when it was sealed.
    #[serde(rename = "t")]
    pub issued_ms: u64,
}

/// Why a passport is refused (the request is answered 403).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PassportRefusal {
    #[error("not a passport sealed with this cluster's key: {0}")]
    Sealed(SealError),
    #[error("a sealed passport with unreadable claims")]
    Claims,
    #[error("a passport issued {0} ms ago, older than the {MAX_AGE_MS} ms allowed")]
    Stale(u64),
    #[error("a passport issued in the future (check the replicas' clocks)")]
    Future,
}

impl Passport {
    /// A passport issued now by the replica at `from`.
    pub fn new(principal: Option<Principal>, from: &str) -> Passport {
        Passport {
            principal,
            from: from.to_string(),
            issued_ms: now_ms(),
        }
    }

    /// The passport for the request `binding` names ([`binding`]), as a header value: URL-safe
    /// visible ASCII.
    pub fn seal(&self, sealer: &Sealer, binding: &[u8]) -> String {
        let claims = serde_json::to_vec(self).unwrap_or_default();
        sealer.seal(Purpose::Passport, binding, &claims)
    }

    /// Open a passport that came with the request `binding` names, and check that it is fresh
    /// at `now_ms`.
    pub fn open(
        sealer: &Sealer,
        token: &str,
        binding: &[u8],
        now_ms: u64,
    ) -> Result<Passport, PassportRefusal> {
        let bytes = (sealer.open(Purpose::Passport, binding, token)).map_err(PassportRefusal::Sealed)?;
        let claims: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|_| PassportRefusal::Claims)?;
        let stated = claims["p"].get("credential").is_some();
        let mut passport: Passport = serde_json::from_value(claims).map_err(|_| PassportRefusal::Claims)?;
        // A replica of the version before principals said their credential (a rolling
        // upgrade): its principals without an issuer were API keys (tokens always have one).
        if let Some(principal) = passport
            .principal
            .as_mut()
            .filter(|p| !stated && p.issuer.is_none())
        {
            principal.credential = crate::auth::Credential::ApiKey;
        }
        if passport.issued_ms > now_ms.saturating_add(MAX_SKEW_MS) {
            return Err(PassportRefusal::Future);
        }
        let age = now_ms.saturating_sub(passport.issued_ms);
        if age > MAX_AGE_MS {
            return Err(PassportRefusal::Stale(age));
        }
        Ok(passport)
    }
}

/// What a passport is bound to: the SHA-256 of the request's method, path and query, session id
/// (if any) and body.
pub fn binding(method: &http::Method, uri: &http::Uri, session: Option<&[u8]>, body: &[u8]) -> Vec<u8> {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [
        method.as_str().as_bytes(),
        path.as_bytes(),
        session.unwrap_or_default(),
        body,
    ] {
        digest.update(&(part.len() as u64).to_be_bytes());
        digest.update(part);
    }
    digest.finish().as_ref().to_vec()
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map(|d| d.as_millis() as u64).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seal::ClusterKey;

    fn key(byte: u8) -> ClusterKey {
        ClusterKey::from_bytes([byte; 32])
    }

    fn alice() -> Principal {
        Principal {
            name: "alice".into(),
            issuer: Some("https://idp.example".into()),
            client_id: Some("cli".into()),
            groups: vec!["eng".into()],
            scopes: vec!["mcp".into()],
            token: Some(crate::auth::InboundToken::new(
                "alice-inbound-token",
                Some(4_000_000_000),
            )),
            claims: vec![("tier".into(), vec!["gold".into()])],
            credential: crate::auth::Credential::Token,
            certificate: None,
        }
    }

    fn request(body: &[u8]) -> Vec<u8> {
        binding(
            &http::Method::POST,
            &"/mcp".parse().unwrap(),
            Some(b"session-1"),
            body,
        )
    }

    #[test]
    fn a_passport_opens_with_its_principal_on_a_replica_with_the_key() {
        let (a, b) = (Sealer::new(&key(1), &[]), Sealer::new(&key(1), &[]));
        let passport = Passport::new(Some(alice()), "http://10.0.0.1:8080");
        let token = passport.seal(&a, &request(b"{}"));
        let opened = Passport::open(&b, &token, &request(b"{}"), passport.issued_ms).unwrap();
        assert_eq!(opened, passport);
        // The validated inbound token travels sealed: the replica can exchange it too.
        let inbound = opened.principal.as_ref().and_then(|p| p.token.as_ref());
        assert_eq!(inbound.map(|t| t.expose()), Some("alice-inbound-token"));
        assert!(!token.contains("alice-inbound-token"));
        assert_eq!(opened.principal.unwrap().owner(), alice().owner());
    }

    #[test]
    fn a_passport_from_a_replica_before_credentials_were_stated_reads_an_api_key_as_one() {
        let sealer = Sealer::new(&key(1), &[]);
        let req = request(b"{}");
        let issued_ms = now_ms();
        // What the previous version sealed: no `credential`.
        let old = serde_json::json!({
            "p": {"name": "ci-bot", "issuer": null, "client_id": null, "groups": ["ci"], "scopes": []},
            "f": "http://10.0.0.2:8080",
            "t": issued_ms,
        });
        let token = sealer.seal(Purpose::Passport, &req, old.to_string().as_bytes());
        let opened = Passport::open(&sealer, &token, &req, issued_ms).unwrap();
        let principal = opened.principal.unwrap();
        assert_eq!(principal.credential, crate::auth::Credential::ApiKey);
        assert_eq!(principal.owner(), "key\u{0}ci-bot");
        // And a token's principal (it has an issuer) stays a token's.
        let passport = Passport::new(Some(alice()), "http://10.0.0.1:8080");
        let token = passport.seal(&sealer, &req);
        let opened = Passport::open(&sealer, &token, &req, passport.issued_ms).unwrap();
        assert_eq!(
            opened.principal.unwrap().credential,
            crate::auth::Credential::Token
        );
    }

    #[test]
    fn forged_truncated_and_other_key_passports_are_refused() {
        let sealer = Sealer::new(&key(1), &[]);
        let passport = Passport::new(Some(alice()), "http://a");
        let req = request(b"{}");
        let token = passport.seal(&sealer, &req);
        let now = passport.issued_ms;
        let other = Sealer::new(&key(2), &[]).seal(Purpose::Passport, &req, b"{}");
        for bad in [&token[..token.len() - 3], "Zm9yZ2Vk", other.as_str(), ""] {
            assert!(matches!(
                Passport::open(&sealer, bad, &req, now),
                Err(PassportRefusal::Sealed(_))
            ));
        }
        // Another purpose's token with passport-shaped claims does not open as a passport.
        let claims = serde_json::to_vec(&passport).unwrap();
        let cursor = sealer.seal(Purpose::Cursor, &req, &claims);
        assert!(Passport::open(&sealer, &cursor, &req, now).is_err());
        let junk = sealer.seal(Purpose::Passport, &req, b"not json");
        assert_eq!(
            Passport::open(&sealer, &junk, &req, now),
            Err(PassportRefusal::Claims)
        );
    }

    #[test]
    fn a_passport_replayed_on_another_request_is_refused() {
        let sealer = Sealer::new(&key(1), &[]);
        let passport = Passport::new(Some(alice()), "http://a");
        let token = passport.seal(&sealer, &request(b"{\"id\":1}"));
        let now = passport.issued_ms;
        let path: http::Uri = "/mcp".parse().unwrap();
        let others = [
            request(b"{\"id\":2}"),
            binding(&http::Method::POST, &path, Some(b"session-2"), b"{\"id\":1}"),
            binding(&http::Method::POST, &path, None, b"{\"id\":1}"),
            binding(&http::Method::DELETE, &path, Some(b"session-1"), b"{\"id\":1}"),
            binding(
                &http::Method::POST,
                &"/other".parse().unwrap(),
                Some(b"session-1"),
                b"{\"id\":1}",
            ),
        ];
        for other in others {
            assert!(matches!(
                Passport::open(&sealer, &token, &other, now),
                Err(PassportRefusal::Sealed(SealError::Forged))
            ));
        }
        assert!(Passport::open(&sealer, &token, &request(b"{\"id\":1}"), now).is_ok());
    }

    #[test]
    fn stale_and_future_passports_are_refused() {
        let sealer = Sealer::new(&key(1), &[]);
        let passport = Passport::new(None, "http://a");
        let req = request(b"");
        let token = passport.seal(&sealer, &req);
        let issued = passport.issued_ms;
        assert!(Passport::open(&sealer, &token, &req, issued + MAX_AGE_MS).is_ok());
        assert!(matches!(
            Passport::open(&sealer, &token, &req, issued + MAX_AGE_MS + 1),
            Err(PassportRefusal::Stale(_))
        ));
        assert_eq!(
            Passport::open(&sealer, &token, &req, issued - MAX_SKEW_MS - 1),
            Err(PassportRefusal::Future)
        );
    }
}
