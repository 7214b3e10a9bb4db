//! A grant: what an authorization server issued to mcpmux for one principal and one upstream,
//! and the client registration that obtained it. Both hold secrets: their `Debug` shows none.

use serde::{Deserialize, Serialize};

/// Whose grant for which upstream.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GrantKey {
    pub principal: String,
    pub upstream: String,
}

/// What the token endpoint issued (a secret: Debug shows no token).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub access_token: String,
    /// "Bearer" unless the AS said otherwise.
    pub token_type: String,
    pub refresh_token: Option<String>,
    /// Unix seconds; `None`: the AS gave no expiry.
    pub expires_at: Option<u64>,
    /// As granted (space separated).
    pub scope: Option<String>,
    /// Unix seconds.
    pub obtained_at: u64,
    /// Where to refresh it.
    pub token_endpoint: Option<String>,
    /// The RFC 8707 resource it was asked for.
    pub resource: Option<String>,
    /// The client that obtained it (refresh uses the same).
    pub client: Option<ClientRegistration>,
}

/// The client mcpmux is at one authorization server (pre-registered, CIMD or DCR result).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRegistration {
    pub client_id: String,
    pub client_secret: Option<String>,
    /// "client_secret_basic" | "client_secret_post" | "none" | "private_key_jwt"
    pub auth_method: String,
    /// The AS it is registered at.
    pub issuer: Option<String>,
}

/// What may be shown about a grant (no token): for `mcpmux grants`, `/status`, audit.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct GrantSummary {
    pub scope: Option<String>,
    pub expires_at: Option<u64>,
    pub obtained_at: u64,
    pub refreshable: bool,
    /// A short digest naming the grant, derived from nothing secret.
    pub id: String,
}

impl Grant {
    /// Whether the grant has expired at `now` or will within `margin_secs`.
    pub fn expires_within(&self, now: u64, margin_secs: u64) -> bool {
        self.expires_at
            .is_some_and(|at| at <= now.saturating_add(margin_secs))
    }

    /// What may be shown about this grant.
    pub fn summary(&self) -> GrantSummary {
        let named = format!(
            "{}\n{}\n{}\n{}",
            self.obtained_at,
            self.token_endpoint.as_deref().unwrap_or(""),
            self.resource.as_deref().unwrap_or(""),
            self.scope.as_deref().unwrap_or("")
        );
        let digest = ring::digest::digest(&ring::digest::SHA256, named.as_bytes());
        let id = digest.as_ref()[..6].iter().map(|b| format!("{b:02x}")).collect();
        GrantSummary {
            scope: self.scope.clone(),
            expires_at: self.expires_at,
            obtained_at: self.obtained_at,
            refreshable: self.refresh_token.is_some(),
            id,
        }
    }
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant")
            .field("access_token", &"<redacted>")
            .field("token_type", &self.token_type)
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "<redacted>"),
            )
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .field("obtained_at", &self.obtained_at)
            .field("token_endpoint", &self.token_endpoint)
            .field("resource", &self.resource)
            .field("client", &self.client)
            .finish()
    }
}

impl std::fmt::Debug for ClientRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientRegistration")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("auth_method", &self.auth_method)
            .field("issuer", &self.issuer)
            .finish()
    }
}
