//! Where and how an HTTP upstream is reached: its URL, the configured headers, and the session id
//! and protocol version of the current upstream session; request builders for POST, the GET
//! stream (optionally resuming after an event id) and DELETE.
//!
//! POSTs (every call) go through hyper directly when no proxy is configured in the
//! environment: reqwest, used for everything else, parses the URL twice per request for its
//! redirect handling, a fifth of what relaying a call to an HTTP upstream cost (measured with
//! callgrind, docs/benchmarks.md). A plain-HTTP origin's POSTs use its own pool of HTTP/1.1
//! connections ([`Http1Pool`], found once per endpoint); HTTPS ones the lean pooled client (ALPN
//! picks HTTP/2 where offered). All keep connections alive and set `TCP_NODELAY`; the clients
//! are made on first use and shared by every upstream connection (configured headers ride each
//! request; no per-server setting changes them). Redirects are followed within the upstream's
//! origin only; the opening adopts the URL that answered.

use super::http_clients::{Clients, CONNECT_TIMEOUT, POOL_IDLE_TIMEOUT};
use super::http_reply::Reply;
use crate::config::Secret;
use crate::credentials::bearer::{Bearer, Refusal};
use crate::error::UpstreamError;
use crate::protocol::modern::HEADER_PROTOCOL_VERSION as VERSION_HEADER;
use crate::protocol::HEADER_SESSION_ID as SESSION_HEADER;
use crate::tls::client::ClientFiles;
use crate::util::http1_pool::Http1Pool;
use bytes::Bytes;
use http_body_util::Full;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use std::sync::Arc;
use std::time::Duration;

const LAST_EVENT_ID_HEADER: &str = "last-event-id";
const POST_ACCEPT: &str = "application/json, text/event-stream";
/// How long a fresh connection may take to confirm a server is still there after a reset.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(2);
/// How POSTs reach the upstream, and the URL as that client wants it.
#[derive(Clone)]
enum Lean {
    /// A plain-HTTP origin: its connection pool, the origin-form target and the `Host` header.
    Pooled {
        pool: Arc<Http1Pool>,
        target: http::Uri,
        host: HeaderValue,
    },
    /// HTTPS: the endpoint's pooled lean client with the absolute URL.
    Shared { uri: http::Uri },
}

/// One upstream URL with the headers every request to it carries.
#[derive(Clone)]
pub(super) struct Endpoint {
    /// The clients of this server: the shared ones, or its own with `tls`.
    clients: Clients,
    lean: Option<Lean>,
    url: reqwest::Url,
    headers: HeaderMap,
    session_id: Option<String>,
    /// The upstream identity's `Authorization` header (`auth = {...}`), asked per request.
    bearer: Option<Arc<dyn Bearer>>,
}

impl Endpoint {
    /// The endpoint before any session: the URL and the configured headers (kept out of logs).
    /// The endpoint of upstream `name`; a bad URL or header makes the upstream unavailable.
    pub fn for_upstream(
        name: &str,
        url: &str,
        configured: &[(String, Secret)],
        bearer: Option<Arc<dyn Bearer>>,
        tls: Option<&ClientFiles>,
    ) -> Result<Self, UpstreamError> {
        let mut endpoint = Self::with_tls(url, configured, tls)
            .map_err(|reason| UpstreamError::unavailable(name.to_string(), reason))?;
        endpoint.bearer = bearer;
        Ok(endpoint)
    }

    #[cfg(test)]
    pub fn new(url: &str, configured: &[(String, Secret)]) -> Result<Self, String> {
        Self::with_tls(url, configured, None)
    }

    /// The endpoint at `url`, through its own clients when `tls` configures them.
    pub fn with_tls(
        url: &str,
        configured: &[(String, Secret)],
        tls: Option<&ClientFiles>,
    ) -> Result<Self, String> {
        let url = reqwest::Url::parse(url).map_err(|e| format!("bad url: {e}"))?;
        let mut headers = HeaderMap::new();
        for (k, v) in configured {
            let key = HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("header {k}: {e}"))?;
            let mut value =
                HeaderValue::from_str(v.expose()).map_err(|_| format!("header {k}: invalid value"))?;
            value.set_sensitive(true);
            headers.insert(key, value);
        }
        let clients = Clients::for_server(tls)?;
        let lean = clients.lean.is_some().then(|| Lean::at(&url)).flatten();
        Ok(Endpoint {
            clients,
            lean,
            url,
            headers,
            session_id: None,
            bearer: None,
        })
    }

    /// Make sure the upstream identity has a header before a connection opens (a first token
    /// is fetched now); the reason when it cannot have one.
    pub async fn bearer_ready(&self) -> Result<(), String> {
        match &self.bearer {
            Some(bearer) if bearer.current().is_none() => match bearer.renew(Refusal::NONE).await {
                Ok(_) => Ok(()),
                Err(why) => Err(format!("no credential for the upstream: {why}")),
            },
            _ => Ok(()),
        }
    }

    /// Whether `status` and `challenge` refuse the upstream identity's credential (401, or 403
    /// for want of scope), so a renewed one may pass.
    fn refuses_credential(&self, status: u16, challenge: Option<&str>) -> bool {
        self.bearer.is_some()
            && (status == 401
                || (status == 403 && challenge.is_some_and(|c| c.contains("insufficient_scope"))))
    }

    /// After a refusal of the credential: a fresh header to retry with, or why there is none.
    pub async fn renewed_after(
        &self,
        status: u16,
        headers: &HeaderMap,
        sent: Option<&HeaderValue>,
    ) -> Option<Result<HeaderValue, String>> {
        let challenge = headers
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok());
        if !self.refuses_credential(status, challenge) {
            return None;
        }
        let bearer = self.bearer.as_ref()?;
        let refusal = Refusal {
            status: Some(status),
            challenge,
            stale: sent,
        };
        Some(
            bearer
                .renew(refusal)
                .await
                .map_err(|why| format!("the upstream refused mcpmux's credential (HTTP {status}): {why}")),
        )
    }

    /// The identity's current header, if any.
    fn authorization(&self) -> Option<HeaderValue> {
        let mut value = self.bearer.as_ref()?.current()?;
        value.set_sensitive(true);
        Some(value)
    }

    /// This endpoint inside an upstream session: with its id (if the server gave one) and the
    /// negotiated protocol version on every request.
    pub fn in_session(&self, session_id: Option<&str>, version: &str) -> Result<Self, String> {
        let mut next = self.clone();
        next.session_id = session_id.map(str::to_string);
        if let Some(sid) = session_id {
            let value = HeaderValue::from_str(sid)
                .map_err(|_| "the upstream sent a session id that is not a valid header value")?;
            next.headers.insert(SESSION_HEADER, value);
        }
        let version = HeaderValue::from_str(version)
            .map_err(|_| "the upstream negotiated a protocol version that is not a valid header value")?;
        next.headers.insert(VERSION_HEADER, version);
        Ok(next)
    }

    /// The same client and headers at another URL (the POST endpoint a legacy SSE server names).
    pub fn at(&self, url: reqwest::Url) -> Self {
        let lean = self.clients.lean.is_some().then(|| Lean::at(&url)).flatten();
        Endpoint {
            url,
            lean,
            ..self.clone()
        }
    }

    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }

    pub fn has_session(&self) -> bool {
        self.session_id.is_some()
    }

    fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        let req = (self.clients.reqwest)
            .request(method, self.url.clone())
            .headers(self.headers.clone());
        match self.authorization() {
            Some(value) => req.header(reqwest::header::AUTHORIZATION, value),
            None => req,
        }
    }

    /// POST one JSON-RPC frame.
    pub fn post(&self, frame: String) -> reqwest::RequestBuilder {
        self.request(reqwest::Method::POST)
            .header(ACCEPT, POST_ACCEPT)
            .header(CONTENT_TYPE, "application/json")
            .body(frame)
    }

    /// POST one JSON-RPC frame with `extra` headers, through the lean client when there is one.
    /// A refusal of the upstream identity's credential renews it and sends once more.
    pub async fn send_post(&self, frame: String, extra: &[(String, String)]) -> Result<Reply, Failure> {
        let frame = Bytes::from(frame);
        let Some(bearer) = &self.bearer else {
            return self.post_once(frame, extra, None).await;
        };
        // No header yet (a first token, or one just given up): fetch one before sending.
        let sent = match self.authorization() {
            Some(header) => Some(header),
            // None to be had: the request is not sent without one (an upstream that would also
            // answer anonymously must not get an anonymous call instead of the principal's).
            None => match bearer.renew(Refusal::NONE).await {
                Ok(header) => Some(sensitive(header)),
                Err(why) => return Err(Failure::from(format!("no credential for the upstream: {why}"))),
            },
        };
        let reply = self.post_once(frame.clone(), extra, sent.clone()).await?;
        if reply.status.is_success() {
            return Ok(reply);
        }
        let reply = match self
            .renewed_after(reply.status.as_u16(), &reply.headers, sent.as_ref())
            .await
        {
            None => return Ok(reply),
            Some(Ok(fresh)) => self.post_once(frame, extra, Some(sensitive(fresh))).await?,
            Some(Err(why)) => return Err(Failure::from(why)),
        };
        if reply.status.is_success() {
            return Ok(reply);
        }
        // Refused again: no third try, but the identity hears why (a step-up is noted).
        match self
            .renewed_after(reply.status.as_u16(), &reply.headers, None)
            .await
        {
            Some(Err(why)) => Err(Failure::from(why)),
            _ => Ok(reply),
        }
    }

    async fn post_once(
        &self,
        frame: Bytes,
        extra: &[(String, String)],
        authorization: Option<HeaderValue>,
    ) -> Result<Reply, Failure> {
        let Some(lean) = &self.lean else {
            let mut req = (self.clients.reqwest)
                .post(self.url.clone())
                .headers(self.headers.clone())
                .header(ACCEPT, POST_ACCEPT)
                .header(CONTENT_TYPE, "application/json")
                .body(frame);
            if let Some(value) = authorization {
                req = req.header(reqwest::header::AUTHORIZATION, value);
            }
            for (name, value) in extra {
                req = req.header(name.as_str(), value);
            }
            return match req.send().await {
                Ok(resp) => Ok(Reply::from(resp)),
                Err(err) => Err(Failure::of(&err)),
            };
        };
        let mut req = http::Request::new(Full::new(frame));
        *req.method_mut() = http::Method::POST;
        *req.uri_mut() = match lean {
            Lean::Pooled { target, .. } => target.clone(),
            Lean::Shared { uri, .. } => uri.clone(),
        };
        let headers = req.headers_mut();
        headers.reserve(self.headers.len() + extra.len() + 4);
        if let Lean::Pooled { host, .. } = lean {
            headers.insert(http::header::HOST, host.clone());
        }
        for (name, value) in &self.headers {
            headers.append(name.clone(), value.clone());
        }
        headers.insert(ACCEPT, HeaderValue::from_static(POST_ACCEPT));
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(value) = authorization {
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        for (name, value) in extra {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| format!("header {name}: {e}"))?;
            let value = HeaderValue::from_str(value).map_err(|_| format!("header {name}: invalid value"))?;
            headers.append(name, value);
        }
        match lean {
            Lean::Pooled { pool, .. } => match pool.send(req).await {
                Ok(resp) => Ok(Reply::from_hyper(resp)),
                Err(err) => Err(Failure::of(&err)),
            },
            Lean::Shared { .. } => match self.clients.lean.as_ref().map(|client| client.request(req)) {
                Some(sent) => match sent.await {
                    Ok(resp) => Ok(Reply::from_hyper(resp)),
                    Err(err) => Err(Failure::of(&err)),
                },
                None => Err(Failure::from("no lean client".to_string())),
            },
        }
    }

    /// GET an SSE stream: the standalone one, or the continuation of the stream whose last event
    /// had id `last_event_id`.
    pub fn get(&self, last_event_id: Option<&str>) -> reqwest::RequestBuilder {
        let req = self
            .request(reqwest::Method::GET)
            .header(ACCEPT, "text/event-stream");
        match last_event_id.and_then(|id| HeaderValue::from_str(id).ok()) {
            Some(id) => req.header(LAST_EVENT_ID_HEADER, id),
            None => req,
        }
    }

    pub fn delete(&self) -> reqwest::RequestBuilder {
        self.request(reqwest::Method::DELETE)
    }

    /// Whether the server is gone after a failure that says `how`: a refused connection says
    /// so; a reset one is confirmed by opening a fresh connection to its address (a server that
    /// dropped one connection still accepts new ones).
    pub async fn is_gone(&self, how: Gone) -> bool {
        match how {
            Gone::No => false,
            Gone::Refused => true,
            Gone::Reset => {
                let (Some(host), Some(port)) = (self.url.host_str(), self.url.port_or_known_default()) else {
                    return false;
                };
                // An IPv6 literal comes bracketed.
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let connect = tokio::net::TcpStream::connect((host, port));
                matches!(tokio::time::timeout(CONFIRM_TIMEOUT, connect).await, Ok(Err(_)))
            }
        }
    }
}

impl Lean {
    /// How POSTs reach `url` (a plain-HTTP one through its origin's pool, others through the
    /// endpoint's lean client), unless hyper cannot take the URL as it is.
    fn at(url: &reqwest::Url) -> Option<Lean> {
        let uri = url.as_str().parse::<http::Uri>().ok()?;
        if url.scheme() != "http" {
            return Some(Lean::Shared { uri });
        }
        let port = url.port_or_known_default()?;
        // An IPv6 literal comes bracketed; the socket address wants it bare.
        let host = url.host_str()?.trim_start_matches('[').trim_end_matches(']');
        let authority = uri.authority()?;
        Some(Lean::Pooled {
            pool: Http1Pool::of(host, port, CONNECT_TIMEOUT, POOL_IDLE_TIMEOUT),
            target: uri.path_and_query()?.as_str().parse().ok()?,
            host: HeaderValue::from_str(authority.as_str()).ok()?,
        })
    }
}

/// Up to `limit` bytes of a body; the rest is not read.
pub(super) async fn read_limited(resp: impl Into<Reply>, limit: usize) -> Vec<u8> {
    resp.into().read_limited(limit).await
}

/// Why an exchange with an HTTP upstream failed, and what that says of whether the server is
/// still there (see [`Endpoint::is_gone`]): a server found gone takes the upstream down at once
/// rather than failing one request.
#[derive(Debug)]
pub(super) struct Failure {
    pub reason: String,
    pub gone: Gone,
}

impl Failure {
    /// The failure of an HTTP client call, with all of its causes.
    pub fn of(err: &(dyn std::error::Error + 'static)) -> Self {
        let reason = match crate::tls::client::refusal_reason(err) {
            Some(tls) => format!("{}: {tls}", error_chain(err)),
            None => error_chain(err),
        };
        Failure {
            reason,
            gone: gone(err),
        }
    }
}

impl From<String> for Failure {
    fn from(reason: String) -> Self {
        Failure {
            reason,
            gone: Gone::No,
        }
    }
}

impl From<Failure> for String {
    fn from(failure: Failure) -> Self {
        failure.reason
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// A header value kept out of logs.
fn sensitive(mut value: HeaderValue) -> HeaderValue {
    value.set_sensitive(true);
    value
}

/// What a failed exchange says of the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Gone {
    /// Nothing: a slow server, an HTTP refusal, a bad answer.
    No,
    /// The connection was refused: nothing listens at the address.
    Refused,
    /// The connection was reset or aborted: the server may be gone, or only that connection.
    Reset,
}

/// What an error (or one of its causes) says of the server.
pub(super) fn gone(err: &(dyn std::error::Error + 'static)) -> Gone {
    use std::io::ErrorKind;
    let mut cause = Some(err);
    while let Some(err) = cause {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            match io.kind() {
                ErrorKind::ConnectionRefused => return Gone::Refused,
                ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::NotConnected => {
                    return Gone::Reset
                }
                _ => {}
            }
        }
        cause = err.source();
    }
    Gone::No
}

pub(super) use crate::util::http_client::error_chain;

#[cfg(test)]
mod tests {
    use super::*;
    use axum::extract::{ConnectInfo, State};
    use parking_lot::Mutex;
    use std::collections::HashSet;
    use std::net::SocketAddr;
    use std::sync::Arc;

    type Peers = Arc<Mutex<HashSet<SocketAddr>>>;

    async fn record(State(peers): State<Peers>, ConnectInfo(peer): ConnectInfo<SocketAddr>) -> &'static str {
        peers.lock().insert(peer);
        "{}"
    }

    #[tokio::test]
    async fn endpoints_share_the_clients_and_their_connections() {
        let peers = Peers::default();
        let app = axum::Router::new()
            .route("/mcp", axum::routing::any(record))
            .with_state(peers.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await
        });
        let mut endpoints = Vec::new();
        for _ in 0..3 {
            let endpoint = Endpoint::new(&url, &[]).expect("endpoint");
            let reply = endpoint.send_post("{}".into(), &[]).await.expect("POST");
            assert_eq!(read_limited(reply, 1024).await, b"{}");
            let reply = endpoint.get(None).send().await.expect("GET");
            assert_eq!(read_limited(reply, 1024).await, b"{}");
            // Let the connections go back to the pool before the next endpoint asks.
            tokio::time::sleep(Duration::from_millis(50)).await;
            endpoints.push(endpoint);
        }
        assert!(std::ptr::eq(&*endpoints[0].clients, &*endpoints[2].clients));
        // One connection for the lean client and one for reqwest, not two per endpoint.
        let peers = peers.lock().len();
        assert!(peers <= 2, "{peers} connections for 3 endpoints");
    }

    #[tokio::test]
    async fn a_refused_connection_is_gone_and_an_http_refusal_is_not() {
        // A port nothing listens on (bound, then released).
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
        drop(listener);
        let endpoint = Endpoint::new(&url, &[]).expect("endpoint");
        let Err(failure) = endpoint.send_post("{}".into(), &[]).await else {
            panic!("nothing listens at {url}");
        };
        assert_eq!(failure.gone, Gone::Refused, "{failure}");
        assert!(endpoint.is_gone(failure.gone).await);
        let Err(err) = endpoint.get(None).send().await else {
            panic!("nothing listens at {url}");
        };
        assert_eq!(gone(&err), Gone::Refused, "{}", error_chain(&err));
        // A reset is confirmed with a fresh connection: refused here, so gone.
        assert!(endpoint.is_gone(Gone::Reset).await);
        let timeout = std::io::Error::new(std::io::ErrorKind::TimedOut, "slow");
        assert_eq!(gone(&timeout), Gone::No);
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert_eq!(gone(&reset), Gone::Reset);
        assert_eq!(Failure::from("HTTP 500".to_string()).gone, Gone::No);
    }

    #[tokio::test]
    async fn a_reset_from_a_server_still_listening_is_not_gone() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
        let endpoint = Endpoint::new(&url, &[]).expect("endpoint");
        assert!(!endpoint.is_gone(Gone::Reset).await);
        assert!(!endpoint.is_gone(Gone::No).await);
        drop(listener);
        assert!(endpoint.is_gone(Gone::Reset).await);
    }
}
