//! Requests between replicas: a host's request, forwarded whole to the replica that holds what
//! it needs (a session's home, a parked call's replica), with the forwarding replica's sealed
//! [`Passport`] in place of the host's credential. Hop-by-hop headers are dropped both ways;
//! everything else (`Host`, `Origin`, `Mcp-*`, `Last-Event-ID`, `traceparent`, the body) goes as
//! it came, and the answer streams back as it arrives (an SSE reply event by event).

use super::passport::{binding, Passport};
use super::{PASSPORT_HEADER, SESSION_HEADER};
use crate::auth::Principal;
use crate::seal::Sealer;
use crate::util::http_client::{error_chain, lean_client_with, LeanClient};
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use http_body_util::Full;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long reaching another replica may take before it counts as gone.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a replica may take to start answering a forwarded request (its answer is quick:
/// 202, a JSON reply within the reply window, or the head of an SSE stream).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an idle connection to another replica is kept. Short: a stopping replica answers
/// with `Connection: close` from the start of its stop, so the only connections it can close
/// under a request are those idle since before; kept under a second, none is left by the time
/// its listener closes (after `shutdown_delay_secs`), and a request is never sent on one.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_millis(900);
/// How long a replica found unreachable is not tried again: each session homed there is served
/// here at once instead of waiting for its own connect timeout.
pub const GONE_MEMORY: Duration = Duration::from_secs(5);
/// The most unreachable replicas remembered (more are forgotten oldest first).
const GONE_KEPT: usize = 256;

/// Headers that describe one connection, not the request (RFC 9110 §7.6.1). (With `[auth]`,
/// the host's `Authorization` was consumed by authentication; without it, it is the host's own
/// header and goes on: a modern `requestState` is bound to it.)
const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::CONTENT_LENGTH,
];

/// Why a forwarded request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// The replica could not be reached: nothing was sent, so the request may be served here.
    #[error("cannot be reached: {0}")]
    Unreachable(String),
    /// The request was sent and the exchange failed: it may have run there.
    #[error("failed mid-request: {0}")]
    Failed(String),
    /// The replica did not start answering within [`HEAD_TIMEOUT`].
    #[error("did not answer within {} s", HEAD_TIMEOUT.as_secs())]
    TimedOut,
}

/// The client this replica forwards with, and what it signs passports as.
pub struct Peers {
    client: Option<(LeanClient, LeanClient)>,
    sealer: Arc<Sealer>,
    /// This replica's `advertise` URL.
    me: String,
    /// Replicas found unreachable, and when.
    gone: Mutex<HashMap<String, Instant>>,
}

impl Peers {
    /// The replicas this one forwards to; with `tls` (this replica's `gateway.tls`, the others'
    /// too) they are reached over HTTPS trusting the bundled and the system's roots, and when
    /// they require client certificates (`client_ca`) this replica presents its own.
    pub fn new(sealer: Arc<Sealer>, me: String, tls: Option<&crate::tls::ServerFiles>) -> Peers {
        let config = match crate::tls::client::replica_client_config(tls) {
            Ok(config) => Some(config),
            Err(problem) => {
                tracing::error!(%problem, "the client towards the other replicas cannot use gateway.tls");
                None
            }
        };
        let client = |idle| lean_client_with(config.clone()?, None, CONNECT_TIMEOUT, idle);
        Peers {
            client: client(Some(POOL_IDLE_TIMEOUT)).zip(client(None)),
            sealer,
            me,
            gone: Mutex::new(HashMap::new()),
        }
    }

    /// When `home` was last found unreachable, if within [`GONE_MEMORY`].
    fn recently_gone(&self, home: &str) -> Option<Duration> {
        let gone = self.gone.lock();
        (gone.get(home).map(Instant::elapsed)).filter(|since| *since < GONE_MEMORY)
    }

    /// Remember that `home` said it is stopping: it is not sent requests for a while, as if
    /// unreachable (its sessions are served here).
    pub fn leaving(&self, home: &str) {
        self.mark(home, false);
    }

    /// Remember that `home` could not be reached (or forget it, once it answers).
    fn mark(&self, home: &str, reachable: bool) {
        let mut gone = self.gone.lock();
        if reachable {
            gone.remove(home);
            return;
        }
        if gone.len() >= GONE_KEPT {
            let oldest = gone.iter().min_by_key(|(_, at)| **at).map(|(url, _)| url.clone());
            oldest.map(|url| gone.remove(&url));
        }
        gone.insert(home.to_string(), Instant::now());
    }

    /// This replica's `advertise` URL.
    pub fn me(&self) -> &str {
        &self.me
    }

    /// Send the request (`parts` and its whole `body`) from `principal` to the replica at
    /// `home` (its `advertise` URL) and return its answer's head, the body streaming.
    pub async fn forward(
        &self,
        home: &str,
        parts: &Parts,
        body: Bytes,
        principal: Option<&Principal>,
    ) -> Result<Response, PeerError> {
        let (client, fresh) =
            (self.client.as_ref()).ok_or_else(|| PeerError::Unreachable("no HTTP client".into()))?;
        if let Some(since) = self.recently_gone(home) {
            let why = format!("found unreachable {} ms ago", since.as_millis());
            return Err(PeerError::Unreachable(why));
        }
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let uri: http::Uri = format!("{}{path}", home.trim_end_matches('/'))
            .parse()
            .map_err(|err| PeerError::Unreachable(format!("bad replica URL {home}: {err}")))?;
        let session = parts.headers.get(SESSION_HEADER).map(HeaderValue::as_bytes);
        let bound_to = binding(&parts.method, &parts.uri, session, &body);
        let passport = Passport::new(principal.cloned(), &self.me).seal(&self.sealer, &bound_to);
        let passport = HeaderValue::from_str(&passport).ok();
        let request = || {
            let mut request = http::Request::new(Full::new(body.clone()));
            *request.method_mut() = parts.method.clone();
            *request.uri_mut() = uri.clone();
            *request.headers_mut() = end_to_end(&parts.headers);
            if let Some(value) = &passport {
                request.headers_mut().insert(PASSPORT_HEADER, value.clone());
            }
            request
        };
        let answer = match send(client, request()).await {
            Ok(answer) => answer,
            Err(Sent::Timeout) => return Err(PeerError::TimedOut),
            Err(Sent::NotConnected(why)) => {
                self.mark(home, false);
                return Err(PeerError::Unreachable(why));
            }
            // Most often a kept-alive connection the replica had just closed (it stopped, or
            // restarted): once more, on a new connection. Reaching nobody now, the first
            // attempt may still have run there before the replica went away: not served here.
            Err(Sent::Failed(first)) => match send(fresh, request()).await {
                Ok(answer) => answer,
                Err(Sent::Timeout) => return Err(PeerError::TimedOut),
                Err(Sent::NotConnected(why)) => {
                    self.mark(home, false);
                    return Err(PeerError::Failed(format!("{first}; then unreachable: {why}")));
                }
                Err(Sent::Failed(why)) => return Err(PeerError::Failed(why)),
            },
        };
        if !self.gone.lock().is_empty() {
            self.mark(home, true);
        }
        let (mut head, body) = answer.into_parts();
        head.headers = end_to_end(&head.headers);
        Ok(Response::from_parts(head, Body::new(body)))
    }
}

/// How one attempt at sending a request to a replica failed.
enum Sent {
    /// No connection could be made: nothing was sent.
    NotConnected(String),
    /// Sent (or being sent) and then the exchange failed.
    Failed(String),
    /// No answer head within [`HEAD_TIMEOUT`].
    Timeout,
}

/// One attempt at `request` with `client`.
async fn send(
    client: &LeanClient,
    request: http::Request<Full<Bytes>>,
) -> Result<http::Response<hyper::body::Incoming>, Sent> {
    match tokio::time::timeout(HEAD_TIMEOUT, client.request(request)).await {
        Err(_) => Err(Sent::Timeout),
        Ok(Err(err)) if err.is_connect() => Err(Sent::NotConnected(error_chain(&err))),
        Ok(Err(err)) => Err(Sent::Failed(error_chain(&err))),
        Ok(Ok(answer)) => Ok(answer),
    }
}

/// `headers` without the hop-by-hop ones, those the `Connection` header names, and any
/// passport (a host cannot send one through).
fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    let named: Vec<String> = (headers.get_all(header::CONNECTION).iter())
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    let mut kept = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let dropped =
            HOP_BY_HOP.contains(name) || name == PASSPORT_HEADER || named.iter().any(|n| n == name.as_str());
        if !dropped {
            kept.append(name.clone(), value.clone());
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    #[test]
    fn hop_by_hop_headers_and_passports_stay_behind() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("host", "mcp.example"),
            ("origin", "https://app.example"),
            ("mcp-session-id", "abc"),
            ("last-event-id", "e1"),
            ("connection", "keep-alive, x-private"),
            ("x-private", "1"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("content-length", "12"),
            ("authorization", "Bearer unchecked"),
            (PASSPORT_HEADER, "forged"),
        ] {
            headers.append(HeaderName::from_static(name), HeaderValue::from_static(value));
        }
        let kept = end_to_end(&headers);
        let names: Vec<&str> = kept.keys().map(HeaderName::as_str).collect();
        assert_eq!(
            names,
            [
                "host",
                "origin",
                "mcp-session-id",
                "last-event-id",
                "authorization"
            ]
        );
    }

    /// A replica at a local port that closes its first connection after reading the request,
    /// without an answer (as a replica does with a kept-alive connection when it stops), and
    /// answers 202 on the next one unless `then_gone`.
    async fn closing_replica(then_gone: bool) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 65536];
            let (mut first, _) = listener.accept().await.unwrap();
            let _ = first.read(&mut buf).await;
            drop(first);
            if then_gone {
                return;
            }
            let (mut second, _) = listener.accept().await.unwrap();
            let _ = second.read(&mut buf).await;
            let answer = b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n";
            second.write_all(answer).await.unwrap();
            let _ = second.read(&mut buf).await;
        });
        url
    }

    fn peers() -> Peers {
        Peers::new(Arc::new(Sealer::random()), "http://127.0.0.1:1".into(), None)
    }

    fn post() -> Parts {
        Request::post("/mcp").body(()).unwrap().into_parts().0
    }

    #[tokio::test]
    async fn an_exchange_cut_before_the_answer_is_sent_once_more_on_a_new_connection() {
        let home = closing_replica(false).await;
        let answer = peers()
            .forward(&home, &post(), Bytes::from_static(b"{}"), None)
            .await;
        assert_eq!(answer.expect("answered on the second connection").status(), 202);
    }

    #[tokio::test]
    async fn a_replica_gone_after_taking_the_request_is_a_failure_not_unreachable() {
        // It may have run the request before going away: the forwarding replica must not serve
        // it again (only "never reached" is `Unreachable`, which it serves itself).
        let home = closing_replica(true).await;
        let answer = peers()
            .forward(&home, &post(), Bytes::from_static(b"{}"), None)
            .await;
        assert!(matches!(answer, Err(PeerError::Failed(_))), "{answer:?}");
        let nobody = "http://127.0.0.1:9"; // discard: nothing listens
        let answer = peers().forward(nobody, &post(), Bytes::new(), None).await;
        assert!(matches!(answer, Err(PeerError::Unreachable(_))), "{answer:?}");
    }

    #[tokio::test]
    async fn a_replica_that_said_it_is_stopping_is_not_sent_requests_for_a_while() {
        let peers = peers();
        let home = closing_replica(false).await;
        peers.leaving(&home);
        let answer = peers.forward(&home, &post(), Bytes::new(), None).await;
        assert!(matches!(answer, Err(PeerError::Unreachable(_))), "{answer:?}");
    }
}
