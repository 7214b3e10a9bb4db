//! Authentication as a tower layer around every host face: the bearer credential is checked
//! before any handler (or body read) runs, the [`Principal`] goes into the request's extensions,
//! and the `Authorization` header is removed so nothing behind can forward or log it. The
//! authenticator is the one in force when the request arrives ([`AuthInForce`]: a reload adding,
//! changing or removing `[auth]` applies to the next request); with none, requests pass.
//! A client certificate the listener verified (`gateway.tls.client_ca`) is a credential too:
//! alone it admits as `cert:<subject>`, with or without `[auth]`; beside a bearer credential
//! the bearer's principal admits, carrying the certificate's subject.
//!
//! A refused request's body is read (a bounded amount, for a bounded time) and dropped before
//! the refusal is sent: the connection then stays usable. Unread, the server would close it
//! right after the refusal, without `Connection: close`, and a client that writes its body
//! after the headers and reuses the connection (httpx, which the Python SDK uses, does both)
//! loses its next request: the metadata fetch that follows a 401.

use super::challenge::{refusal, Failure};
use super::{AuthInForce, Authenticator, Principal};
use crate::tls::identity::ClientCertificate;
use axum::body::Body;
use axum::response::Response;
use futures_util::future::BoxFuture;
use http::{header, HeaderValue, Request};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower::{Layer, Service};

/// How much of a refused request's body is read so the connection can serve the next request.
pub const DRAIN_LIMIT: usize = 64 * 1024;
/// How long reading it may take.
pub const DRAIN_TIME: Duration = Duration::from_secs(2);

/// Authenticates each request with the [`Authenticator`] in force.
#[derive(Clone)]
pub struct AuthLayer {
    auth: Arc<AuthInForce>,
    profiles: Option<super::metadata::ProfileResources>,
    unserved: Option<UnservedPaths>,
}

/// Whether no host face is served at a request path (it answers 404 to anyone).
pub type UnservedPaths = Arc<dyn Fn(&str) -> bool + Send + Sync>;

impl AuthLayer {
    /// Authenticate with `auth` always.
    pub fn new(auth: Arc<Authenticator>) -> Self {
        Self::in_force(Arc::new(AuthInForce::new(Some(auth))))
    }

    /// Authenticate with the authenticator `auth` holds when each request arrives.
    pub fn in_force(auth: Arc<AuthInForce>) -> Self {
        AuthLayer {
            auth,
            profiles: None,
            unserved: None,
        }
    }

    /// The same, its challenges on a profile's paths naming that profile's metadata, and the
    /// paths `unserved` names passed on unauthenticated (to their 404, not a 401: a path that
    /// serves nothing asks for no credentials; the handler there serves nothing without one).
    pub fn with_profiles(
        mut self,
        profiles: super::metadata::ProfileResources,
        unserved: UnservedPaths,
    ) -> Self {
        self.profiles = Some(profiles);
        self.unserved = Some(unserved);
        self
    }
}

impl<S> Layer<S> for AuthLayer {
    type Service = Authenticate<S>;

    fn layer(&self, inner: S) -> Authenticate<S> {
        Authenticate {
            inner,
            auth: self.auth.clone(),
            profiles: self.profiles.clone(),
            unserved: self.unserved.clone(),
        }
    }
}

/// The service [`AuthLayer`] makes.
#[derive(Clone)]
pub struct Authenticate<S> {
    inner: S,
    auth: Arc<AuthInForce>,
    profiles: Option<super::metadata::ProfileResources>,
    unserved: Option<UnservedPaths>,
}

impl<S> Service<Request<Body>> for Authenticate<S>
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
        let certificate = request.extensions_mut().remove::<ClientCertificate>();
        // Another replica authenticated the host and forwarded the request with the principal
        // in its passport (`cluster::receive`, the layer outside this one): the certificate on
        // this connection is that replica's, not the host's.
        let forwarded = request.extensions().get::<Arc<Principal>>().is_some();
        let Some(auth) = self.auth.current() else {
            // No `[auth]` in force: nobody is authenticated but by a client certificate (the
            // service polled ready serves the request at once: nothing to clone).
            if let Some(certificate) = certificate.as_ref().filter(|_| !forwarded) {
                let Some(principal) = super::certificate::principal(certificate) else {
                    return Box::pin(async move { Ok(refuse_nameless(request).await) });
                };
                request.extensions_mut().insert(principal);
            }
            return Box::pin(self.inner.call(request));
        };
        let unserved = self
            .unserved
            .as_ref()
            .is_some_and(|unserved| unserved(request.uri().path()));
        if unserved || forwarded {
            return Box::pin(self.inner.call(request));
        }
        // The service that was polled ready serves this request after authentication; a fresh
        // clone waits for the next.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        // A profile's paths: its resource is an audience there, and challenges name its metadata.
        let resource = (self.profiles.as_ref()).and_then(|resource_of| resource_of(request.uri().path()));
        let credential = bearer_token(&request);
        Box::pin(async move {
            let authenticated = match (credential, &certificate) {
                (Ok(token), _) => (authenticate(&auth, &token, resource.as_deref()).await)
                    .map(|principal| super::certificate::beside(principal, certificate.as_ref())),
                // The certificate alone: no bearer credential to check.
                (Err(Failure::NoCredentials), Some(certificate)) => {
                    match super::certificate::principal(certificate) {
                        Some(principal) => Ok(principal),
                        None => return Ok(refuse_nameless(request).await),
                    }
                }
                (Err(failure), _) => Err(failure),
            };
            match authenticated {
                Ok(principal) => {
                    tracing::debug!(principal = %principal.name, "authenticated");
                    request.headers_mut().remove(header::AUTHORIZATION);
                    request.extensions_mut().insert(principal);
                    inner.call(request).await
                }
                Err(failure) => {
                    crate::telemetry::record::refused(crate::telemetry::Refusal::Auth);
                    log_refusal(&failure, request.uri().path());
                    let challenge = auth.challenge_at(resource.as_deref(), &failure);
                    let response = refusal(&failure, challenge).into_http();
                    Ok(after_reading_body(request, response).await)
                }
            }
        })
    }
}

/// A verified client certificate that names nobody: 403, whatever else the request carries.
async fn refuse_nameless(request: Request<Body>) -> Response {
    crate::telemetry::record::refused(crate::telemetry::Refusal::Auth);
    let peer =
        crate::telemetry::peer::current().map_or_else(|| "unknown".to_string(), |peer| peer.to_string());
    tracing::warn!(%peer, "authentication refused: {}", super::certificate::NAMELESS);
    let response = crate::error::DownstreamError::Forbidden(super::certificate::NAMELESS).into_http();
    after_reading_body(request, response).await
}

/// One line per refused request, for people: why, which path and which peer (the connection's
/// socket address); never the token. A request without credentials is the first step of every
/// OAuth sign-in, so it is a debug line only.
fn log_refusal(failure: &Failure, path: &str) {
    let peer =
        crate::telemetry::peer::current().map_or_else(|| "unknown".to_string(), |peer| peer.to_string());
    let path = crate::util::text::clip(path);
    match failure {
        Failure::NoCredentials => tracing::debug!(%peer, %path, "no credentials"),
        other => tracing::warn!(%peer, %path, "authentication refused: {}", refusal_reason(other)),
    }
}

/// Why `failure` refused a request, in words.
fn refusal_reason(failure: &Failure) -> String {
    match failure {
        Failure::NoCredentials => "no bearer token".into(),
        Failure::InvalidToken(why) => format!("invalid token ({why})"),
        Failure::InsufficientScope(scopes) => {
            format!("the token lacks the scopes {}", scopes.join(", "))
        }
        Failure::InvalidRequest(why) => format!("malformed request ({why})"),
        Failure::Unavailable(why) => format!("tokens cannot be checked now ({why})"),
    }
}

/// `response` once `request`'s body has been read and dropped; with `Connection: close` when
/// it is not read (over [`DRAIN_LIMIT`], slower than [`DRAIN_TIME`], or held back for a
/// `100-continue` the refusal answers), so a client does not send its next request on it.
async fn after_reading_body(request: Request<Body>, mut response: Response) -> Response {
    let expects_continue = (request.headers().get(header::EXPECT))
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let read = !expects_continue
        && matches!(
            tokio::time::timeout(DRAIN_TIME, axum::body::to_bytes(request.into_body(), DRAIN_LIMIT)).await,
            Ok(Ok(_))
        );
    if !read {
        (response.headers_mut()).insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// The principal of a bearer token, holding the required scopes, for a request to the endpoint
/// whose resource URL is `resource` (a profile's; `None`: the main endpoint).
pub async fn authenticate(
    auth: &Authenticator,
    token: &str,
    resource: Option<&str>,
) -> Result<Arc<Principal>, Failure> {
    let principal = auth.verify_for(token, resource).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use axum::routing::{get, post};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// What a client reads on `stream` until `want` has arrived, the server closes, or 5 s pass.
    async fn read_until(stream: &mut tokio::net::TcpStream, want: &str) -> String {
        let mut text = String::new();
        let mut buf = [0u8; 4096];
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !text.contains(want) {
            match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => text.push_str(&String::from_utf8_lossy(&buf[..n])),
                _ => break,
            }
        }
        text
    }

    /// A client that writes the body after the headers (as httpx does) and then sends its next
    /// request on the same connection gets both answers: the 401, then the next one.
    #[tokio::test]
    async fn a_refused_request_leaves_its_connection_usable() {
        let text = "[gateway]\n[auth]\n[[auth.api_keys]]\nname = \"k\"\nkey = \"s3cret\"\n";
        let config = Config::from_toml_str(text, "t.toml", &|_| None).unwrap();
        let auth = Authenticator::from_config(&config).unwrap();
        let app = (axum::Router::new())
            .route("/mcp", post(|| async { "called" }))
            .layer(AuthLayer::new(auth))
            .route("/open", get(|| async { "opened" }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });

        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n";
        stream.write_all(head.as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Before the fix the server has closed the connection by now: these writes may fail.
        let _ = stream.write_all(b"{}").await;
        let _ = (stream.write_all(b"GET /open HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")).await;
        let answers = read_until(&mut stream, "opened").await;
        assert!(answers.starts_with("HTTP/1.1 401"), "{answers}");
        assert!(
            !answers.to_ascii_lowercase().contains("connection: close"),
            "{answers}"
        );
        assert!(
            answers.contains("HTTP/1.1 200") && answers.contains("opened"),
            "{answers}"
        );
    }

    /// A body too large to read is not read: the refusal says the connection closes.
    #[tokio::test]
    async fn a_refusal_whose_body_is_not_read_closes_the_connection() {
        let text = "[gateway]\n[auth]\n[[auth.api_keys]]\nname = \"k\"\nkey = \"s3cret\"\n";
        let config = Config::from_toml_str(text, "t.toml", &|_| None).unwrap();
        let auth = Authenticator::from_config(&config).unwrap();
        let inner = tower::service_fn(|_req: Request<Body>| async {
            Ok::<_, std::convert::Infallible>(Response::new(Body::empty()))
        });
        let big = Request::post("/mcp")
            .body(Body::from(vec![b' '; DRAIN_LIMIT + 1]))
            .unwrap();
        let small = Request::post("/mcp").body(Body::from("{}")).unwrap();
        let mut service = AuthLayer::new(auth).layer(inner);
        let closes = |r: &Response| r.headers().get(header::CONNECTION).is_some_and(|v| v == "close");
        let response = tower::ServiceExt::ready(&mut service)
            .await
            .unwrap()
            .call(big)
            .await
            .unwrap();
        assert_eq!(response.status(), 401);
        assert!(closes(&response));
        let response = tower::ServiceExt::ready(&mut service)
            .await
            .unwrap()
            .call(small)
            .await
            .unwrap();
        assert_eq!(response.status(), 401);
        assert!(!closes(&response));
    }
}
