//! Authentication as a tower layer around every host face: the bearer credential is checked
//! before any handler (or body read) runs, the [`Principal`] goes into the request's extensions,
//! and the `Authorization` header is removed so nothing behind can forward or log it.

use super::challenge::{refusal, Failure};
use super::{Authenticator, Principal};
use axum::response::Response;
use futures_util::future::BoxFuture;
use http::{header, Request};
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::{Layer, Service};

/// Authenticates each request with an [`Authenticator`].
#[derive(Clone)]
pub struct AuthLayer {
    auth: Arc<Authenticator>,
}

impl AuthLayer {
    pub fn new(auth: Arc<Authenticator>) -> Self {
        AuthLayer { auth }
    }
}

impl<S> Layer<S> for AuthLayer {
    type Service = Authenticate<S>;

    fn layer(&self, inner: S) -> Authenticate<S> {
        Authenticate {
            inner,
            auth: self.auth.clone(),
        }
    }
}

/// The service [`AuthLayer`] makes.
#[derive(Clone)]
pub struct Authenticate<S> {
    inner: S,
    auth: Arc<Authenticator>,
}

impl<S, B> Service<Request<B>> for Authenticate<S>
where
    S: Service<Request<B>, Response = Response> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        // The service that was polled ready serves this request; a fresh clone waits for the next.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let auth = self.auth.clone();
        let credential = bearer_token(&request);
        Box::pin(async move {
            let authenticated = match credential {
                Ok(token) => authenticate(&auth, &token).await,
                Err(failure) => Err(failure),
            };
            match authenticated {
                Ok(principal) => {
                    tracing::debug!(principal = %principal.name, "authenticated");
                    request.headers_mut().remove(header::AUTHORIZATION);
                    request.extensions_mut().insert(Arc::new(principal));
                    inner.call(request).await
                }
                Err(failure) => {
                    match &failure {
                        Failure::NoCredentials => {
                            tracing::debug!(path = %request.uri().path(), "no credentials")
                        }
                        other => tracing::warn!(path = %request.uri().path(), "refused: {other:?}"),
                    }
                    let challenge = auth.challenge(&failure);
                    Ok(refusal(&failure, challenge).into_http())
                }
            }
        })
    }
}

/// The principal of a bearer token, holding the required scopes.
pub async fn authenticate(auth: &Authenticator, token: &str) -> Result<Principal, Failure> {
    let principal = auth.verify(token).await?;
    auth.check_required(&principal)?;
    Ok(principal)
}

/// The bearer token `request` carries in its one `Authorization` header.
pub fn bearer_token<B>(request: &Request<B>) -> Result<String, Failure> {
    if let Some(query) = request.uri().query() {
        if url::form_urlencoded::parse(query.as_bytes()).any(|(k, _)| k == "access_token") {
            return Err(Failure::InvalidRequest(
                "a token in the query string is refused; send it in the Authorization header".into(),
            ));
        }
    }
    let mut values = request.headers().get_all(header::AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Err(Failure::NoCredentials);
    };
    if values.next().is_some() {
        return Err(Failure::InvalidRequest(
            "more than one Authorization header".into(),
        ));
    }
    let value = value
        .to_str()
        .map_err(|_| Failure::InvalidRequest("the Authorization header is not ASCII".into()))?;
    let (scheme, token) = value.trim().split_once(' ').unwrap_or((value.trim(), ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        // Another scheme is no bearer credential at all (RFC 6750 §3.1: no error code).
        return Err(Failure::NoCredentials);
    }
    let token = token.trim();
    if token.is_empty() || token.contains(' ') {
        return Err(Failure::InvalidRequest(
            "the Authorization header must be `Bearer <token>`".into(),
        ));
    }
    Ok(token.to_string())
}
