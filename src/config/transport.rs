//! The per-server `transport` key of a `url` server: which HTTP transport mcpmux speaks to it
//! (Streamable HTTP, the legacy HTTP+SSE of protocol 2024-11-05, or detection).

use super::raw::RawServer;
use super::server::ServerCtx;
use super::ConfigError;

/// How mcpmux talks to a `url` server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpMode {
    /// Streamable HTTP, falling back to legacy HTTP+SSE when the server refuses the `initialize`
    /// POST with 400, 404 or 405 and its GET opens an SSE stream with an `endpoint` event.
    Auto,
    /// Streamable HTTP only.
    StreamableHttp,
    /// Legacy HTTP+SSE only: GET the URL for the stream, POST to the endpoint it names.
    LegacySse,
}

impl ServerCtx<'_> {
    /// The `transport` key: only `url` servers may set it.
    pub(super) fn http_mode(&self, raw: &RawServer) -> Result<HttpMode, ConfigError> {
        if raw.command.is_some() && raw.transport.is_some() {
            return Err(self.fail(None, "`transport` is only valid for `url` servers"));
        }
        self.choice(
            raw.transport.as_ref(),
            "transport",
            &[
                ("auto", HttpMode::Auto),
                ("streamable-http", HttpMode::StreamableHttp),
                ("sse", HttpMode::LegacySse),
            ],
        )
    }
}
