//! The OAuth 2.1 client side of the MCP authorization spec, as functions over one shared
//! `reqwest::Client` and no gateway state: reading a 401's `WWW-Authenticate` ([`challenge`]),
//! discovery of the protected resource's and the authorization server's metadata
//! ([`discovery`]), the scope to ask for ([`scope`]), the client's registration (pre-registered,
//! CIMD or RFC 7591, [`registration`]), PKCE ([`pkce`]), the authorization URL ([`authorize`]),
//! the token endpoint's grants: authorization code and refresh ([`token`]), client credentials
//! with an RFC 7523 assertion ([`client_credentials`], [`assertion`]), RFC 8693 token exchange
//! and the RFC 7523 JWT bearer grant ([`token_exchange`]). Errors name the endpoint and the
//! AS's `error`; no token or secret ever appears in one or in a `Debug` output.

pub mod assertion;
pub mod authorize;
pub mod challenge;
pub mod client_credentials;
pub mod discovery;
pub mod error;
pub mod pkce;
pub mod registration;
pub mod scope;
pub mod token;
pub mod token_exchange;
mod wire;

#[cfg(test)]
pub(crate) mod test_as;

pub use authorize::authorization_url;
pub use challenge::{parse_www_authenticate, Challenge};
pub use client_credentials::client_credentials;
pub use discovery::{discover, AsMetadata, Discovery};
pub use error::OAuthError;
pub use pkce::{random_state, Pkce};
pub use registration::{cimd_document, register, Registration};
pub use scope::{choose_scope, step_up_scope, MAX_STEP_UP_ATTEMPTS};
pub use token::{exchange_code, refresh, ClientAuth};
pub use token_exchange::{jwt_bearer, token_exchange, TokenExchange};

use std::time::Duration;

/// How long one request to an authorization server or a metadata URL may take in all.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting to one may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The one client every OAuth call shares: rustls, timeouts, and no redirect followed (a token
/// or registration POST must not be replayed elsewhere, and metadata is fetched from exactly
/// the URL the specs name). Build it once and clone it (a clone shares the pool).
pub fn http_client() -> Result<reqwest::Client, OAuthError> {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("mcpmux/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| {
            OAuthError::Invalid(format!(
                "the OAuth HTTP client: {}",
                crate::util::http_client::error_chain(&e)
            ))
        })
}

/// Unix seconds now.
pub(crate) fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
