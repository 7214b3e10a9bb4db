//! A tracing span around every host request (method, path, session), at debug level: the
//! handler runs inside it, and when debug is off it costs a disabled span and nothing else (no
//! body wrapping, no timing).

use http::Request;
use std::task::{Context, Poll};
use tower::{Layer, Service};
use tracing::Instrument;

/// Puts each request's handling inside its span.
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceLayer;

impl<S> Layer<S> for TraceLayer {
    type Service = Trace<S>;

    fn layer(&self, inner: S) -> Trace<S> {
        Trace { inner }
    }
}

/// The service [`TraceLayer`] makes.
#[derive(Debug, Clone)]
pub struct Trace<S> {
    inner: S,
}

fn request_span<B>(request: &Request<B>) -> tracing::Span {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return tracing::Span::none();
    }
    let session = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    tracing::debug_span!(
        "http_request",
        method = %request.method(),
        path = %request.uri().path(),
        session,
    )
}

impl<S, B> Service<Request<B>> for Trace<S>
where
    S: Service<Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = tracing::instrument::Instrumented<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let span = request_span(&request);
        self.inner.call(request).instrument(span)
    }
}

/// The tracing layer of every router.
pub fn layer() -> TraceLayer {
    TraceLayer
}
