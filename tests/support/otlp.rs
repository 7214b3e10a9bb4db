//! Trace tests' peers: an OTLP/HTTP receiver that decodes what it is sent with the official OTLP
//! types (`opentelemetry-proto`: binary protobuf, or JSON) and keeps it, a minimal
//! Streamable HTTP MCP server that reports the trace context headers and `_meta` it got, and
//! readers for spans.
#![allow(dead_code)]

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::sync::Arc;

/// What the receiver got: each request decoded, in the OTLP JSON form (hex ids, camelCase),
/// and its raw bytes as they came.
#[derive(Clone)]
pub struct Collected(Arc<Mutex<Vec<Received>>>, Arc<String>);

/// One export request: decoded into OTLP JSON, and its bytes.
type Received = (String, Vec<u8>);

impl Collected {
    /// Each request, decoded into OTLP JSON.
    pub fn bodies(&self) -> Vec<String> {
        self.0.lock().iter().map(|(json, _)| json.clone()).collect()
    }

    /// Each request's bytes as they came.
    pub fn raw(&self) -> Vec<Vec<u8>> {
        self.0.lock().iter().map(|(_, raw)| raw.clone()).collect()
    }

    /// Every span received, flattened.
    pub fn spans(&self) -> Vec<Value> {
        let mut spans = Vec::new();
        for body in self.bodies() {
            let doc: Value = serde_json::from_str(&body).expect("OTLP JSON");
            for rs in doc["resourceSpans"].as_array().into_iter().flatten() {
                let service = attr(&rs["resource"], "service.name");
                assert_eq!(service.as_deref(), Some(self.1.as_str()), "service.name");
                for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                    spans.extend(ss["spans"].as_array().into_iter().flatten().cloned());
                }
            }
        }
        spans
    }
}

/// An OTLP/HTTP receiver on a free port: `POST /v1/traces` (protobuf or JSON) is decoded as an
/// `ExportTraceServiceRequest` (400 if it is not one) and kept; every resource must name
/// `service_name`.
pub async fn start_collector(service_name: &str) -> (Collected, u16) {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message;
    async fn receive(
        State(got): State<Collected>,
        headers: HeaderMap,
        body: axum::body::Bytes,
    ) -> StatusCode {
        let ctype = headers
            .get("content-type")
            .map(|v| v.as_bytes())
            .unwrap_or_default();
        let request = match ctype {
            b"application/x-protobuf" => ExportTraceServiceRequest::decode(body.as_ref()).ok(),
            b"application/json" => serde_json::from_slice::<ExportTraceServiceRequest>(&body).ok(),
            _ => return StatusCode::UNSUPPORTED_MEDIA_TYPE,
        };
        let Some(request) = request else {
            return StatusCode::BAD_REQUEST;
        };
        let json = serde_json::to_string(&request).expect("OTLP JSON");
        got.0.lock().push((json, body.to_vec()));
        StatusCode::OK
    }
    let got = Collected(Arc::default(), Arc::new(service_name.to_string()));
    let app = axum::Router::new()
        .route("/v1/traces", axum::routing::post(receive))
        .with_state(got.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (got, port)
}

/// A JSON body answer.
pub fn json_reply(value: Value) -> axum::response::Response {
    ([("content-type", "application/json")], value.to_string()).into_response()
}

/// A minimal session-era Streamable HTTP MCP server whose one tool, `echo_headers`, answers
/// with the `traceparent`/`tracestate` headers and the `_meta.traceparent` its request carried.
pub async fn start_http_upstream() -> String {
    async fn mcp(headers: HeaderMap, body: String) -> axum::response::Response {
        let msg: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        let Some(id) = msg.get("id").cloned() else {
            return StatusCode::ACCEPTED.into_response();
        };
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(String::from);
        let result = match msg["method"].as_str().unwrap_or("") {
            "initialize" => json!({
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "headers", "version": "1"}
            }),
            "tools/list" => json!({"tools": [{
                "name": "echo_headers",
                "description": "Report the trace context headers",
                "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}
            }]}),
            "tools/call" => {
                let seen = json!({
                    "header_traceparent": header("traceparent"),
                    "header_tracestate": header("tracestate"),
                    "meta_traceparent": msg["params"]["_meta"]["traceparent"],
                });
                json!({"content": [{"type": "text", "text": seen.to_string()}]})
            }
            "ping" => json!({}),
            method => {
                let error = json!({"code": -32601, "message": format!("Method not found: {method}")});
                let reply = json!({"jsonrpc": "2.0", "id": id, "error": error});
                return json_reply(reply);
            }
        };
        json_reply(json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::post(mcp).get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://127.0.0.1:{port}/mcp")
}

/// The value of attribute `key` of a span (or resource), as text.
pub fn attr(span: &Value, key: &str) -> Option<String> {
    let attrs = span["attributes"].as_array()?;
    let value = &attrs.iter().find(|a| a["key"] == key)?["value"];
    match (&value["stringValue"], &value["intValue"]) {
        (Value::String(s), _) => Some(s.clone()),
        (_, Value::String(n)) => Some(n.clone()),
        (_, Value::Number(n)) => Some(n.to_string()),
        _ => None,
    }
}

/// The one span named `name`.
pub fn span_named<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    let found: Vec<&Value> = spans.iter().filter(|s| s["name"] == name).collect();
    match found.as_slice() {
        [one] => one,
        _ => panic!("{} spans named {name:?} in {spans:#?}", found.len()),
    }
}

/// The span id of a `traceparent` value, checking its trace id.
pub fn parent_id(traceparent: &Value, trace: &str) -> String {
    let text = traceparent
        .as_str()
        .unwrap_or_else(|| panic!("no traceparent: {traceparent}"));
    let parts: Vec<&str> = text.split('-').collect();
    assert_eq!(parts.len(), 4, "{text}");
    assert_eq!(parts[1], trace, "the upstream's trace id: {text}");
    parts[2].to_string()
}

/// The `message` events of a legacy SSE stream, as JSON, into a channel.
pub fn sse_messages(resp: reqwest::Response) -> tokio::sync::mpsc::Receiver<Value> {
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let mut events = crate::support::mcp::sse_events(resp);
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            let msg = match event.event.as_deref() {
                Some("endpoint") => json!({"endpoint": event.data}),
                _ => serde_json::from_str(&event.data).unwrap_or(Value::Null),
            };
            if tx.send(msg).await.is_err() {
                return;
            }
        }
    });
    rx
}
