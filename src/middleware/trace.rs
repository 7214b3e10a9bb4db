//! A tracing span around every host request (method, path, session), at debug level so that it
//! costs next to nothing unless asked for (`RUST_LOG=mcpmux=debug`).

use http::Request;
use tower_http::classify::{ServerErrorsAsFailures, SharedClassifier};
use tower_http::trace::{MakeSpan, TraceLayer};
use tracing::Span;

/// Names the span of one HTTP request.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestSpan;

impl<B> MakeSpan<B> for RequestSpan {
    fn make_span(&mut self, request: &Request<B>) -> Span {
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
}

/// The tracing layer of every router.
pub fn layer() -> TraceLayer<SharedClassifier<ServerErrorsAsFailures>, RequestSpan> {
    TraceLayer::new_for_http().make_span_with(RequestSpan)
}
