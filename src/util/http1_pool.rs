//! Keep-alive HTTP/1.1 connections to one plain-HTTP origin, shared by everything in the
//! process that talks to that host and port (the pool is found when an endpoint is made, not
//! per request). A request takes the most recently used idle connection, or opens one; the
//! connection goes back when the response body has been read to its end, so a long SSE reply
//! never holds up another request. hyper-util's pooled client does the same with a pool-key
//! hash, a checkout future and a URL rewrite per request: a tenth of relaying a call to an
//! HTTP upstream (callgrind, docs/profiling.md). HTTPS and proxied origins keep that client.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

type Sender = SendRequest<Full<Bytes>>;

/// At most this many idle connections are kept per origin; more are closed once done.
const MAX_IDLE: usize = 64;

/// The idle connections to one origin.
pub struct Http1Pool {
    host: String,
    port: u16,
    connect_timeout: Duration,
    idle_timeout: Duration,
    /// Oldest first; taken from the end.
    idle: Mutex<Vec<(Sender, Instant)>>,
}

/// Why a request got no response.
#[derive(Debug)]
pub enum PoolError {
    /// No connection could be opened.
    Connect(std::io::Error),
    /// Opening a connection took longer than the connect timeout.
    ConnectTimeout(Duration),
    /// The request failed on its connection.
    Http(hyper::Error),
}

impl std::fmt::Display for PoolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PoolError::Connect(_) => f.write_str("cannot connect"),
            PoolError::ConnectTimeout(limit) => write!(f, "no connection within {} s", limit.as_secs()),
            PoolError::Http(_) => f.write_str("the request failed"),
        }
    }
}

impl std::error::Error for PoolError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PoolError::Connect(err) => Some(err),
            PoolError::ConnectTimeout(_) => None,
            PoolError::Http(err) => Some(err),
        }
    }
}

impl Http1Pool {
    /// The pool of `host`:`port` (an IP literal without brackets, or a name), made on first use
    /// with these timeouts; later callers share it whatever timeouts they ask for.
    pub fn of(host: &str, port: u16, connect_timeout: Duration, idle_timeout: Duration) -> Arc<Http1Pool> {
        static POOLS: Mutex<Vec<Weak<Http1Pool>>> = Mutex::new(Vec::new());
        let mut pools = POOLS.lock();
        pools.retain(|pool| pool.strong_count() > 0);
        let known = pools.iter().filter_map(Weak::upgrade);
        if let Some(pool) = known.into_iter().find(|p| p.host == host && p.port == port) {
            return pool;
        }
        let pool = Arc::new(Http1Pool {
            host: host.to_string(),
            port,
            connect_timeout,
            idle_timeout,
            idle: Mutex::new(Vec::new()),
        });
        pools.push(Arc::downgrade(&pool));
        pool
    }

    /// Send `req` (origin-form URI, `Host` set) on an idle connection or a new one. A request
    /// that an idle connection could not take (the server closed it since) goes on another.
    pub async fn send(
        self: &Arc<Self>,
        mut req: http::Request<Full<Bytes>>,
    ) -> Result<http::Response<PooledBody>, PoolError> {
        while let Some(mut sender) = self.take_idle() {
            if sender.ready().await.is_err() {
                continue;
            }
            match sender.try_send_request(req).await {
                Ok(resp) => return Ok(self.hand_back_after(resp, sender)),
                Err(mut refused) => match refused.take_message() {
                    Some(unsent) => req = unsent,
                    None => return Err(PoolError::Http(refused.into_error())),
                },
            }
        }
        let mut sender = self.connect().await?;
        match sender.send_request(req).await {
            Ok(resp) => Ok(self.hand_back_after(resp, sender)),
            Err(err) => Err(PoolError::Http(err)),
        }
    }

    /// The most recently used idle connection still open and not idle too long.
    fn take_idle(&self) -> Option<Sender> {
        let mut idle = self.idle.lock();
        while let Some((sender, since)) = idle.pop() {
            if !sender.is_closed() && since.elapsed() < self.idle_timeout {
                return Some(sender);
            }
        }
        None
    }

    /// A connection whose response was read to its end, back among the idle ones.
    fn check_in(&self, sender: Sender) {
        if sender.is_closed() {
            return;
        }
        let now = Instant::now();
        let mut idle = self.idle.lock();
        let stale = |(s, since): &(Sender, Instant)| s.is_closed() || now - *since >= self.idle_timeout;
        if idle.first().is_some_and(stale) {
            idle.retain(|entry| !stale(entry));
        }
        if idle.len() < MAX_IDLE {
            idle.push((sender, now));
        }
    }

    fn hand_back_after(
        self: &Arc<Self>,
        resp: http::Response<Incoming>,
        sender: Sender,
    ) -> http::Response<PooledBody> {
        resp.map(|body| {
            let mut pooled = PooledBody {
                body,
                back: Some((self.clone(), sender)),
            };
            // An empty body (a 202) is at its end already.
            pooled.hand_back_if_done();
            pooled
        })
    }

    async fn connect(&self) -> Result<Sender, PoolError> {
        let connect = tokio::net::TcpStream::connect((self.host.as_str(), self.port));
        let stream = match tokio::time::timeout(self.connect_timeout, connect).await {
            Ok(stream) => stream.map_err(PoolError::Connect)?,
            Err(_) => return Err(PoolError::ConnectTimeout(self.connect_timeout)),
        };
        // Small JSON-RPC frames: send each at once.
        let _ = stream.set_nodelay(true);
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(PoolError::Http)?;
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(err = %super::http_client::error_chain(&err), "upstream HTTP connection ended");
            }
        });
        Ok(sender)
    }
}

/// A response body that hands its connection back to the pool once read to its end (dropped
/// before that, the connection closes with it).
pub struct PooledBody {
    body: Incoming,
    back: Option<(Arc<Http1Pool>, Sender)>,
}

impl PooledBody {
    /// Hand the connection back (once).
    fn hand_back(&mut self) {
        if let Some((pool, sender)) = self.back.take() {
            pool.check_in(sender);
        }
    }

    fn hand_back_if_done(&mut self) {
        if self.body.is_end_stream() {
            self.hand_back();
        }
    }
}

impl Body for PooledBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => self.hand_back(),
            Poll::Ready(Some(Ok(_))) => self.hand_back_if_done(),
            // An error or a pending read: the connection is not handed back (yet).
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
#[path = "http1_pool_tests.rs"]
mod tests;
