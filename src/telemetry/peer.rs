//! The socket address of the peer whose request is being served, for the log lines that name
//! it (an authentication refusal): set per connection by `middleware::peer`, read anywhere below.

use std::future::Future;
use std::net::SocketAddr;
use tokio::task::futures::TaskLocalFuture;

tokio::task_local! {
    static PEER: SocketAddr;
}

/// Run `future` (a request's serving) with `peer` as its peer.
pub fn scope<F: Future>(peer: SocketAddr, future: F) -> TaskLocalFuture<SocketAddr, F> {
    PEER.scope(peer, future)
}

/// The peer of the request being served (`None` outside a connection's scope: a service
/// called directly, as tests do).
pub fn current() -> Option<SocketAddr> {
    PEER.try_with(|peer| *peer).ok()
}
