//! The forwarding side, as a tower layer inside authentication: a session-era request (it names
//! an `Mcp-Session-Id`) for a session this replica does not hold, whose sealed id names another
//! replica as its home, is sent there whole, so a cancellation, a progress notification or a
//! sampling answer reaches the replica running its call, and DELETE ends the session where it
//! lives. When the home cannot be reached (gone) or answers that it is stopping, the request is
//! served here instead: the handler takes the session over (`core::takeover`).
//!
//! A modern input-required retry whose call is parked on another replica is sent there too
//! (`retry_where_parked`). A request that another replica forwarded is never forwarded again.

use super::peer::{PeerError, Peers};
use super::relay::{call_id, relayed};
use super::{Forwarded, DECLINED_HEADER, SESSION_HEADER};
use crate::auth::Principal;
use crate::core::hub::Hub;
use crate::core::input_required::ParkedElsewhere;
use crate::core::request_state::PREFIX as STATE_PREFIX;
use crate::error::DownstreamError;
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::request::Parts;
use http::{Method, Request};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower::{Layer, Service};

/// How long the courtesy DELETE to a taken-over session's old home may take.
const DELETE_NOTICE_TIMEOUT: Duration = Duration::from_secs(5);

/// Forwards requests for sessions homed on other live replicas.
#[derive(Clone)]
pub struct ForwardLayer {
    hub: Arc<Hub>,
    peers: Arc<Peers>,
}

impl ForwardLayer {
    pub fn new(hub: Arc<Hub>, peers: Arc<Peers>) -> Self {
        ForwardLayer { hub, peers }
    }
}

impl<S> Layer<S> for ForwardLayer {
    type Service = Forward<S>;

    fn layer(&self, inner: S) -> Forward<S> {
        Forward {
            inner,
            hub: self.hub.clone(),
            peers: self.peers.clone(),
        }
    }
}

/// The service [`ForwardLayer`] makes.
#[derive(Clone)]
pub struct Forward<S> {
    inner: S,
    hub: Arc<Hub>,
    peers: Arc<Peers>,
}

/// Where a session-era request is served.
enum Route {
    /// Here: the session is held here, ended here, opened here, or its id does not open.
    Here,
    /// On its home replica, at this `advertise` URL.
    Home(String),
}

/// Where the session `id` (of `owner`) lives, as far as this replica can tell.
fn route(hub: &Hub, peers: &Peers, id: &str, owner: Option<&str>) -> Route {
    if hub.sessions.get(id).is_some() || hub.sessions.ended.contains(id) {
        return Route::Here;
    }
    match hub.session_ids.open(id, owner) {
        Ok(claims) if claims.home.url != peers.me() => Route::Home(claims.home.url),
        _ => Route::Here,
    }
}

impl<S> Service<Request<Body>> for Forward<S>
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

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        // The service polled ready serves the request; where it must wait in a future of its
        // own (forwarding), it is taken and a fresh clone waits for the next request.
        let forwarded = request.extensions().get::<Forwarded>().is_some();
        let on_endpoint = request.uri().path() == self.hub.config().gateway.path;
        let id = (request.headers().get(SESSION_HEADER))
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if !on_endpoint || forwarded {
            return Box::pin(self.inner.call(request));
        }
        let Some(id) = id else {
            if request.method() != Method::POST {
                return Box::pin(self.inner.call(request));
            }
            let (hub, peers) = (self.hub.clone(), self.peers.clone());
            return Box::pin(retry_where_parked(hub, peers, self.take_ready(), request));
        };
        let principal = request.extensions().get::<Arc<Principal>>().cloned();
        let owner = principal.as_ref().map(|p| p.owner());
        let (hub, peers) = (self.hub.clone(), self.peers.clone());
        match route(&hub, &peers, &id, owner.as_deref()) {
            Route::Here if request.method() == Method::DELETE => Box::pin(delete_everywhere(
                hub,
                peers,
                self.take_ready(),
                request,
                id,
                principal,
            )),
            Route::Here => Box::pin(self.inner.call(request)),
            Route::Home(home) => {
                let mut inner = self.take_ready();
                Box::pin(async move {
                    let (parts, body) = request.into_parts();
                    let body = match whole(&hub, body).await {
                        Ok(body) => body,
                        Err(refusal) => return Ok(refusal),
                    };
                    let call = call_id(&parts.method, &body);
                    match peers
                        .forward(&home, &parts, body.clone(), principal.as_deref())
                        .await
                    {
                        Ok(answer) if !answer.headers().contains_key(DECLINED_HEADER) => {
                            Ok(relayed(&hub, &parts.method, call, answer))
                        }
                        Ok(declined) => {
                            let why = declined
                                .headers()
                                .get(DECLINED_HEADER)
                                .and_then(|v| v.to_str().ok())
                                .unwrap_or("");
                            tracing::info!(session = %crate::util::ids::session_digest(&id), %home, %why, "the session's home declined the request; serving it here");
                            if why == "stopping" {
                                // Every session homed there is served here from now on.
                                peers.leaving(&home);
                            }
                            inner.call(Request::from_parts(parts, Body::from(body))).await
                        }
                        Err(PeerError::Unreachable(why)) => {
                            tracing::info!(session = %crate::util::ids::session_digest(&id), %home, %why, "the session's home is gone; serving it here");
                            inner.call(Request::from_parts(parts, Body::from(body))).await
                        }
                        Err(err) => {
                            tracing::warn!(session = %crate::util::ids::session_digest(&id), %home, %err, "forwarding to the session's home failed");
                            Ok(failed(err))
                        }
                    }
                })
            }
        }
    }
}

impl<S: Clone> Forward<S> {
    /// The service polled ready, for a future of its own; a fresh clone waits for the next.
    fn take_ready(&mut self) -> S {
        let clone = self.inner.clone();
        std::mem::replace(&mut self.inner, clone)
    }
}

/// A request's whole body (bounded by `gateway.max_body_bytes`), or the refusal (413).
async fn whole(hub: &Hub, body: Body) -> Result<Bytes, Response> {
    let limit = hub.config().gateway.max_body_bytes;
    (axum::body::to_bytes(body, limit).await).map_err(|_| DownstreamError::PayloadTooLarge(limit).into_http())
}

/// A request head to send again (a request's parts cannot be cloned whole: extensions).
fn head(method: Method, uri: &http::Uri, headers: &http::HeaderMap) -> Parts {
    let mut parts = Request::new(()).into_parts().0;
    parts.method = method;
    parts.uri = uri.clone();
    parts.headers = headers.clone();
    parts
}

/// The answer when the replica a request was sent to failed after it was sent (502, or 504
/// when it did not answer in time): the request may have run there, so it is not run here.
fn failed(err: PeerError) -> Response {
    let timed_out = matches!(err, PeerError::TimedOut);
    DownstreamError::HomeReplica {
        reason: err.to_string(),
        timed_out,
    }
    .into_http()
}

/// A POST without a session (a modern request): served here, unless it is an input-required
/// retry (its body holds mcpmux's own `requestState`) whose call is parked on another replica
/// (the answer says [`ParkedElsewhere`]): then it is sent there. If that replica is gone, so is
/// the call, and this replica's answer (the call finished or expired) stands.
async fn retry_where_parked<S>(
    hub: Arc<Hub>,
    peers: Arc<Peers>,
    mut inner: S,
    request: Request<Body>,
) -> Result<Response, S::Error>
where
    S: Service<Request<Body>, Response = Response> + Send + 'static,
    S::Future: Send + 'static,
{
    let (parts, body) = request.into_parts();
    let body = match whole(&hub, body).await {
        Ok(body) => body,
        Err(refusal) => return Ok(refusal),
    };
    if memchr::memmem::find(&body, STATE_PREFIX.as_bytes()).is_none() {
        return inner.call(Request::from_parts(parts, Body::from(body))).await;
    }
    let copy = head(parts.method.clone(), &parts.uri, &parts.headers);
    let principal = parts.extensions.get::<Arc<Principal>>().cloned();
    let here = inner
        .call(Request::from_parts(parts, Body::from(body.clone())))
        .await?;
    let Some(ParkedElsewhere(home)) = here.extensions().get::<ParkedElsewhere>().cloned() else {
        return Ok(here);
    };
    let call = call_id(&copy.method, &body);
    match peers.forward(&home, &copy, body, principal.as_deref()).await {
        Ok(answer) => Ok(relayed(&hub, &copy.method, call, answer)),
        Err(PeerError::Unreachable(why)) => {
            tracing::info!(%home, %why, "a retry's call was parked on a replica that is gone");
            Ok(here)
        }
        Err(err) => {
            tracing::warn!(%home, %err, "forwarding a retry to the replica of its call failed");
            Ok(failed(err))
        }
    }
}

/// DELETE of a session held here: ended here, and, when it was taken over from another replica,
/// the old home is told too (it may still hold the session, if it was only out of reach), so
/// the session ends on every replica that holds it. The notice is best-effort and bounded.
async fn delete_everywhere<S>(
    hub: Arc<Hub>,
    peers: Arc<Peers>,
    mut inner: S,
    request: Request<Body>,
    id: String,
    principal: Option<Arc<Principal>>,
) -> Result<Response, S::Error>
where
    S: Service<Request<Body>, Response = Response> + Send + 'static,
    S::Future: Send + 'static,
{
    let old_home = (hub.sessions.get(&id))
        .and_then(|s| s.taken_over_from().map(str::to_string))
        .filter(|home| home != peers.me());
    let notice = head(Method::DELETE, request.uri(), request.headers());
    let response = inner.call(request).await?;
    if let Some(home) = old_home.filter(|_| response.status().is_success()) {
        tokio::spawn(async move {
            let sent = peers.forward(&home, &notice, Bytes::new(), principal.as_deref());
            match tokio::time::timeout(DELETE_NOTICE_TIMEOUT, sent).await {
                Ok(Ok(answer)) => {
                    tracing::debug!(session = %crate::util::ids::session_digest(&id), %home, status = %answer.status(), "old home told of DELETE")
                }
                Ok(Err(err)) => {
                    tracing::debug!(session = %crate::util::ids::session_digest(&id), %home, %err, "old home not told of DELETE")
                }
                Err(_) => {
                    tracing::debug!(session = %crate::util::ids::session_digest(&id), %home, "old home did not answer the DELETE notice")
                }
            }
        });
    }
    Ok(response)
}
