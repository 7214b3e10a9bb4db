//! The receiving side of forwarding, as a tower layer outside authentication: a request that
//! carries a replica's passport is accepted when the passport opens under the cluster key for
//! this very request (its body is read, bounded, to check) and is fresh; the host's principal in
//! it stands for the bearer token the forwarding replica checked (the authentication layer keeps
//! it), and the request is marked [`Forwarded`]. A passport that
//! does not open is refused (403): hosts never send one, so it is a forgery or a replica sealing
//! with a key this one does not have yet (a key rotation under way). Both refusals, a 503 it
//! answers to a forwarded request while it stops, and a 503 for a session it does not hold while
//! its upstreams are not ready yet (it restarted, and the session's id still names it as home),
//! say so in [`DECLINED_HEADER`]: the forwarding replica then serves the request itself.

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

/// Why a forwarded request is declined while this replica's upstreams are not ready.
const NOT_READY: &str = "this replica is starting: its upstreams are not ready";

/// When `request` names a session this replica does not hold (it would take it over) while its
/// upstreams are not ready by `gateway.ready_when`: how many are. The replica that forwarded it
/// holds or takes the session over instead of this one failing its calls.
fn not_ready_for(hub: &Hub, request: &Request<Body>) -> Option<String> {
    let id = (request.headers().get(SESSION_HEADER)).and_then(|v| v.to_str().ok())?;
    if hub.sessions.get(id).is_some() || hub.sessions.ended.contains(id) {
        return None;
    }
    match hub.upstreams_ready() {
        (true, _, _) => None,
        (false, ready, total) => Some(format!("{ready} of {total} upstream(s) ready")),
    }
}

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
        let Some(value) = request.headers_mut().remove(PASSPORT_HEADER) else {
            // Not forwarded: the service polled ready serves it at once.
            return Box::pin(self.inner.call(request));
        };
        // The service polled ready serves it once the passport is open; a fresh clone waits.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
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
            // Hosts are authenticated here by `[auth]` or by client certificates
            // (`gateway.tls.client_ca`): then the passport's principal is the host's.
            let authenticated = hub.auth.is_on() || hub.config().gateway.client_certificates();
            if let (Some(principal), true) = (passport.principal, authenticated) {
                request.extensions_mut().insert(Arc::new(principal));
            }
            if let Some(why) = not_ready_for(&hub, &request) {
                tracing::info!(from = %passport.from, %why, "declining a forwarded request: upstreams not ready");
                let mut refusal = DownstreamError::Unavailable(NOT_READY).into_http();
                (refusal.headers_mut()).insert(DECLINED_HEADER, HeaderValue::from_static("starting"));
                return Ok(refusal);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use tokio_util::sync::CancellationToken;
    use tower::ServiceExt;

    /// A hub whose one upstream is never started (so never ready), or one without upstreams.
    fn hub(servers: &str) -> Arc<Hub> {
        let text = format!("[cluster]\nkey = \"{}\"\n{servers}", "AQ".repeat(21) + "A=");
        let config = Config::from_toml_str(&text, "t.toml", &|_| None).expect("config");
        Hub::new(Arc::new(config), CancellationToken::new(), None).0
    }

    /// What a replica answers to a request another replica forwarded for `session`, its own
    /// handler answering 200.
    async fn forwarded_to(hub: &Arc<Hub>, session: &str) -> Response {
        let bound_to = binding(
            &http::Method::POST,
            &"/mcp".parse().expect("uri"),
            Some(session.as_bytes()),
            b"",
        );
        let passport = Passport::new(None, "http://127.0.0.1:1").seal(&hub.sealer, &bound_to);
        let request = Request::post("/mcp")
            .header(PASSPORT_HEADER, passport)
            .header("mcp-session-id", session)
            .body(Body::empty())
            .expect("request");
        let served = tower::service_fn(|_: Request<Body>| async {
            Ok::<_, std::convert::Infallible>(Response::new(Body::from("served")))
        });
        let service = PassportLayer::new(hub.clone()).layer(served);
        service.oneshot(request).await.expect("infallible")
    }

    #[tokio::test]
    async fn a_replica_whose_upstreams_are_not_ready_declines_a_session_it_does_not_hold() {
        let starting = hub("[servers.t]\ncommand = \"never-started\"\n");
        let answer = forwarded_to(&starting, "not-held-here").await;
        assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(answer.headers()[DECLINED_HEADER], "starting");

        // A session it holds is served (its calls were running here before), and so is any
        // session once the upstreams are ready (here: there are none).
        let held = starting.new_session("held".into(), "2025-11-25".into(), Default::default());
        starting.sessions.insert(held);
        assert_eq!(forwarded_to(&starting, "held").await.status(), StatusCode::OK);
        let ready = hub("");
        assert_eq!(
            forwarded_to(&ready, "not-held-here").await.status(),
            StatusCode::OK
        );
    }
}
