//! The listeners: binding an address (a taken port names a free one on the same address) and
//! serving a router on it over HTTP/1.1 and, unless `gateway.http2 = false`, HTTP/2 (with prior
//! knowledge on plain TCP, by ALPN over TLS), with `gateway.tls` over TLS (its files loaded
//! before the start; the handshake on the connection's own task, bounded in time; a verified
//! client certificate travels with each of the connection's requests), each connection's socket
//! with `TCP_NODELAY` and its requests knowing their peer, until the close token fires (open
//! connections then finish their response).

use crate::config;
use crate::error::GatewayError;
use crate::middleware::peer::FromPeer;
use crate::tls::identity::ClientCertificate;
use crate::tls::ServerTls;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
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

/// The listeners' TLS (`gateway.tls`), every file read and checked now (a problem stops the
/// start: never plain HTTP instead): the main listener's, and the admin listener's (the same
/// certificate; client certificates are never asked for there, like `[auth]`).
pub type ListenerTls = (Option<Arc<ServerTls>>, Option<Arc<ServerTls>>);

pub fn listener_tls(config: &crate::config::Config) -> Result<ListenerTls, GatewayError> {
    let Some(files) = &config.gateway.tls else {
        return Ok((None, None));
    };
    let refused = |problem: crate::tls::FileProblem| {
        GatewayError::Tls(format!("gateway.tls.{}: {problem}", problem.role.key()))
    };
    let main = ServerTls::load(files.clone(), config.listener_tls_options()).map_err(refused)?;
    let admin = match config.gateway.admin_listen {
        Some(_) => {
            let files = crate::tls::ServerFiles {
                client_ca: None,
                ..files.clone()
            };
            let options = crate::tls::ServerOptions {
                http2: config.gateway.http2,
                client_cert_optional: false,
            };
            Some(ServerTls::load(files, options).map_err(refused)?)
        }
        None => None,
    };
    Ok((Some(main), admin))
}

/// Serve `app` on `listener` until `close` fires: then no connection is accepted, each open one
/// is told to finish (HTTP/1.1: after its response in flight; HTTP/2: GOAWAY) and the task ends
/// when all have. HTTP/2 is served beside HTTP/1.1 unless `http2` is off; with `tls`, every
/// connection is TLS.
pub fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    close: &CancellationToken,
    http2: bool,
    tls: Option<Arc<ServerTls>>,
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
            let Some(tls) = &tls else {
                // Each connection's requests know their peer (for the log lines that name it).
                let service = FromPeer::new(app.clone(), peer).map_request(into_axum as fn(_) -> _);
                // (No HTTP upgrades: mcpmux serves none, and `http1_only` holds only without them.)
                let connection =
                    builder.serve_connection(TokioIo::new(tcp), TowerToHyperService::new(service));
                let connection = connections.watch(connection.into_owned());
                tokio::spawn(async move {
                    if let Err(err) = connection.await {
                        tracing::trace!(%peer, err = %err, "connection ended with an error");
                    }
                });
                continue;
            };
            let (tls, builder, app) = (tls.clone(), builder.clone(), app.clone());
            let watcher = connections.watcher();
            tokio::spawn(async move {
                let Some(stream) = handshake(&tls, tcp, peer).await else {
                    return;
                };
                let client = client_certificate(stream.get_ref().1);
                let service = FromPeer::new(app, peer).map_request(move |request| {
                    let mut request = into_axum(request);
                    if let Some(client) = &client {
                        request.extensions_mut().insert(client.clone());
                    }
                    request
                });
                let connection =
                    builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
                if let Err(err) = watcher.watch(connection.into_owned()).await {
                    tracing::trace!(%peer, err = %err, "connection ended with an error");
                }
            });
        }
        drop(listener);
        connections.shutdown().await;
        Ok(())
    })
}

/// How long a client may take over its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The TLS handshake of the connection from `peer`, or `None` (logged) when it failed or took
/// too long: a client refused for its certificate is told so by the alert, and the log says
/// why (unknown issuer, expired, no certificate).
async fn handshake(
    tls: &ServerTls,
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
) -> Option<tokio_rustls::server::TlsStream<tokio::net::TcpStream>> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor().accept(tcp)).await {
        Ok(Ok(stream)) => Some(stream),
        Ok(Err(err)) => {
            let refused_certificate = err
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                .is_some_and(|e| {
                    matches!(
                        e,
                        rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented
                    )
                });
            match refused_certificate {
                true => {
                    let client_ca = tls
                        .client_ca()
                        .map(|path| path.display().to_string())
                        .unwrap_or_default();
                    tracing::warn!(%peer, reason = %err, %client_ca, "TLS: client certificate refused")
                }
                false => tracing::debug!(%peer, reason = %err, "TLS handshake failed"),
            }
            None
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake took longer than {HANDSHAKE_TIMEOUT:?}; connection closed");
            None
        }
    }
}

/// What the connection's verified client certificate says of its holder, if it sent one.
fn client_certificate(connection: &rustls::ServerConnection) -> Option<ClientCertificate> {
    let leaf = connection.peer_certificates()?.first()?;
    Some(ClientCertificate::from_leaf(leaf.as_ref()))
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
