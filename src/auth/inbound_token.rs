//! The bearer token a host presented, once `[auth]` validated it: kept on the request's
//! [`super::Principal`] so an upstream in `token_exchange` mode can exchange it (or one in
//! `forward` mode send it on). A secret: `Debug` never shows it; serde keeps it inside a
//! sealed cluster passport, so the replica a request is forwarded to can exchange it too.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A validated inbound bearer token and its expiry (never logged).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboundToken {
    token: String,
    /// Unix seconds: the JWT's or the introspection answer's `exp`, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exp: Option<u64>,
}

impl InboundToken {
    pub fn new(token: impl Into<String>, exp: Option<u64>) -> InboundToken {
        InboundToken {
            token: token.into(),
            exp,
        }
    }

    /// The token itself: only for the token exchange or `forward` (never for a log line).
    pub fn expose(&self) -> &str {
        &self.token
    }

    /// When it expires (unix seconds), when known.
    pub fn expires_at(&self) -> Option<u64> {
        self.exp
    }
}

impl fmt::Debug for InboundToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Principal;

    #[test]
    fn debug_shows_no_inbound_token() {
        let inbound = InboundToken::new("eyJ-secret-inbound", Some(1_900_000_000));
        assert_eq!(format!("{inbound:?}"), "[redacted]");
        let principal = Principal {
            name: "alice".into(),
            issuer: Some("https://idp.example".into()),
            client_id: None,
            groups: vec![],
            scopes: vec![],
            token: Some(inbound),
            claims: Vec::new(),
            credential: crate::auth::Credential::Token,
            certificate: None,
        };
        let shown = format!("{principal:?} {principal:#?}");
        assert!(!shown.contains("eyJ-secret-inbound"), "{shown}");
        assert!(shown.contains("[redacted]"), "{shown}");
    }
}
