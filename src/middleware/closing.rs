//! Once a stop begins (`/readyz` answers 503), every answer carries `Connection: close`: a
//! balancer's kept-alive connections to this replica are closed one by one as their requests are
//! answered, so none is left idle for the balancer to send a request on at the moment the
//! listener closes (the request would be lost: the balancer cannot know it was not run). New
//! requests open new connections, which the balancer stops making once it sees `/readyz`.

use http::{header, HeaderValue, Request, Response};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio_util::sync::CancellationToken;
use tower::{Layer, Service};

/// Adds `Connection: close` to every answer once `stopping` fired.
#[derive(Clone)]
pub struct CloseWhenStopping {
    stopping: CancellationToken,
}

impl CloseWhenStopping {
    pub fn new(stopping: CancellationToken) -> Self {
        CloseWhenStopping { stopping }
    }
}

impl<S> Layer<S> for CloseWhenStopping {
    type Service = Closing<S>;

    fn layer(&self, inner: S) -> Closing<S> {
        Closing {
            inner,
            stopping: self.stopping.clone(),
        }
    }
}

/// The service [`CloseWhenStopping`] makes.
#[derive(Clone)]
pub struct Closing<S> {
    inner: S,
    stopping: CancellationToken,
}

impl<S, B, R> Service<Request<B>> for Closing<S>
where
    S: Service<Request<B>, Response = Response<R>>,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Answering<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        Answering {
            answer: self.inner.call(request),
            stopping: self.stopping.clone(),
        }
    }
}

pin_project_lite::pin_project! {
    /// The inner service's answer, marked `Connection: close` if a stop began meanwhile (a
    /// future of its own rather than a boxed one: no allocation per request).
    pub struct Answering<F> {
        #[pin]
        answer: F,
        stopping: CancellationToken,
    }
}

impl<F, R, E> Future for Answering<F>
where
    F: Future<Output = Result<Response<R>, E>>,
{
    type Output = Result<Response<R>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut response = std::task::ready!(this.answer.poll(cx))?;
        if this.stopping.is_cancelled() {
            (response.headers_mut()).insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        Poll::Ready(Ok(response))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    async fn answer(stopping: &CancellationToken) -> Response<()> {
        let service =
            CloseWhenStopping::new(stopping.clone()).layer(tower::service_fn(|_: Request<()>| async {
                Ok::<_, std::convert::Infallible>(Response::new(()))
            }));
        service.oneshot(Request::new(())).await.expect("infallible")
    }

    #[tokio::test]
    async fn answers_close_their_connection_once_a_stop_began() {
        let stopping = CancellationToken::new();
        assert!(answer(&stopping)
            .await
            .headers()
            .get(header::CONNECTION)
            .is_none());
        stopping.cancel();
        assert_eq!(answer(&stopping).await.headers()[header::CONNECTION], "close");
    }
}
