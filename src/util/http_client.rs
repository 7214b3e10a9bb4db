//! The lean hyper client (the stack reqwest uses inside, without its per-request URL work):
//! keep-alive pool, `TCP_NODELAY`, a connect timeout, HTTP and HTTPS (rustls with ring and the
//! Mozilla roots). Used for POSTs to HTTP upstreams and for requests between replicas.

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::time::Duration;

/// A pooled client sending whole bodies.
pub type LeanClient =
    hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A lean client with these timeouts, keeping idle connections `pool_idle_timeout` (none kept
/// for `None`: every request on a new connection); `None` when TLS cannot be set up (callers
/// fall back or report it).
pub fn lean_client(connect_timeout: Duration, pool_idle_timeout: Option<Duration>) -> Option<LeanClient> {
    lean_client_with(tls_config()?, None, connect_timeout, pool_idle_timeout)
}

/// A lean client with this TLS configuration (its ALPN is set here) and, when given, the name
/// asked for by SNI instead of the URL's host.
pub fn lean_client_with(
    tls: rustls::ClientConfig,
    server_name: Option<rustls::pki_types::ServerName<'static>>,
    connect_timeout: Duration,
    pool_idle_timeout: Option<Duration>,
) -> Option<LeanClient> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    let builder = match server_name {
        Some(name) => builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name)),
        None => builder,
    };
    let connector = builder.enable_all_versions().wrap_connector(http);
    let mut builder = hyper_util::client::legacy::Client::builder(TokioExecutor::new());
    match pool_idle_timeout {
        Some(idle) => builder.pool_idle_timeout(idle).pool_timer(TokioTimer::new()),
        None => builder.pool_max_idle_per_host(0),
    };
    let client = builder.build(connector);
    Some(client)
}

/// TLS for the lean client: ring, rustls' safe defaults and the Mozilla roots (as reqwest's).
fn tls_config() -> Option<rustls::ClientConfig> {
    use hyper_rustls::ConfigBuilderExt;
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    match rustls::ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions() {
        Ok(builder) => Some(builder.with_webpki_roots().with_no_client_auth()),
        Err(err) => {
            tracing::warn!(%err, "TLS setup for the lean HTTP client failed");
            None
        }
    }
}

/// An error with all of its causes, on one line.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
