//! Errors that say where they came from, and their one mapping to JSON-RPC codes and HTTP statuses.

use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, StatusCode};

pub use crate::protocol::codes;

/// Something an upstream connection could not do.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    #[error("upstream '{name}' is not available: {reason}")]
    Unavailable { name: String, reason: String },
    #[error("upstream '{name}' closed the connection: {reason}")]
    Closed { name: String, reason: String },
    #[error("upstream '{name}' did not answer within {secs} s")]
    Timeout { name: String, secs: u64 },
    #[error("upstream '{name}' is overloaded: {reason}")]
    Overloaded { name: String, reason: String },
    #[error("upstream '{name}' answered HTTP {status}: {detail}")]
    Http {
        name: String,
        status: u16,
        detail: String,
    },
    #[error("upstream '{name}' protocol error: {detail}")]
    Protocol { name: String, detail: String },
}

impl UpstreamError {
    /// The JSON-RPC code a host sees for this failure.
    pub fn code(&self) -> i64 {
        match self {
            UpstreamError::Timeout { .. } => codes::REQUEST_TIMEOUT,
            UpstreamError::Overloaded { .. } => codes::OVERLOADED,
            UpstreamError::Protocol { .. } => codes::INTERNAL_ERROR,
            _ => codes::UPSTREAM_UNAVAILABLE,
        }
    }

    /// The upstream's name.
    pub fn upstream(&self) -> &str {
        match self {
            UpstreamError::Unavailable { name, .. }
            | UpstreamError::Closed { name, .. }
            | UpstreamError::Timeout { name, .. }
            | UpstreamError::Overloaded { name, .. }
            | UpstreamError::Http { name, .. }
            | UpstreamError::Protocol { name, .. } => name,
        }
    }

    /// The error object sent to a host.
    pub fn to_error_object(&self) -> Box<serde_json::value::RawValue> {
        let data = serde_json::json!({ "upstream": self.upstream() });
        crate::protocol::message::error_object(self.code(), &self.to_string(), Some(&data))
    }
}

/// A request from a host that mcpmux refuses at the HTTP layer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DownstreamError {
    #[error("Not Acceptable: {0}")]
    NotAcceptable(&'static str),
    #[error("Unsupported Media Type: Content-Type must be application/json")]
    UnsupportedMediaType,
    #[error("Bad Request: {0}")]
    BadRequest(String),
    #[error("Bad Request: Mcp-Session-Id header is required")]
    MissingSession,
    #[error("Not Found: session not found or ended")]
    UnknownSession,
    #[error("Forbidden: {0}")]
    Forbidden(&'static str),
    #[error("Payload Too Large: body exceeds {0} bytes")]
    PayloadTooLarge(usize),
    #[error("Method Not Allowed")]
    MethodNotAllowed,
    #[error("Conflict: {0}")]
    Conflict(&'static str),
    #[error("Parse error: {0}")]
    Parse(String),
    #[error("Service Unavailable: {0}")]
    Unavailable(&'static str),
}

impl DownstreamError {
    /// The HTTP status for this refusal.
    pub fn status(&self) -> StatusCode {
        match self {
            DownstreamError::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            DownstreamError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            DownstreamError::BadRequest(_) | DownstreamError::MissingSession | DownstreamError::Parse(_) => {
                StatusCode::BAD_REQUEST
            }
            DownstreamError::UnknownSession => StatusCode::NOT_FOUND,
            DownstreamError::Forbidden(_) => StatusCode::FORBIDDEN,
            DownstreamError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            DownstreamError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            DownstreamError::Conflict(_) => StatusCode::CONFLICT,
            DownstreamError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The JSON-RPC code of the id-less error body that accompanies the status.
    pub fn code(&self) -> i64 {
        match self {
            DownstreamError::Parse(_) => codes::PARSE_ERROR,
            DownstreamError::UnknownSession => codes::INVALID_REQUEST,
            _ => codes::INVALID_REQUEST,
        }
    }
}

impl DownstreamError {
    /// The HTTP answer for this refusal: its status and an id-less JSON-RPC error body (405
    /// says which methods are allowed).
    pub fn into_http(self) -> Response {
        let status = self.status();
        let body = crate::protocol::message::error_response(None, self.code(), &self.to_string()).to_json();
        let mut resp = json_text(status, body);
        if status == StatusCode::METHOD_NOT_ALLOWED {
            resp.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
        }
        resp
    }
}

/// A response with a JSON body (every JSON answer of the host faces is made here).
pub fn json_text(status: StatusCode, json: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], json).into_response()
}

/// Failures of the gateway as a whole (startup, binding).
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("server error: {0}")]
    Serve(std::io::Error),
}
