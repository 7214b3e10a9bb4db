//! A small HTTP server for the OAuth tests, on 127.0.0.1: it answers each (method, path) with
//! the answer the test set and records every request, so a test checks what arrived.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One request as it arrived.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub path: String,
    pub headers: HeaderMap,
    pub body: String,
}

impl Seen {
    /// The form fields of the body.
    pub fn form(&self) -> HashMap<String, String> {
        url::form_urlencoded::parse(self.body.as_bytes())
            .into_owned()
            .collect()
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }
}

/// An answer: status, a JSON (or other) body.
#[derive(Clone)]
pub(crate) struct Answer {
    pub status: u16,
    pub body: String,
}

pub(crate) fn json(status: u16, body: serde_json::Value) -> Answer {
    Answer {
        status,
        body: body.to_string(),
    }
}

struct Inner {
    routes: HashMap<(String, String), Answer>,
    seen: Mutex<Vec<Seen>>,
}

pub(crate) struct TestAs {
    pub base: String,
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
}

impl TestAs {
    /// A server whose routes `routes(base)` gives: `(method, path, answer)`; others are 404.
    pub async fn start(routes: impl FnOnce(&str) -> Vec<(&'static str, String, Answer)>) -> TestAs {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let routes = routes(&base)
            .into_iter()
            .map(|(m, p, a)| ((m.to_string(), p), a))
            .collect();
        let inner = Arc::new(Inner {
            routes,
            seen: Mutex::new(Vec::new()),
        });
        let app = axum::Router::new().fallback(answer).with_state(inner.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        TestAs { base, inner, task }
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.inner.seen.lock().expect("lock").clone()
    }

    /// The paths requested, in order.
    pub fn paths(&self) -> Vec<String> {
        self.seen().into_iter().map(|s| s.path).collect()
    }

    /// The one request to `path` (panics unless exactly one).
    pub fn only(&self, path: &str) -> Seen {
        let hits: Vec<Seen> = self.seen().into_iter().filter(|s| s.path == path).collect();
        assert_eq!(hits.len(), 1, "requests to {path}: {:?}", self.paths());
        hits.into_iter().next().expect("one")
    }
}

impl Drop for TestAs {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    inner.seen.lock().expect("lock").push(Seen {
        path: path.clone(),
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    match inner.routes.get(&(method.to_string(), path)) {
        Some(a) => (
            StatusCode::from_u16(a.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            [("content-type", "application/json")],
            a.body.clone(),
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// A discovery result pointing at an AS at `base` (token, authorize and register endpoints
/// under it) for the resource `http://rs.test/mcp`.
pub(crate) fn discovery_at(base: &str, auth_methods: Option<&[&str]>) -> super::Discovery {
    super::Discovery {
        resource: "http://rs.test/mcp".into(),
        prm: None,
        issuer: base.to_string(),
        as_metadata: super::AsMetadata {
            issuer: base.to_string(),
            authorization_endpoint: Some(format!("{base}/authorize")),
            token_endpoint: format!("{base}/token"),
            registration_endpoint: Some(format!("{base}/register")),
            scopes_supported: None,
            token_endpoint_auth_methods_supported: auth_methods
                .map(|m| m.iter().map(|s| s.to_string()).collect()),
            code_challenge_methods_supported: Some(vec!["S256".into()]),
            grant_types_supported: None,
            client_id_metadata_document_supported: false,
            raw: None,
        },
        scopes_supported: None,
    }
}

/// The id and secret of an HTTP Basic header (each form-urldecoded, RFC 6749 §2.3.1).
pub(crate) fn basic_credentials(header: &str) -> (String, String) {
    use base64::Engine as _;
    let encoded = header.strip_prefix("Basic ").expect("a Basic header");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("base64");
    let text = String::from_utf8(decoded).expect("utf-8");
    let (id, secret) = text.split_once(':').expect("id:secret");
    let unescape = |s: &str| {
        url::form_urlencoded::parse(format!("x={s}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .expect("value")
    };
    (unescape(id), unescape(secret))
}
