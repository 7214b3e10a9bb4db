//! The receiving side of forwarding, as a tower layer outside authentication: a request that
//! carries a replica's passport is accepted when the passport opens under the cluster key for
//! this very request (its body is read, bounded, to check) and is fresh; the host's principal in it stands for the bearer token the forwarding replica checked
//! (the authentication layer keeps it), and the request is marked [`Forwarded`]. A passport that
//! does not open is refused (403): hosts never send one, so it is a forgery or a replica sealing
//! with a key this one does not have yet (a key rotation under way). Both refusals and, while
//! this replica stops, a 503 it answers to a forwarded request, say so in [`DECLINED_HEADER`]:
//! the forwarding replica then serves the request itself.

use super::passport::{binding, now_ms, Passport};
use super::{Forwarded, DECLINED_HEADER, PASSPORT_HEADER, SESSION_HEADER};
use crate::core::hub::Hub;
use crate::error::DownstreamError;
use axum::body::Body;
use axum::response::Response;
use futures_util::future::BoxFuture;
use http::{HeaderValue, Request, StatusCode};
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::{Layer, Service};

/// Accepts requests forwarded by other replicas.
#[derive(Clone)]
pub struct PassportLayer {
    hub: Arc<Hub>,
}

impl PassportLayer {
    pub fn new(hub: Arc<Hub>) -> Self {
        PassportLayer { hub }
    }
}

impl<S> Layer<S> for PassportLayer {
    type Service = CheckPassport<S>;

    fn layer(&self, inner: S) -> CheckPassport<S> {
        CheckPassport {
            inner,
            hub: self.hub.clone(),
        }
    }
}

/// The service [`PassportLayer`] makes.
#[derive(Clone)]
pub struct CheckPassport<S> {
    inner: S,
    hub: Arc<Hub>,
}

impl<S> Service<Request<Body>> for CheckPassport<S>
where
    S: Service<Request<Body>, Response = Response> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let Some(value) = request.headers_mut().remove(PASSPORT_HEADER) else {
            return Box::pin(inner.call(request));
        };
        let hub = self.hub.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let limit = hub.config().gateway.max_body_bytes;
            let Ok(body) = axum::body::to_bytes(body, limit).await else {
                return Ok(DownstreamError::PayloadTooLarge(limit).into_http());
            };
            let session = parts.headers.get(SESSION_HEADER).map(HeaderValue::as_bytes);
            let bound_to = binding(&parts.method, &parts.uri, session, &body);
            let opened = (value.to_str().ok())
                .ok_or(None)
                .and_then(|token| Passport::open(&hub.sealer, token, &bound_to, now_ms()).map_err(Some));
            let passport = match opened {
                Ok(passport) => passport,
                Err(why) => {
                    let why = why.map_or("not visible ASCII".to_string(), |w| w.to_string());
                    tracing::warn!(path = %parts.uri.path(), %why, "replica passport refused");
                    let mut refusal =
                        DownstreamError::Forbidden("a replica passport that does not open here").into_http();
                    (refusal.headers_mut()).insert(DECLINED_HEADER, HeaderValue::from_static("passport"));
                    return Ok(refusal);
                }
            };
            tracing::debug!(from = %passport.from, path = %parts.uri.path(), "request forwarded by a replica");
            let mut request = Request::from_parts(parts, Body::from(body));
            if let (Some(principal), Some(_)) = (passport.principal, &hub.auth) {
                request.extensions_mut().insert(Arc::new(principal));
            }
            request.extensions_mut().insert(Forwarded { from: passport.from });
            let mut response = inner.call(request).await?;
            if response.status() == StatusCode::SERVICE_UNAVAILABLE && hub.shutdown.is_cancelled() {
                (response.headers_mut()).insert(DECLINED_HEADER, HeaderValue::from_static("stopping"));
            }
            Ok(response)
        })
    }
}
