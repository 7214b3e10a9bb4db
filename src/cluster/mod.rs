//! Several replicas as one gateway: what cannot be carried by a host (a session-era session
//! whose home replica is alive, a modern call parked on another replica) is forwarded, replica to
//! replica over HTTP, to the replica that holds it, authenticated with the cluster key.
//!
//! [`send::ForwardLayer`] (inside authentication) forwards a session-era request for a session
//! homed on another live replica; [`receive::PassportLayer`] (outside it) accepts a request
//! another replica forwarded, with the host's principal from its [`passport::Passport`];
//! [`peer::Peers`] is the client between them; [`relay`] streams the answer back. Without
//! `[cluster]` none of this is installed.

pub mod passport;
pub mod peer;
pub mod receive;
pub mod relay;
pub mod send;

pub use peer::{PeerError, Peers};

/// The session-era session header (a passport is bound to it).
pub const SESSION_HEADER: &str = crate::protocol::HEADER_SESSION_ID;
/// The header a replica puts its sealed passport in when it forwards a request.
pub const PASSPORT_HEADER: &str = "mcpmux-passport";
/// On a replica's answer to a forwarded request it did not serve, and why: `stopping` (a 503
/// while it stops) or `passport` (a passport it cannot open: during a key rotation, a replica
/// that has only the old key). The forwarding replica then serves the request itself (takes the
/// session over).
pub const DECLINED_HEADER: &str = "mcpmux-declined";

/// In a request's extensions: another replica forwarded it (from its `advertise` URL). It is
/// never forwarded again.
#[derive(Debug, Clone)]
pub struct Forwarded {
    pub from: String,
}
