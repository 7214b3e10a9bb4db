//! A tracing span around every host request (method, path, session, trace id), at debug level:
//! the handler runs inside it, and when debug is off it costs a disabled span and nothing else (no
//! body wrapping, no timing). Each request gets its trace id here: the W3C `traceparent`'s
//! trace-id when the request carries a valid one, else a fresh one; the audit log records it.

use crate::audit::trace_id;
use crate::telemetry::trace_context::{self, RequestTrace, SpanContext};
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

fn request_span<B>(request: &Request<B>, trace_id: &str) -> tracing::Span {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return tracing::Span::none();
    }
    let session = (request.headers().get(crate::protocol::HEADER_SESSION_ID))
        .and_then(|v| v.to_str().ok())
        .map(crate::util::ids::session_digest)
        .unwrap_or_default();
    tracing::debug_span!(
        "http_request",
        method = %request.method(),
        path = %request.uri().path(),
        session,
        trace_id,
    )
}

impl<S, B> Service<Request<B>> for Trace<S>
where
    S: Service<Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future =
        tokio::task::futures::TaskLocalFuture<RequestTrace, tracing::instrument::Instrumented<S::Future>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let header = |name| request.headers().get(name).and_then(|v| v.to_str().ok());
        let parent =
            (header("traceparent")).and_then(|tp| SpanContext::from_headers(tp, header("tracestate")));
        let trace_id = match &parent {
            Some(parent) => parent.trace_id.clone(),
            None => trace_id::generate().into(),
        };
        let span = request_span(&request, &trace_id);
        let handled = self.inner.call(request).instrument(span);
        let trace = RequestTrace { id: trace_id, parent };
        trace_context::with_request(trace, handled)
    }
}

/// The tracing layer of every router.
pub fn layer() -> TraceLayer {
    TraceLayer
}
