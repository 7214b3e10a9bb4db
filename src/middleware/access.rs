//! The DNS-rebinding defence as a tower layer: a request whose `Host` or `Origin` the
//! [`AccessPolicy`] refuses is answered 403 before any handler (or body read) runs.

use super::origin::AccessPolicy;
use crate::error::DownstreamError;
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

/// Checks `Host` and `Origin` before the wrapped service.
#[derive(Clone)]
pub struct AccessLayer {
    policy: Arc<AccessPolicy>,
    body: RefusalBody,
}

impl AccessLayer {
    pub fn new(policy: AccessPolicy, body: RefusalBody) -> Self {
        AccessLayer {
            policy: Arc::new(policy),
            body,
        }
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
    policy: Arc<AccessPolicy>,
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
        match self.policy.check(request.headers()) {
            Ok(()) => Either::Right(self.inner.call(request)),
            Err(refusal) => Either::Left(future::ready(Ok(self.refuse(refusal)))),
        }
    }
}

impl<S> Access<S> {
    fn refuse(&self, refusal: DownstreamError) -> Response {
        match self.body {
            RefusalBody::JsonRpc => refusal.into_http(),
            RefusalBody::PlainText => {
                let status = refusal.status();
                debug_assert_eq!(status, StatusCode::FORBIDDEN);
                (status, [(header::CONTENT_TYPE, "text/plain")], "forbidden\n").into_response()
            }
        }
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

    #[tokio::test]
    async fn a_foreign_origin_never_reaches_the_handler() {
        let (status, body) = status_of(RefusalBody::JsonRpc, "http://evil.example").await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert!(
            body.contains("\"code\":-32600") && body.contains("Origin not allowed"),
            "{body}"
        );
        let (status, body) = status_of(RefusalBody::PlainText, "http://evil.example").await;
        assert_eq!((status, body.as_str()), (StatusCode::FORBIDDEN, "forbidden\n"));
        let (status, _) = status_of(RefusalBody::JsonRpc, "http://localhost:3000").await;
        assert_eq!(status, StatusCode::OK);
    }
}
