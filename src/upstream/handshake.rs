//! The session-era handshake messages mcpmux sends every upstream, and how it reads the answer.

use super::ServerFacts;
use crate::protocol::message::{json_string, to_raw};
use crate::protocol::version::{LATEST_SESSION_ERA, UPSTREAM_ACCEPTED_VERSIONS};
use crate::protocol::{Message, RequestId, ResponsePayload};

/// `initialize` with mcpmux's own client capabilities (all it can route), so servers expose
/// every tool.
pub fn initialize_request(id: u64) -> Message {
    let params = serde_json::json!({
        "protocolVersion": LATEST_SESSION_ERA,
        "capabilities": {
            "sampling": {},
            "elicitation": { "form": {}, "url": {} },
            "roots": { "listChanged": true }
        },
        "clientInfo": { "name": "mcpmux", "version": env!("CARGO_PKG_VERSION") }
    });
    Message::Request {
        id: RequestId::number(id),
        method: "initialize".into(),
        params: Some(to_raw(&params)),
    }
}

/// `notifications/initialized`.
pub fn initialized_notification() -> Message {
    Message::Notification {
        method: "notifications/initialized".into(),
        params: None,
    }
}

/// Read the server's facts from its `initialize` answer.
pub fn read_initialize_result(payload: ResponsePayload) -> Result<ServerFacts, String> {
    let result = match payload {
        ResponsePayload::Result(r) => r,
        ResponsePayload::Error(e) => return Err(format!("initialize failed: {}", e.get())),
    };
    let value: serde_json::Value =
        serde_json::from_str(result.get()).map_err(|e| format!("bad initialize result: {e}"))?;
    let version = value
        .get("protocolVersion")
        .and_then(|v| v.as_str())
        .unwrap_or_default();
    if !UPSTREAM_ACCEPTED_VERSIONS.contains(&version) {
        return Err(format!(
            "upstream chose unsupported protocol version {}",
            json_string(version)
        ));
    }
    Ok(ServerFacts {
        protocol_version: version.to_string(),
        capabilities: value
            .get("capabilities")
            .cloned()
            .unwrap_or(serde_json::json!({})),
        instructions: value
            .get("instructions")
            .and_then(|v| v.as_str())
            .map(str::to_string),
        server_info: value
            .get("serverInfo")
            .cloned()
            .unwrap_or(serde_json::Value::Null),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::message::raw;

    #[test]
    fn initialize_declares_every_routable_client_capability() {
        let json = initialize_request(1).to_json();
        for cap in ["\"sampling\"", "\"elicitation\"", "\"roots\"", "2025-11-25"] {
            assert!(json.contains(cap), "{json}");
        }
    }

    #[test]
    fn initialize_results_are_checked() {
        let ok = raw(r#"{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"s"},"instructions":"hi"}"#.into());
        let facts = read_initialize_result(ResponsePayload::Result(ok)).unwrap();
        assert!(facts.has("tools") && !facts.has("prompts"));
        assert_eq!(facts.instructions.as_deref(), Some("hi"));
        let old = raw(r#"{"protocolVersion":"1999-01-01","capabilities":{}}"#.into());
        assert!(read_initialize_result(ResponsePayload::Result(old)).is_err());
        let err = raw(r#"{"code":-32602,"message":"no"}"#.into());
        assert!(read_initialize_result(ResponsePayload::Error(err)).is_err());
    }
}
