//! The listeners: binding an address (a taken port names a free one on the same address) and
//! serving a router on it over HTTP/1.1 and, unless `gateway.http2 = false`, HTTP/2 with prior
//! knowledge (h2c), each connection's socket with `TCP_NODELAY` and its requests knowing their
//! peer, until the close token fires (open connections then finish their response).

use crate::config;
use crate::error::GatewayError;
use crate::middleware::peer::FromPeer;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::net::SocketAddr;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

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

/// Serve `app` on `listener` until `close` fires: then no connection is accepted, each open one
/// is told to finish (HTTP/1.1: after its response in flight; HTTP/2: GOAWAY) and the task ends
/// when all have. HTTP/2 with prior knowledge is served beside HTTP/1.1 unless `http2` is off.
pub fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    close: &CancellationToken,
    http2: bool,
) -> JoinHandle<std::io::Result<()>> {
    let close = close.clone();
    tokio::spawn(async move {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        if !http2 {
            builder = builder.http1_only();
        }
        let connections = GracefulShutdown::new();
        loop {
            let (tcp, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        pause_after(err).await;
                        continue;
                    }
                },
                _ = close.cancelled() => break,
            };
            // Replies are written in pieces (SSE headers first, events as the upstream
            // answers); without TCP_NODELAY, Nagle plus the client's delayed ACK adds ~40 ms to
            // every streamed reply.
            if let Err(err) = tcp.set_nodelay(true) {
                tracing::debug!(%err, "cannot set TCP_NODELAY");
            }
            // Each connection's requests know their peer (for the log lines that name it).
            let service = FromPeer::new(app.clone(), peer).map_request(into_axum as fn(_) -> _);
            // (No HTTP upgrades: mcpmux serves none, and `http1_only` holds only without them.)
            let connection = builder.serve_connection(TokioIo::new(tcp), TowerToHyperService::new(service));
            let connection = connections.watch(connection.into_owned());
            tokio::spawn(async move {
                if let Err(err) = connection.await {
                    tracing::trace!(%peer, err = %err, "connection ended with an error");
                }
            });
        }
        drop(listener);
        connections.shutdown().await;
        Ok(())
    })
}

fn into_axum(request: http::Request<hyper::body::Incoming>) -> axum::extract::Request {
    request.map(axum::body::Body::new)
}

/// After a failed `accept`: at once for an error of that one connection, else (out of file
/// descriptors, ...) a second, so the loop does not spin.
async fn pause_after(err: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        err.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    ) {
        return;
    }
    tracing::error!(%err, "accepting a connection failed; trying again in 1 s");
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
}
