//! What an upstream connection sees of outbound identity: the `Authorization` header of its
//! next request, and a way to get a fresh one when the upstream refuses the current one.
//! Whatever provider stands behind it (OAuth grant, token exchange, client credentials) is
//! invisible to the connection.

use http::HeaderValue;
use std::future::Future;
use std::pin::Pin;

/// A future a [`Bearer`] returns (boxed: it is called only off the fast path).
pub type Renewal<'a> = Pin<Box<dyn Future<Output = Result<HeaderValue, SignInNeeded>> + Send + 'a>>;

/// The `Authorization` header of one identity at one upstream.
pub trait Bearer: Send + Sync + 'static {
    /// The header to send now, if there is one (cheap: no I/O; a token close to its expiry
    /// is still returned while its renewal runs in the background).
    fn current(&self) -> Option<HeaderValue>;

    /// A header for a request when there is none yet, or after the upstream refused `stale`
    /// (`refusal`): refreshed, fetched again, or the reason a person must sign in.
    fn renew<'a>(&'a self, refusal: Refusal<'a>) -> Renewal<'a>;

    /// The id of the grant whose token is held (as `mcpmux grants` lists it; never the token).
    fn grant_id(&self) -> Option<String>;
}

/// Why a header is asked for again.
#[derive(Debug, Clone, Copy)]
pub struct Refusal<'a> {
    /// The upstream's status (401 or 403), or `None` when no request was made yet.
    pub status: Option<u16>,
    /// Its `WWW-Authenticate` header.
    pub challenge: Option<&'a str>,
    /// The header it refused.
    pub stale: Option<&'a HeaderValue>,
}

impl Refusal<'_> {
    /// No request made yet: just a header, please.
    pub const NONE: Refusal<'static> = Refusal {
        status: None,
        challenge: None,
        stale: None,
    };
}

/// No header can be had without a person: signing in (again, or with more scopes) is needed;
/// or the token endpoint refused (the text says which and why, never a token).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct SignInNeeded {
    pub reason: String,
    /// Whether a person signing in can fix it (false: a configuration or authorization
    /// server problem, e.g. client credentials refused).
    pub by_person: bool,
}
