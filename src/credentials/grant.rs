//! A grant: what an authorization server issued to mcpmux for one principal and one upstream
//! ([`Grant`], keyed by [`GrantKey`]), the client mcpmux is at that server
//! ([`ClientRegistration`]), and what may be shown about a grant without its tokens
//! ([`GrantSummary`]). Tokens and secrets never appear in `Debug`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Whose grant for which upstream (the upstream's name: the key of its `[servers.NAME]` table).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GrantKey {
    pub principal: String,
    pub upstream: String,
}

impl GrantKey {
    pub fn new(principal: impl Into<String>, upstream: impl Into<String>) -> GrantKey {
        GrantKey {
            principal: principal.into(),
            upstream: upstream.into(),
        }
    }

    /// Whether a person naming a principal `given` means this one: its full name, or the API
    /// key name (`key:{given}`) or token subject (`{given}@issuer`) it stands for.
    pub fn named_by(&self, given: &str) -> bool {
        let p = &self.principal;
        p == given
            || p.strip_prefix("key:") == Some(given)
            || p.strip_prefix(given).is_some_and(|rest| rest.starts_with('@'))
    }
}

/// What the token endpoint issued (a secret: `Debug` shows no token).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub access_token: String,
    /// "Bearer" unless the authorization server said otherwise.
    pub token_type: String,
    pub refresh_token: Option<String>,
    /// Unix seconds; `None`: the authorization server gave no expiry.
    pub expires_at: Option<u64>,
    /// As granted (space separated).
    pub scope: Option<String>,
    /// Unix seconds.
    pub obtained_at: u64,
    /// Where to refresh it.
    pub token_endpoint: Option<String>,
    /// The RFC 8707 resource it was asked for.
    pub resource: Option<String>,
    /// The client that obtained it (a refresh uses the same).
    pub client: Option<ClientRegistration>,
}

/// The client mcpmux is at one authorization server (pre-registered, a Client ID Metadata
/// Document, or the result of dynamic client registration). `Debug` shows no secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRegistration {
    pub client_id: String,
    pub client_secret: Option<String>,
    /// "client_secret_basic" | "client_secret_post" | "none" | "private_key_jwt".
    pub auth_method: String,
    /// The authorization server it is registered at.
    pub issuer: Option<String>,
}

/// What may be shown about a grant (no token): for `mcpmux grants`, `/status`, audit.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct GrantSummary {
    pub scope: Option<String>,
    pub expires_at: Option<u64>,
    pub obtained_at: u64,
    pub refreshable: bool,
    /// A short digest naming the grant (see [`Grant::summary`]): the same in `mcpmux grants`,
    /// `/status` and audit lines, and the same before and after the vault re-seals it.
    pub id: String,
}

/// How many hex digits a grant id has.
pub const GRANT_ID_HEX: usize = 12;

impl Grant {
    /// Whether the access token expires within `margin_secs` of `now` (or has expired); never
    /// for a grant without an expiry.
    pub fn expires_within(&self, now: u64, margin_secs: u64) -> bool {
        self.expires_at
            .is_some_and(|at| at <= now.saturating_add(margin_secs))
    }

    /// What may be shown about this grant. Its id is the first 12 hex digits of SHA-256 over a
    /// fixed label and the access token: 48 bits of a one-way digest of a high-entropy token
    /// name the grant without revealing anything usable of it, and anyone holding the grant
    /// (the vault's listing, the provider writing an audit line) derives the same id. (A digest
    /// of the sealed record would change with every re-seal and could not be derived from the
    /// grant a caller holds.) A refresh issues a new token, hence a new id.
    pub fn summary(&self) -> GrantSummary {
        let mut input = b"mcpmux grant id v1\0".to_vec();
        input.extend_from_slice(self.access_token.as_bytes());
        GrantSummary {
            scope: self.scope.clone(),
            expires_at: self.expires_at,
            obtained_at: self.obtained_at,
            refreshable: self.refresh_token.is_some(),
            id: short_digest(&input),
        }
    }
}

/// The first [`GRANT_ID_HEX`] hex digits of SHA-256 over `bytes`.
fn short_digest(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    hex[..GRANT_ID_HEX].to_string()
}

/// `Some("***")` or `None`: whether a secret is there, never what it is.
fn masked(secret: &Option<String>) -> Option<&'static str> {
    secret.as_ref().map(|_| "***")
}

impl fmt::Debug for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Grant")
            .field("access_token", &"***")
            .field("token_type", &self.token_type)
            .field("refresh_token", &masked(&self.refresh_token))
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .field("obtained_at", &self.obtained_at)
            .field("token_endpoint", &self.token_endpoint)
            .field("resource", &self.resource)
            .field("client", &self.client)
            .finish()
    }
}

impl fmt::Debug for ClientRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientRegistration")
            .field("client_id", &self.client_id)
            .field("client_secret", &masked(&self.client_secret))
            .field("auth_method", &self.auth_method)
            .field("issuer", &self.issuer)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(expires_at: Option<u64>) -> Grant {
        Grant {
            access_token: "at-SECRET-1".into(),
            token_type: "Bearer".into(),
            refresh_token: Some("rt-SECRET-2".into()),
            expires_at,
            scope: Some("read write".into()),
            obtained_at: 1000,
            token_endpoint: Some("https://as.example/token".into()),
            resource: Some("https://mcp.example/mcp".into()),
            client: Some(ClientRegistration {
                client_id: "mcpmux-client".into(),
                client_secret: Some("cs-SECRET-3".into()),
                auth_method: "client_secret_basic".into(),
                issuer: Some("https://as.example".into()),
            }),
        }
    }

    #[test]
    fn debug_shows_no_token_or_secret() {
        let shown = format!("{:?}", grant(Some(2000)));
        for secret in ["at-SECRET-1", "rt-SECRET-2", "cs-SECRET-3", "SECRET"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        // What is not secret still helps debugging.
        assert!(
            shown.contains("mcpmux-client") && shown.contains("read write"),
            "{shown}"
        );
        assert!(shown.contains("refresh_token: Some(\"***\")"), "{shown}");
        let mut none = grant(None);
        none.refresh_token = None;
        assert!(format!("{none:?}").contains("refresh_token: None"));
    }

    #[test]
    fn expires_within_counts_the_margin_and_never_for_no_expiry() {
        let g = grant(Some(2000));
        assert!(!g.expires_within(1000, 60));
        assert!(!g.expires_within(1939, 60));
        assert!(g.expires_within(1940, 60));
        assert!(g.expires_within(2000, 0));
        assert!(g.expires_within(5000, 0));
        assert!(!g.expires_within(1999, 0));
        assert!(g.expires_within(u64::MAX, u64::MAX));
        assert!(!grant(None).expires_within(u64::MAX, u64::MAX));
    }

    #[test]
    fn a_summary_tells_what_may_be_shown_and_no_token() {
        let g = grant(Some(2000));
        let summary = g.summary();
        assert_eq!(summary.scope.as_deref(), Some("read write"));
        assert_eq!((summary.expires_at, summary.obtained_at), (Some(2000), 1000));
        assert!(summary.refreshable);
        assert_eq!(summary.id.len(), GRANT_ID_HEX);
        assert!(summary.id.bytes().all(|b| b.is_ascii_hexdigit()));
        // The id is not the plain digest of the token (that would let a guess be checked
        // against a bare hash), and it changes with the token.
        assert_ne!(summary.id, short_digest(g.access_token.as_bytes()));
        let mut other = g.clone();
        other.access_token = "at-other".into();
        assert_ne!(other.summary().id, summary.id);
        other.refresh_token = None;
        assert!(!other.summary().refreshable);
        let json = serde_json::to_string(&summary).unwrap();
        assert!(!json.contains("SECRET"), "{json}");
    }

    #[test]
    fn grant_keys_order_by_principal_then_upstream_and_round_trip() {
        let mut keys = [
            GrantKey::new("bob", "a"),
            GrantKey::new("alice", "z"),
            GrantKey::new("alice", "b"),
        ];
        keys.sort();
        assert_eq!(keys[0], GrantKey::new("alice", "b"));
        assert_eq!(keys[2], GrantKey::new("bob", "a"));
        let g = grant(Some(1));
        let back: Grant = serde_json::from_str(&serde_json::to_string(&g).unwrap()).unwrap();
        assert_eq!(back, g);
    }
}
