//! Each connection's requests served inside a task-local scope holding the peer's socket address
//! ([`crate::telemetry::peer`]), for the log lines that name it (an authentication refusal):
//! finding it costs nothing per request (no extension, no allocation).

use axum::extract::Request;
use axum::response::Response;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::task::{Context, Poll};
use tokio::task::futures::TaskLocalFuture;
use tower::Service;

use crate::telemetry::peer::scope;

/// `inner` serving the requests of one connection from `peer`.
#[derive(Clone)]
pub struct FromPeer<S> {
    inner: S,
    peer: SocketAddr,
}

impl<S> FromPeer<S> {
    pub fn new(inner: S, peer: SocketAddr) -> Self {
        FromPeer { inner, peer }
    }
}

impl<S> Service<Request> for FromPeer<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = TaskLocalFuture<SocketAddr, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        scope(self.peer, self.inner.call(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::peer::current;
    use tower::ServiceExt;

    #[tokio::test]
    async fn the_peer_is_known_while_its_request_is_served_only() {
        let peer: SocketAddr = "127.0.0.1:40123".parse().unwrap();
        let inner = tower::service_fn(|_req: Request| async {
            let mut response = Response::new(axum::body::Body::empty());
            if let Some(seen) = current() {
                let value = http::HeaderValue::from_str(&seen.to_string()).unwrap();
                response.headers_mut().insert("x-peer", value);
            }
            Ok::<_, Infallible>(response)
        });
        let request = Request::new(axum::body::Body::empty());
        let response = FromPeer::new(inner, peer).oneshot(request).await.unwrap();
        assert_eq!(response.headers()["x-peer"], "127.0.0.1:40123");
        assert_eq!(current(), None);
    }
}
