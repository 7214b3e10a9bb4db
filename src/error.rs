//! Errors that say where they came from, and their one mapping to JSON-RPC codes and HTTP statuses.

use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, StatusCode};
use std::sync::Arc;

pub use crate::protocol::codes;
use crate::util::text::clip;

/// The underlying failure of an error (an I/O or HTTP client error), kept for its chain.
pub type Cause = Arc<dyn std::error::Error + Send + Sync>;

/// Which side of the gateway an error comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Side {
    /// The host's request (a refusal: its fault, or the gateway protecting itself from it).
    Host,
    /// An upstream, by its id (the config name).
    Upstream(String),
    /// mcpmux itself.
    Internal,
}

/// Whether sending the same request again may succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Not without changing it.
    Never,
    /// Later, once the cause passes (a restart, a drained queue).
    Later,
}

/// Something an upstream connection could not do.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    #[error("upstream '{name}' is not available: {reason}")]
    Unavailable {
        name: String,
        reason: String,
        #[source]
        cause: Option<Cause>,
    },
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
    /// `name` cannot be reached or started, for `reason`.
    pub fn unavailable(name: impl Into<String>, reason: impl Into<String>) -> Self {
        UpstreamError::Unavailable {
            name: name.into(),
            reason: reason.into(),
            cause: None,
        }
    }

    /// The same error, keeping the failure underneath it.
    pub fn because(mut self, error: impl std::error::Error + Send + Sync + 'static) -> Self {
        if let UpstreamError::Unavailable { cause, .. } = &mut self {
            *cause = Some(Arc::new(error));
        }
        self
    }

    /// What went wrong, without the upstream's name: for a status or a log line that names
    /// the upstream already, or a reason another error about it wraps (no repeated prefix).
    pub fn detail(&self) -> String {
        match self {
            UpstreamError::Unavailable { reason, .. }
            | UpstreamError::Closed { reason, .. }
            | UpstreamError::Overloaded { reason, .. } => reason.clone(),
            UpstreamError::Timeout { secs, .. } => format!("no answer within {secs} s"),
            UpstreamError::Http { status, detail, .. } => format!("HTTP {status}: {detail}"),
            UpstreamError::Protocol { detail, .. } => format!("protocol error: {detail}"),
        }
    }

    /// Always an upstream, by id.
    pub fn side(&self) -> Side {
        Side::Upstream(self.upstream().to_string())
    }

    /// Whether the same request may succeed later.
    pub fn retry(&self) -> Retry {
        match self {
            UpstreamError::Unavailable { .. }
            | UpstreamError::Closed { .. }
            | UpstreamError::Timeout { .. }
            | UpstreamError::Overloaded { .. } => Retry::Later,
            UpstreamError::Http { status, .. } if *status >= 500 || *status == 408 || *status == 429 => {
                Retry::Later
            }
            UpstreamError::Http { .. } | UpstreamError::Protocol { .. } => Retry::Never,
        }
    }

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

/// Why the pipeline answers a host request with an error itself (the request reached a method).
#[derive(Debug, Clone, thiserror::Error)]
pub enum RequestError {
    #[error("params must be an object")]
    ParamsNotObject,
    #[error("params.{0} is required")]
    MissingParam(&'static str),
    #[error("params.{name} must be {expected}")]
    WrongParam {
        name: &'static str,
        expected: &'static str,
    },
    #[error("Unknown {what}: {}", clip(.name))]
    UnknownName { what: &'static str, name: String },
    #[error("Resource not found: no upstream lists {:?} or has a template that matches it (a namespaced upstream's resource is read as mcpmux://{{namespace}}/{{its uri}})", clip(.uri))]
    ResourceNotFound { uri: String },
    #[error("Resource {:?} is offered by several upstreams; read it as one of: {}", clip(.uri), .candidates.join(", "))]
    AmbiguousUri { uri: String, candidates: Vec<String> },
    #[error("unknown completion reference")]
    UnknownReference,
    #[error("invalid cursor")]
    InvalidCursor,
    #[error("invalid log level {0:?}")]
    InvalidLogLevel(String),
    #[error("Method not found: {}", clip(.0))]
    MethodNotFound(String),
    #[error("session already initialized")]
    AlreadyInitialized,
    #[error("mcpmux: this session already has {0} requests in flight (gateway.max_in_flight_per_session)")]
    SessionBusy(usize),
    #[error("mcpmux: this request needs a session")]
    NoSession,
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// An upstream refused something mcpmux asked on the host's behalf.
    #[error("{0}")]
    Refused(String),
    /// mcpmux is stopping and the call was still running when the drain ended (at
    /// `gateway.drain_timeout_secs`, the value given, or earlier on a second signal).
    #[error("mcpmux is shutting down: the call was still running when the drain ended (gateway.drain_timeout_secs = {0})")]
    DrainTimedOut(u64),
    /// `[pinning] mode = "block"`: the tool's definition changed since it was pinned (the
    /// message names the server, the tool, the lock, what changed and how to approve).
    #[error("{0}")]
    ToolDrifted(String),
}

impl RequestError {
    /// The JSON-RPC code a host sees.
    pub fn code(&self) -> i64 {
        match self {
            RequestError::ParamsNotObject
            | RequestError::MissingParam(_)
            | RequestError::WrongParam { .. }
            | RequestError::AmbiguousUri { .. }
            | RequestError::UnknownName { .. }
            | RequestError::UnknownReference
            | RequestError::InvalidCursor
            | RequestError::InvalidLogLevel(_) => codes::INVALID_PARAMS,
            RequestError::ResourceNotFound { .. } => codes::RESOURCE_NOT_FOUND,
            RequestError::MethodNotFound(_) => codes::METHOD_NOT_FOUND,
            RequestError::AlreadyInitialized => codes::INVALID_REQUEST,
            RequestError::SessionBusy(_) => codes::OVERLOADED,
            RequestError::NoSession | RequestError::Refused(_) => codes::INTERNAL_ERROR,
            RequestError::DrainTimedOut(_) | RequestError::ToolDrifted(_) => codes::UPSTREAM_UNAVAILABLE,
            RequestError::Upstream(error) => error.code(),
        }
    }

    /// Where it comes from.
    pub fn side(&self) -> Side {
        match self {
            RequestError::Upstream(error) => error.side(),
            RequestError::NoSession | RequestError::DrainTimedOut(_) => Side::Internal,
            _ => Side::Host,
        }
    }

    /// Whether the same request may succeed later.
    pub fn retry(&self) -> Retry {
        match self {
            RequestError::Upstream(error) => error.retry(),
            RequestError::SessionBusy(_) | RequestError::Refused(_) | RequestError::DrainTimedOut(_) => {
                Retry::Later
            }
            _ => Retry::Never,
        }
    }

    /// The error object of the answer.
    pub fn to_error_object(&self) -> Box<serde_json::value::RawValue> {
        match self {
            RequestError::Upstream(error) => error.to_error_object(),
            RequestError::ResourceNotFound { uri } => {
                let data = serde_json::json!({ "uri": clip(uri) });
                crate::protocol::message::error_object(self.code(), &self.to_string(), Some(&data))
            }
            RequestError::AmbiguousUri { uri, candidates } => {
                let data = serde_json::json!({ "uri": clip(uri), "candidates": candidates });
                crate::protocol::message::error_object(self.code(), &self.to_string(), Some(&data))
            }
            _ => crate::protocol::message::error_object(self.code(), &self.to_string(), None),
        }
    }

    /// The answer to request `id`.
    pub fn reply(&self, id: crate::protocol::RequestId) -> crate::protocol::Message {
        crate::protocol::Message::Response {
            id: Some(id),
            payload: crate::protocol::ResponsePayload::Error(self.to_error_object()),
        }
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
    /// No credential, or one that is not valid here; `challenge` is the `WWW-Authenticate` value.
    #[error("Unauthorized: {reason}")]
    Unauthorized { challenge: String, reason: String },
    /// A valid credential without every scope the operation needs (all named in `challenge`).
    #[error("Forbidden: insufficient scope: this operation needs the scopes {scopes}")]
    InsufficientScope { challenge: String, scopes: String },
    /// A credential sent the wrong way (a token in the query string, a malformed header).
    #[error("Bad Request: {reason}")]
    AuthBadRequest { challenge: String, reason: String },
    /// The principal is over the `rate_limit` of `[[policy]]` rule `rule` (429 with
    /// `Retry-After: retry_after_secs`; several limits refusing: the one with the longest wait).
    #[error(
        "Too Many Requests: rate limit {limit} of policy[{rule}] exceeded; retry after {retry_after_secs} s"
    )]
    RateLimited {
        rule: usize,
        limit: crate::config::RateLimit,
        retry_after_secs: u64,
    },
    /// So many principals are rate limited at once that there is no room to track another one
    /// until a bucket refills (503 with `Retry-After`).
    #[error(
        "Service Unavailable: too many principals are rate limited at once; retry after {retry_after_secs} s"
    )]
    RateLimiterFull { retry_after_secs: u64 },
    /// The replica a request was forwarded to (the session's home) failed after it was sent:
    /// the connection broke or it did not answer in time (502; 504 for `timed_out`).
    #[error("{}: the session's home replica {reason}", if *timed_out { "Gateway Timeout" } else { "Bad Gateway" })]
    HomeReplica { reason: String, timed_out: bool },
}

impl DownstreamError {
    /// The host's request, except when mcpmux is out of room for it.
    pub fn side(&self) -> Side {
        match self {
            DownstreamError::Unavailable(_)
            | DownstreamError::RateLimiterFull { .. }
            | DownstreamError::HomeReplica { .. } => Side::Internal,
            _ => Side::Host,
        }
    }

    /// Only a gateway out of room, or a principal over its rate limit, may send the same
    /// request later.
    pub fn retry(&self) -> Retry {
        match self {
            DownstreamError::Unavailable(_)
            | DownstreamError::RateLimited { .. }
            | DownstreamError::RateLimiterFull { .. } => Retry::Later,
            _ => Retry::Never,
        }
    }

    /// Whole seconds before the same request may pass (`Retry-After`), for the refusals that
    /// have one.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            DownstreamError::RateLimited { retry_after_secs, .. }
            | DownstreamError::RateLimiterFull { retry_after_secs } => Some(*retry_after_secs),
            _ => None,
        }
    }

    /// The HTTP status for this refusal.
    pub fn status(&self) -> StatusCode {
        match self {
            DownstreamError::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            DownstreamError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            DownstreamError::BadRequest(_)
            | DownstreamError::MissingSession
            | DownstreamError::Parse(_)
            | DownstreamError::AuthBadRequest { .. } => StatusCode::BAD_REQUEST,
            DownstreamError::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            DownstreamError::InsufficientScope { .. } => StatusCode::FORBIDDEN,
            DownstreamError::UnknownSession => StatusCode::NOT_FOUND,
            DownstreamError::Forbidden(_) => StatusCode::FORBIDDEN,
            DownstreamError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            DownstreamError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            DownstreamError::Conflict(_) => StatusCode::CONFLICT,
            DownstreamError::Unavailable(_) | DownstreamError::RateLimiterFull { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            DownstreamError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            DownstreamError::HomeReplica { timed_out: false, .. } => StatusCode::BAD_GATEWAY,
            DownstreamError::HomeReplica { timed_out: true, .. } => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    /// The JSON-RPC code of the id-less error body that accompanies the status.
    pub fn code(&self) -> i64 {
        match self {
            DownstreamError::Parse(_) => codes::PARSE_ERROR,
            DownstreamError::UnknownSession => codes::INVALID_REQUEST,
            DownstreamError::RateLimited { .. } => codes::RATE_LIMITED,
            DownstreamError::RateLimiterFull { .. } => codes::OVERLOADED,
            DownstreamError::HomeReplica { .. } => codes::UPSTREAM_UNAVAILABLE,
            _ => codes::INVALID_REQUEST,
        }
    }

    /// The error's `data`: which limit and when to retry, for a rate limit refusal.
    fn data(&self) -> Option<serde_json::Value> {
        match self {
            DownstreamError::RateLimited {
                rule,
                limit,
                retry_after_secs,
            } => Some(serde_json::json!({
                "retryAfter": retry_after_secs,
                "rateLimit": limit.to_string(),
                "policy": rule,
            })),
            DownstreamError::RateLimiterFull { retry_after_secs } => {
                Some(serde_json::json!({ "retryAfter": retry_after_secs }))
            }
            _ => None,
        }
    }

    /// The JSON-RPC error response to `id` (`None`: the refusal is not about one request).
    pub fn response(&self, id: Option<crate::protocol::RequestId>) -> crate::protocol::Message {
        crate::protocol::Message::Response {
            id,
            payload: crate::protocol::ResponsePayload::Error(crate::protocol::message::error_object(
                self.code(),
                &self.to_string(),
                self.data().as_ref(),
            )),
        }
    }
}

impl DownstreamError {
    /// The HTTP answer for this refusal: its status and an id-less JSON-RPC error body (405
    /// says which methods are allowed; 401, 403 for scope and a refused credential carry their
    /// `WWW-Authenticate` challenge; 429 and a full rate limiter their `Retry-After`).
    pub fn into_http(self) -> Response {
        self.into_http_for(None)
    }

    /// The JSON-RPC error answering request `id` (where one reply cannot set the HTTP status:
    /// a batch, a legacy SSE stream).
    pub fn reply(&self, id: crate::protocol::RequestId) -> crate::protocol::Message {
        self.response(Some(id))
    }

    /// [`DownstreamError::into_http`] answering request `id` (a refusal of one parsed request).
    pub fn into_http_for(self, id: Option<crate::protocol::RequestId>) -> Response {
        let status = self.status();
        let body = self.response(id).to_json();
        let mut resp = json_text(status, body);
        if let Some(secs) = self.retry_after_secs() {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if status == StatusCode::METHOD_NOT_ALLOWED {
            resp.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
        }
        if let DownstreamError::Unauthorized { challenge, .. }
        | DownstreamError::InsufficientScope { challenge, .. }
        | DownstreamError::AuthBadRequest { challenge, .. } = &self
        {
            if let Ok(value) = HeaderValue::from_str(challenge) {
                resp.headers_mut().insert(header::WWW_AUTHENTICATE, value);
            }
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
    /// `hint` says what to do about it (empty when there is nothing to say).
    #[error("cannot listen on {addr}: {source}{hint}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
        hint: String,
    },
    #[error("server error: {0}")]
    Serve(std::io::Error),
    /// The audit log cannot be opened or continued.
    #[error("audit log: {0}")]
    Audit(String),
    /// The vault of upstream grants cannot be opened (its key file, its folder).
    #[error("{0}")]
    Vault(String),
    /// The pinning lock file (`[pinning]`) cannot be read.
    #[error("{0}")]
    Pinning(String),
    /// A file of `gateway.tls` cannot be used (the message names it and says why).
    #[error("{0}")]
    Tls(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn errors_say_their_side_their_retry_class_and_their_cause() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let down = UpstreamError::unavailable("docs", "request failed: refused").because(refused);
        assert_eq!(down.side(), Side::Upstream("docs".into()));
        assert_eq!(down.retry(), Retry::Later);
        assert_eq!(down.code(), codes::UPSTREAM_UNAVAILABLE);
        assert_eq!(down.source().map(|c| c.to_string()).as_deref(), Some("refused"));
        assert_eq!(
            down.to_string(),
            "upstream 'docs' is not available: request failed: refused"
        );
        assert_eq!(down.detail(), "request failed: refused");
        // Wrapping a failure's detail names the upstream once.
        let wrapped = UpstreamError::unavailable("docs", down.detail());
        assert_eq!(wrapped.to_string().matches("docs").count(), 1, "{wrapped}");
        let bad = UpstreamError::Http {
            name: "docs".into(),
            status: 401,
            detail: "no".into(),
        };
        assert_eq!(bad.retry(), Retry::Never);
        let busy = UpstreamError::Http {
            name: "docs".into(),
            status: 503,
            detail: "busy".into(),
        };
        assert_eq!(busy.retry(), Retry::Later);
        assert_eq!(DownstreamError::UnknownSession.side(), Side::Host);
        assert_eq!(DownstreamError::UnknownSession.retry(), Retry::Never);
        assert_eq!(DownstreamError::Unavailable("full").side(), Side::Internal);
    }

    #[test]
    fn the_pipelines_refusals_are_mapped_here() {
        let id = crate::protocol::RequestId::number(7);
        let missing = RequestError::MissingParam("name").reply(id.clone()).to_json();
        assert_eq!(
            missing,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"params.name is required"}}"#
        );
        let gone = RequestError::ResourceNotFound { uri: "x://a".into() };
        assert!(gone
            .reply(id.clone())
            .to_json()
            .contains(r#""code":-32002,"message":"Resource not found: no upstream lists \"x://a\""#));
        let long = RequestError::MethodNotFound("m".repeat(1 << 20))
            .reply(id.clone())
            .to_json();
        assert!(long.len() < 300 && long.contains("mmm…"), "{long}");
        let busy = RequestError::SessionBusy(64);
        assert_eq!(
            (busy.code(), busy.retry(), busy.side()),
            (codes::OVERLOADED, Retry::Later, Side::Host)
        );
        let down = RequestError::from(UpstreamError::unavailable("t", "not connected"));
        assert_eq!(
            (down.code(), down.side()),
            (codes::UPSTREAM_UNAVAILABLE, Side::Upstream("t".into()))
        );
        assert!(down.reply(id).to_json().contains(r#""data":{"upstream":"t"}"#));
    }

    #[test]
    fn a_rate_limit_is_429_with_retry_after_and_a_json_rpc_error_naming_the_limit() {
        let limit = crate::config::RateLimit::parse("600/min").expect("a limit");
        let refusal = DownstreamError::RateLimited {
            rule: 2,
            limit,
            retry_after_secs: 7,
        };
        assert_eq!((refusal.side(), refusal.retry()), (Side::Host, Retry::Later));
        let id = crate::protocol::RequestId::number(9);
        let reply = refusal.reply(id.clone()).to_json();
        let resp = refusal.into_http_for(Some(id));
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "7");
        assert_eq!(
            reply,
            r#"{"jsonrpc":"2.0","id":9,"error":{"code":-32004,"message":"Too Many Requests: rate limit 600/min of policy[2] exceeded; retry after 7 s","data":{"retryAfter":7,"rateLimit":"600/min","policy":2}}}"#
        );
        let full = DownstreamError::RateLimiterFull { retry_after_secs: 3 }.into_http();
        assert_eq!(full.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(full.headers()[header::RETRY_AFTER], "3");
    }
}
