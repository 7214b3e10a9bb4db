//! The DNS-rebinding defence as a tower layer: a request whose `Host` or `Origin` the
//! [`AccessPolicy`] refuses is answered 403 before any handler (or body read) runs. The policy
//! is asked for per request ([`PolicySource`]): a reload's `allowed_hosts` and `allowed_origins`
//! apply to the next one.

use super::origin::AccessPolicy;
use crate::error::DownstreamError;
use crate::util::text::clip;
use axum::response::{IntoResponse, Response};
use futures_util::future::{self, Either, Ready};
use http::{header, Request, StatusCode};
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::{Layer, Service};

/// How a refusal is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalBody {
    /// An id-less JSON-RPC error (the MCP faces).
    JsonRpc,
    /// `forbidden` as plain text (the operator endpoints).
    PlainText,
}

/// The rules in force for the next request.
pub type PolicySource = Arc<dyn Fn() -> Arc<AccessPolicy> + Send + Sync>;

/// Checks `Host` and `Origin` before the wrapped service.
#[derive(Clone)]
pub struct AccessLayer {
    policy: PolicySource,
    body: RefusalBody,
}

impl AccessLayer {
    /// Always the rules of `policy`.
    pub fn new(policy: AccessPolicy, body: RefusalBody) -> Self {
        let policy = Arc::new(policy);
        Self::in_force(Arc::new(move || policy.clone()), body)
    }

    /// The rules `policy` gives when each request arrives.
    pub fn in_force(policy: PolicySource, body: RefusalBody) -> Self {
        AccessLayer { policy, body }
    }
}

impl<S> Layer<S> for AccessLayer {
    type Service = Access<S>;

    fn layer(&self, inner: S) -> Access<S> {
        Access {
            inner,
            policy: self.policy.clone(),
            body: self.body,
        }
    }
}

/// The service [`AccessLayer`] makes.
#[derive(Clone)]
pub struct Access<S> {
    inner: S,
    policy: PolicySource,
    body: RefusalBody,
}

impl<S, B> Service<Request<B>> for Access<S>
where
    S: Service<Request<B>, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Either<Ready<Result<Response, S::Error>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        match (self.policy)().check(request.headers()) {
            Ok(()) => Either::Right(self.inner.call(request)),
            Err(refusal) => {
                log_refusal(&request, &refusal);
                Either::Left(future::ready(Ok(self.refuse(refusal))))
            }
        }
    }
}

/// One WARN line per refused request, with the (clipped) headers that decided it: an operator
/// whose host is refused sees why and which key admits it.
fn log_refusal<B>(request: &Request<B>, refusal: &DownstreamError) {
    crate::telemetry::record::refused(crate::telemetry::Refusal::Origin);
    let header = |name| {
        (request.headers().get(name))
            .map(|v| clip(&String::from_utf8_lossy(v.as_bytes())).into_owned())
            .unwrap_or_else(|| "-".into())
    };
    tracing::warn!(
        host = %header(header::HOST),
        origin = %header(header::ORIGIN),
        path = %clip(request.uri().path()),
        "refused: {refusal}"
    );
}

impl<S> Access<S> {
    /// The refusal, with `Connection: close`: its body is never read, and a client that goes on
    /// writing it must not take the connection for a fresh one.
    fn refuse(&self, refusal: DownstreamError) -> Response {
        let mut response = match self.body {
            RefusalBody::JsonRpc => refusal.into_http(),
            RefusalBody::PlainText => {
                let status = refusal.status();
                debug_assert_eq!(status, StatusCode::FORBIDDEN);
                (status, [(header::CONTENT_TYPE, "text/plain")], "forbidden\n").into_response()
            }
        };
        (response.headers_mut()).insert(header::CONNECTION, http::HeaderValue::from_static("close"));
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use tower::ServiceExt;

    fn layer(body: RefusalBody) -> AccessLayer {
        let config = Config::from_toml_str("", "t.toml", &|_| None).unwrap();
        AccessLayer::new(AccessPolicy::from_config(&config.gateway), body)
    }

    fn request(origin: &str) -> Request<()> {
        Request::builder()
            .uri("/mcp")
            .header(header::HOST, "127.0.0.1:8080")
            .header(header::ORIGIN, origin)
            .body(())
            .unwrap()
    }

    async fn status_of(body: RefusalBody, origin: &str) -> (StatusCode, String) {
        let inner = tower::service_fn(|_req: Request<()>| async {
            Ok::<_, std::convert::Infallible>(StatusCode::OK.into_response())
        });
        let response = layer(body).layer(inner).oneshot(request(origin)).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    /// A buffer the test's log lines are written to.
    #[derive(Clone, Default)]
    struct Lines(Arc<parking_lot::Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn each_refusal_is_logged_once_with_its_headers_clipped() {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let inner = tower::service_fn(|_req: Request<()>| async {
            Ok::<_, std::convert::Infallible>(StatusCode::OK.into_response())
        });
        let mut service = layer(RefusalBody::JsonRpc).layer(inner);
        let long_origin = format!("http://{}.example", "e".repeat(1000));
        tracing::subscriber::with_default(subscriber, || {
            drop(service.call(request(&long_origin)));
            drop(service.call(request("http://localhost:3000")));
        });
        let text = String::from_utf8(lines.0.lock().clone()).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.contains("WARN") && text.contains("gateway.allowed_origins"),
            "{text}"
        );
        assert!(
            text.contains("host=127.0.0.1:8080") && text.contains("eee…"),
            "{text}"
        );
        assert!(text.len() < 600, "the origin is clipped: {text}");
    }

    #[tokio::test]
    async fn a_refusal_closes_its_connection() {
        let inner = tower::service_fn(|_req: Request<()>| async {
            Ok::<_, std::convert::Infallible>(StatusCode::OK.into_response())
        });
        for body in [RefusalBody::JsonRpc, RefusalBody::PlainText] {
            let refused = layer(body)
                .layer(inner)
                .oneshot(request("http://evil.example"))
                .await
                .unwrap();
            assert_eq!(
                refused.headers().get(header::CONNECTION).map(|v| v.as_bytes()),
                Some(&b"close"[..])
            );
        }
        let served = layer(RefusalBody::JsonRpc)
            .layer(inner)
            .oneshot(request("http://localhost:3000"))
            .await
            .unwrap();
        assert!(served.headers().get(header::CONNECTION).is_none());
    }

    #[tokio::test]
    async fn a_foreign_origin_never_reaches_the_handler() {
        let (status, body) = status_of(RefusalBody::JsonRpc, "http://evil.example").await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert!(
            body.contains("\"code\":-32600")
                && body.contains("Origin not allowed")
                && body.contains("gateway.allowed_origins"),
            "{body}"
        );
        let (status, body) = status_of(RefusalBody::PlainText, "http://evil.example").await;
        assert_eq!((status, body.as_str()), (StatusCode::FORBIDDEN, "forbidden\n"));
        let (status, _) = status_of(RefusalBody::JsonRpc, "http://localhost:3000").await;
        assert_eq!(status, StatusCode::OK);
    }
}
