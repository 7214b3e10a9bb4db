//! The 2026-07-28 ("modern") request envelope: the per-request `_meta` fields that replace the
//! `initialize` handshake, and the HTTP request-metadata headers (`MCP-Protocol-Version`,
//! `Mcp-Method`, `Mcp-Name`) with their Base64 sentinel encoding and header-versus-body
//! validation. Pure: headers come in through a lookup function.

use super::message::{json_string, raw};
use super::RawObject;
use base64::Engine;
use serde_json::value::RawValue;

/// The revision this module describes.
pub const MODERN_VERSION: &str = "2026-07-28";

pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

pub const HEADER_PROTOCOL_VERSION: &str = "mcp-protocol-version";
pub const HEADER_METHOD: &str = "mcp-method";
pub const HEADER_NAME: &str = "mcp-name";

const SENTINEL_PREFIX: &str = "=?base64?";
const SENTINEL_SUFFIX: &str = "?=";

/// Every revision mcpmux speaks, newest first (the modern one and the session era's).
pub fn supported_versions() -> Vec<&'static str> {
    let mut all = vec![MODERN_VERSION];
    all.extend(super::version::SESSION_ERA_VERSIONS);
    all
}

/// What a modern request says about its client in `params._meta`.
#[derive(Debug, Clone)]
pub struct RequestMeta {
    pub protocol_version: String,
    /// `io.modelcontextprotocol/clientCapabilities`, as sent.
    pub client_capabilities: RawObject,
    pub client_info: Option<RawObject>,
    pub log_level: Option<String>,
}

/// Whether a request carries the modern envelope (a protocol version in `params._meta`).
pub fn is_modern(params: Option<&RawObject>) -> bool {
    params
        .and_then(|p| p.get_object("_meta"))
        .is_some_and(|meta| meta.contains(META_PROTOCOL_VERSION))
}

/// Read the modern `_meta` of a request. The error names the missing or malformed field
/// (answered with -32602).
pub fn request_meta(params: Option<&RawObject>) -> Result<RequestMeta, String> {
    let meta = params
        .and_then(|p| p.get_object("_meta"))
        .ok_or("params._meta is missing")?;
    let protocol_version = meta
        .get_str(META_PROTOCOL_VERSION)
        .ok_or_else(|| format!("_meta[\"{META_PROTOCOL_VERSION}\"] must be a string"))?;
    let client_capabilities = meta
        .get_object(META_CLIENT_CAPABILITIES)
        .ok_or_else(|| format!("_meta[\"{META_CLIENT_CAPABILITIES}\"] must be an object"))?;
    Ok(RequestMeta {
        protocol_version,
        client_capabilities,
        client_info: meta.get_object(META_CLIENT_INFO),
        log_level: meta.get_str(META_LOG_LEVEL),
    })
}

/// Whether `value` may travel as a plain header value: visible ASCII, space or tab, no leading
/// or trailing whitespace, and not looking like the Base64 sentinel.
fn plain_header_safe(value: &str) -> bool {
    let visible = value.bytes().all(|b| (0x20..=0x7e).contains(&b) || b == b'\t');
    let trimmed = value.trim_matches([' ', '\t']).len() == value.len();
    let sentinel_like = value.starts_with(SENTINEL_PREFIX) && value.ends_with(SENTINEL_SUFFIX);
    visible && trimmed && !sentinel_like
}

/// Encode a value for `Mcp-Name` or `Mcp-Param-*`: as is when header-safe, otherwise the
/// Base64 sentinel form `=?base64?…?=` of its UTF-8 bytes.
pub fn encode_header_value(value: &str) -> String {
    if plain_header_safe(value) {
        value.to_string()
    } else {
        let b64 = base64::engine::general_purpose::STANDARD.encode(value.as_bytes());
        format!("{SENTINEL_PREFIX}{b64}{SENTINEL_SUFFIX}")
    }
}

/// Decode a header value that may use the Base64 sentinel form. Fails on characters a header
/// value may not carry and on a sentinel that is not valid Base64 of UTF-8.
pub fn decode_header_value(value: &str) -> Result<String, String> {
    if !value.bytes().all(|b| (0x20..=0x7e).contains(&b) || b == b'\t') {
        return Err("header value contains characters outside visible ASCII".into());
    }
    let Some(b64) = value
        .strip_prefix(SENTINEL_PREFIX)
        .and_then(|rest| rest.strip_suffix(SENTINEL_SUFFIX))
    else {
        return Ok(value.to_string());
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| "header value is not valid Base64".to_string())?;
    String::from_utf8(bytes).map_err(|_| "Base64 header value is not UTF-8".into())
}

/// The body field `Mcp-Name` mirrors for a method, if any.
pub fn name_field(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

/// The headers a modern request must carry over HTTP, computed from its body.
pub fn request_headers(
    method: &str,
    params: Option<&RawObject>,
    version: &str,
) -> Vec<(&'static str, String)> {
    let mut out = vec![
        (HEADER_PROTOCOL_VERSION, version.to_string()),
        (HEADER_METHOD, method.to_string()),
    ];
    if let Some(value) = name_field(method).and_then(|f| params.and_then(|p| p.get_str(f))) {
        out.push((HEADER_NAME, encode_header_value(&value)));
    }
    out
}

/// `params` carrying a modern envelope: mcpmux's protocol version, the given client
/// capabilities and client info, and the log level when one is wanted. Other `_meta` members
/// (a progress token, say) and every other field are kept as they were.
pub fn with_envelope(
    params: Option<&RawValue>,
    capabilities: &RawValue,
    client_info: &RawValue,
    log_level: Option<&str>,
) -> Box<RawValue> {
    let obj = params
        .and_then(|p| RawObject::parse(p.get()).ok())
        .unwrap_or_default();
    envelope_into(obj, capabilities, client_info, log_level).to_raw()
}

/// [`with_envelope`] on params already parsed.
pub fn envelope_into(
    mut obj: RawObject,
    capabilities: &RawValue,
    client_info: &RawValue,
    log_level: Option<&str>,
) -> RawObject {
    let mut meta = obj.get_object("_meta").unwrap_or_default();
    meta.set(META_PROTOCOL_VERSION, raw(json_string(MODERN_VERSION)));
    meta.set(META_CLIENT_CAPABILITIES, capabilities.to_owned());
    meta.set(META_CLIENT_INFO, client_info.to_owned());
    match log_level {
        Some(level) => meta.set(META_LOG_LEVEL, raw(json_string(level))),
        None => {
            meta.remove(META_LOG_LEVEL);
        }
    }
    obj.set("_meta", meta.to_raw());
    obj
}

/// Check a modern HTTP request's headers against its body (answered with 400 and -32020 on
/// failure). `header` looks a header up by lowercase name.
pub fn check_headers<'h>(
    header: impl Fn(&str) -> Option<&'h str>,
    method: &str,
    params: Option<&RawObject>,
    meta: &RequestMeta,
) -> Result<(), String> {
    let version = header(HEADER_PROTOCOL_VERSION).ok_or("the MCP-Protocol-Version header is missing")?;
    if version.trim() != meta.protocol_version {
        return Err(format!(
            "Header mismatch: MCP-Protocol-Version header value '{}' does not match body value '{}'",
            version.trim(),
            meta.protocol_version
        ));
    }
    let sent_method = header(HEADER_METHOD).ok_or("the Mcp-Method header is missing")?;
    if sent_method != method {
        return Err(format!(
            "Header mismatch: Mcp-Method header value '{sent_method}' does not match body value '{method}'"
        ));
    }
    let Some(field) = name_field(method) else {
        return Ok(());
    };
    let body = params
        .and_then(|p| p.get_str(field))
        .ok_or_else(|| format!("params.{field} must be a string"))?;
    let sent = header(HEADER_NAME).ok_or("the Mcp-Name header is missing")?;
    let decoded = decode_header_value(sent).map_err(|e| format!("Mcp-Name: {e}"))?;
    if decoded != body {
        return Err(format!(
            "Header mismatch: Mcp-Name header value '{decoded}' does not match body value '{body}'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn params(json: &str) -> RawObject {
        RawObject::parse(json).unwrap()
    }

    const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":{"sampling":{}},
        "io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}"#;

    #[test]
    fn the_spec_encoding_examples() {
        assert_eq!(encode_header_value("us-west1"), "us-west1");
        assert_eq!(
            encode_header_value("Hello, 世界"),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
        assert_eq!(encode_header_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(encode_header_value("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(
            encode_header_value("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
        for original in [
            "us-west1",
            "Hello, 世界",
            " padded ",
            "line1\nline2",
            "=?base64?literal?=",
        ] {
            assert_eq!(
                decode_header_value(&encode_header_value(original)).unwrap(),
                original
            );
        }
        assert!(decode_header_value("=?base64?***?=").is_err());
        assert!(decode_header_value("=?base64?/w==?=").is_err(), "not UTF-8");
    }

    #[test]
    fn request_meta_requires_version_and_capabilities() {
        let p = params(&format!("{{{META}}}"));
        assert!(is_modern(Some(&p)));
        let meta = request_meta(Some(&p)).unwrap();
        assert_eq!(meta.protocol_version, MODERN_VERSION);
        assert!(meta.client_capabilities.contains("sampling"));
        assert_eq!(meta.log_level, None);
        let no_caps = params(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#);
        assert!(is_modern(Some(&no_caps)));
        assert!(request_meta(Some(&no_caps))
            .unwrap_err()
            .contains("clientCapabilities"));
        assert!(!is_modern(Some(&params(r#"{"_meta":{"progressToken":1}}"#))));
        assert!(!is_modern(None));
    }

    fn check(
        h: &HashMap<&str, String>,
        method: &str,
        p: Option<&RawObject>,
        meta: &RequestMeta,
    ) -> Result<(), String> {
        check_headers(|name| h.get(name).map(String::as_str), method, p, meta)
    }

    #[test]
    fn headers_are_checked_against_the_body() {
        let p = params(&format!(r#"{{"name":"get weather",{META}}}"#));
        let meta = request_meta(Some(&p)).unwrap();
        let good: HashMap<&str, String> = request_headers("tools/call", Some(&p), MODERN_VERSION)
            .into_iter()
            .collect();
        assert_eq!(good[HEADER_NAME], "get weather");
        assert_eq!(check(&good, "tools/call", Some(&p), &meta), Ok(()));
        let mut wrong_name = good.clone();
        wrong_name.insert(HEADER_NAME, "other".into());
        let err = check(&wrong_name, "tools/call", Some(&p), &meta).unwrap_err();
        assert!(err.contains("Mcp-Name") && err.contains("other"), "{err}");
        let mut encoded = good.clone();
        encoded.insert(HEADER_NAME, "=?base64?Z2V0IHdlYXRoZXI=?=".into());
        assert_eq!(check(&encoded, "tools/call", Some(&p), &meta), Ok(()));
        let mut old_version = good.clone();
        old_version.insert(HEADER_PROTOCOL_VERSION, "2025-11-25".into());
        assert!(check(&old_version, "tools/call", Some(&p), &meta).is_err());
        let mut no_method = good.clone();
        no_method.remove(HEADER_METHOD);
        assert!(check(&no_method, "tools/call", Some(&p), &meta)
            .unwrap_err()
            .contains("Mcp-Method"));
        // A method without a name field needs no Mcp-Name.
        let list = params(&format!("{{{META}}}"));
        let headers: HashMap<&str, String> = request_headers("tools/list", Some(&list), MODERN_VERSION)
            .into_iter()
            .collect();
        assert!(!headers.contains_key(HEADER_NAME));
        assert_eq!(check(&headers, "tools/list", Some(&list), &meta), Ok(()));
    }

    #[test]
    fn the_envelope_is_added_and_the_rest_kept() {
        let p = raw(
            r#"{"name":"t","_meta":{"progressToken":4,"io.modelcontextprotocol/logLevel":"debug"}}"#.into(),
        );
        let caps = raw(r#"{"sampling":{}}"#.into());
        let info = raw(r#"{"name":"mcpmux","version":"1"}"#.into());
        let out = with_envelope(Some(&p), &caps, &info, None);
        let obj = RawObject::parse(out.get()).unwrap();
        let meta = request_meta(Some(&obj)).unwrap();
        assert_eq!(meta.protocol_version, MODERN_VERSION);
        assert!(meta.client_capabilities.contains("sampling"));
        assert_eq!(meta.log_level, None);
        assert_eq!(obj.get_str("name").as_deref(), Some("t"));
        assert!(out.get().contains(r#""progressToken":4"#));
        let bare = with_envelope(None, &caps, &info, Some("info"));
        assert!(bare
            .get()
            .contains(r#""io.modelcontextprotocol/logLevel":"info""#));
    }

    #[test]
    fn resource_reads_mirror_the_uri() {
        let p = params(&format!(r#"{{"uri":"file:///tmp/ä.txt",{META}}}"#));
        let headers = request_headers("resources/read", Some(&p), MODERN_VERSION);
        let name = &headers.iter().find(|(h, _)| *h == HEADER_NAME).unwrap().1;
        assert!(name.starts_with("=?base64?"), "{name}");
        assert_eq!(decode_header_value(name).unwrap(), "file:///tmp/ä.txt");
    }
}
