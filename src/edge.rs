//! The listeners: binding an address (a taken port names a free one on the same address) and
//! serving a router on it, each connection's socket with `TCP_NODELAY` and its requests knowing
//! their peer, until the close token fires (open connections then finish their response).

use crate::error::GatewayError;
use crate::{config, middleware};
use std::net::SocketAddr;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A listener on `at` (the address of `gateway.{key}`), and the address it got (port 0: one the
/// system picked). When `at` is taken, the error names a port that is free on the same address.
pub async fn bind(
    at: SocketAddr,
    key: &'static str,
) -> Result<(tokio::net::TcpListener, SocketAddr), GatewayError> {
    let listener = (tokio::net::TcpListener::bind(at).await).map_err(|source| {
        let free = (source.kind() == std::io::ErrorKind::AddrInUse)
            .then(|| std::net::TcpListener::bind(SocketAddr::new(at.ip(), 0)).and_then(|l| l.local_addr()))
            .and_then(Result::ok)
            .map(|free| free.port());
        GatewayError::Bind {
            addr: at,
            hint: config::bind_hint(at, key, &source, free),
            source,
        }
    })?;
    let addr = listener.local_addr().map_err(GatewayError::Serve)?;
    Ok((listener, addr))
}

/// Serve `app` on `listener` until `close` fires (then open connections finish their response).
pub fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    close: &CancellationToken,
) -> JoinHandle<std::io::Result<()>> {
    // Replies are written in pieces (SSE headers first, events as the upstream answers); without
    // TCP_NODELAY, Nagle plus the client's delayed ACK adds ~40 ms to every streamed reply.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(err) = tcp.set_nodelay(true) {
            tracing::debug!(%err, "cannot set TCP_NODELAY");
        }
    });
    let graceful = close.clone().cancelled_owned();
    // Each connection's requests know their peer (for the log lines that name it).
    let per_connection = tower::service_fn(
        move |incoming: axum::serve::IncomingStream<'_, axum::serve::TapIo<tokio::net::TcpListener, _>>| {
            let peer = *incoming.remote_addr();
            std::future::ready(Ok::<_, std::convert::Infallible>(
                middleware::peer::FromPeer::new(app.clone(), peer),
            ))
        },
    );
    tokio::spawn(async move {
        axum::serve(listener, per_connection)
            .with_graceful_shutdown(graceful)
            .await
    })
}
