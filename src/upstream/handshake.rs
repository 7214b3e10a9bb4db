//! How mcpmux opens an upstream: the 2026-07-28 `server/discover` probe, and the session-era
//! `initialize` handshake it falls back to, with how each answer is read.

use super::ServerFacts;
use crate::protocol::message::{json_string, to_raw};
use crate::protocol::modern::{self, MODERN_VERSION};
use crate::protocol::version::{LATEST_SESSION_ERA, UPSTREAM_ACCEPTED_VERSIONS};
use crate::protocol::ClientCaps;
use crate::protocol::{Message, RequestId, ResponsePayload};
use serde_json::value::RawValue;

/// mcpmux's `clientInfo`.
pub fn client_info() -> Box<RawValue> {
    to_raw(&serde_json::json!({ "name": "mcpmux", "version": env!("CARGO_PKG_VERSION") }))
}

/// `params` for a request to a modern upstream, with mcpmux's envelope declaring `caps`.
pub fn modern_params(params: Option<&RawValue>, caps: ClientCaps, log_level: Option<&str>) -> Box<RawValue> {
    modern::with_envelope(params, &to_raw(&caps.to_json()), &client_info(), log_level)
}

/// [`modern_params`] on params already parsed.
pub fn modern_params_object(
    params: crate::protocol::RawObject,
    caps: ClientCaps,
    log_level: Option<&str>,
) -> crate::protocol::RawObject {
    modern::envelope_into(params, &to_raw(&caps.to_json()), &client_info(), log_level)
}

/// `server/discover`, declaring everything mcpmux can route.
pub fn discover_request(id: u64) -> Message {
    Message::Request {
        id: RequestId::number(id),
        method: "server/discover".into(),
        params: Some(modern_params(None, ClientCaps::ALL, None)),
    }
}

/// Read a `server/discover` answer: the server's facts when it speaks 2026-07-28, `None` when
/// the answer says it does not (any error, or no common version).
pub fn read_discover_result(payload: ResponsePayload) -> Option<ServerFacts> {
    let ResponsePayload::Result(result) = payload else {
        return None;
    };
    let value: serde_json::Value = serde_json::from_str(result.get()).ok()?;
    let speaks_modern = value
        .get("supportedVersions")?
        .as_array()?
        .iter()
        .any(|v| v.as_str() == Some(MODERN_VERSION));
    if !speaks_modern {
        return None;
    }
    let server_info = value.pointer(&format!("/_meta/{}", modern::META_SERVER_INFO.replace('/', "~1")));
    Some(facts(MODERN_VERSION, &value, server_info))
}

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
    Ok(facts(version, &value, value.get("serverInfo")))
}

/// The facts of a `server/discover` or `initialize` result (capabilities and instructions sit
/// in the same places in both).
fn facts(version: &str, result: &serde_json::Value, server_info: Option<&serde_json::Value>) -> ServerFacts {
    ServerFacts {
        protocol_version: version.to_string(),
        capabilities: result
            .get("capabilities")
            .cloned()
            .unwrap_or(serde_json::json!({})),
        instructions: result
            .get("instructions")
            .and_then(|v| v.as_str())
            .map(str::to_string),
        server_info: server_info.cloned().unwrap_or(serde_json::Value::Null),
    }
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
    fn discover_answers_decide_the_era() {
        let json = discover_request(1).to_json();
        assert!(json.contains("server/discover") && json.contains("io.modelcontextprotocol/protocolVersion"));
        let modern = raw(r#"{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},"instructions":"i","resultType":"complete","ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"py"}}}"#.into());
        let facts = read_discover_result(ResponsePayload::Result(modern)).unwrap();
        assert_eq!(facts.protocol_version, MODERN_VERSION);
        assert_eq!(facts.server_info["name"], "py");
        assert!(facts.announces_changes(crate::catalog::ListKind::Tools));
        let future = raw(r#"{"supportedVersions":["2027-01-01"],"capabilities":{}}"#.into());
        assert!(read_discover_result(ResponsePayload::Result(future)).is_none());
        let err = raw(r#"{"code":-32601,"message":"Method not found"}"#.into());
        assert!(read_discover_result(ResponsePayload::Error(err)).is_none());
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
