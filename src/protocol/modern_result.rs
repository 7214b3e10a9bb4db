//! The 2026-07-28 result envelope: `resultType`, the caching hints `ttlMs` and `cacheScope`
//! (combined over the parts of a merged answer), `serverInfo` in `_meta`, and the error-code
//! changes between eras (-32002 became -32602). Pure.

use super::message::{json_string, raw};
use super::RawObject;
use serde_json::value::RawValue;

pub const RESULT_COMPLETE: &str = "complete";
pub const RESULT_INPUT_REQUIRED: &str = "input_required";

/// How long and for whom a list, read or discover result may be reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheHint {
    pub ttl_ms: u64,
    /// `cacheScope: "private"`: reusable only within the same authorization context.
    pub private: bool,
}

impl CacheHint {
    /// Nothing may be reused: what a part without hints contributes.
    pub const NONE: CacheHint = CacheHint {
        ttl_ms: 0,
        private: true,
    };

    /// The hint of a merged answer: the shortest lifetime and the most private scope.
    pub fn combine(self, other: CacheHint) -> CacheHint {
        CacheHint {
            ttl_ms: self.ttl_ms.min(other.ttl_ms),
            private: self.private || other.private,
        }
    }

    /// Read the hints of a result; absent or negative `ttlMs` counts as 0, an unknown or
    /// absent scope as private.
    pub fn of_result(result: &RawObject) -> CacheHint {
        let ttl_ms = result
            .get("ttlMs")
            .and_then(|v| serde_json::from_str::<f64>(v.get()).ok())
            .filter(|t| t.is_finite() && *t > 0.0)
            .map_or(0, |t| t.min(u64::MAX as f64) as u64);
        let private = result.get_str("cacheScope").as_deref() != Some("public");
        CacheHint { ttl_ms, private }
    }

    fn scope(self) -> &'static str {
        if self.private {
            "private"
        } else {
            "public"
        }
    }
}

/// The `resultType` of a result; absent means `complete`.
pub fn result_type(result: &RawObject) -> String {
    result
        .get_str("resultType")
        .unwrap_or_else(|| RESULT_COMPLETE.to_string())
}

/// A result as a modern host must see it: `resultType` (added as `complete` when absent),
/// the caching hints when given, and mcpmux's `serverInfo` in `_meta`. Everything else is
/// kept as it was.
pub fn shape_result(result: &RawValue, cache: Option<CacheHint>, server_info: &RawValue) -> Box<RawValue> {
    let Ok(mut obj) = RawObject::parse(result.get()) else {
        return result.to_owned();
    };
    if !obj.contains("resultType") {
        obj.set("resultType", raw(json_string(RESULT_COMPLETE)));
    }
    if let Some(hint) = cache {
        obj.set("ttlMs", raw(hint.ttl_ms.to_string()));
        obj.set("cacheScope", raw(json_string(hint.scope())));
    }
    // mcpmux is the server: its identity replaces a modern upstream's own.
    let mut meta = obj.get_object("_meta").unwrap_or_default();
    meta.set(super::modern::META_SERVER_INFO, server_info.to_owned());
    obj.set("_meta", meta.to_raw());
    obj.to_raw()
}

/// The members of a 2026-07-28 result envelope a server of the session era never sends.
const MODERN_ENVELOPE: &[&str] = &["resultType", "ttlMs", "cacheScope"];

/// An upstream's result as a session-era host must see it: the upstream's own identity
/// (`_meta["io.modelcontextprotocol/serverInfo"]`) is dropped, and so, from a modern upstream,
/// are the envelope members a session-era server does not send (`resultType`, `ttlMs`,
/// `cacheScope`). Every other member, other `_meta` keys included, stays byte for byte; a result
/// with none of them is returned untouched.
pub fn session_era_result(result: Box<RawValue>, from_modern: bool) -> Box<RawValue> {
    let text = result.get();
    // Searched for with a finder made once: `str::contains` sets one up at every call.
    static SERVER_INFO: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(super::modern::META_SERVER_INFO));
    let has_envelope = from_modern && MODERN_ENVELOPE.iter().any(|k| text.contains(k));
    if !has_envelope && SERVER_INFO.find(text.as_bytes()).is_none() {
        return result;
    }
    let Ok(mut obj) = RawObject::parse(text) else {
        return result;
    };
    let mut changed = false;
    if from_modern {
        for key in MODERN_ENVELOPE {
            changed |= obj.remove(key).is_some();
        }
    }
    if let Some(mut meta) = obj.get_object("_meta") {
        if meta.remove(super::modern::META_SERVER_INFO).is_some() {
            changed = true;
            if meta.members().next().is_none() {
                obj.remove("_meta");
            } else {
                obj.set("_meta", meta.to_raw());
            }
        }
    }
    if changed {
        obj.to_raw()
    } else {
        result
    }
}

/// The members [`shape_result`] adds, for a result mcpmux builds itself that has none of them
/// yet (a list page): `resultType`, the caching hints when given and `_meta` with `serverInfo`,
/// in that order.
pub fn own_result_members(
    cache: Option<CacheHint>,
    server_info: &RawValue,
) -> Vec<(&'static str, Box<RawValue>)> {
    let mut members = vec![("resultType", raw(json_string(RESULT_COMPLETE)))];
    if let Some(hint) = cache {
        members.push(("ttlMs", raw(hint.ttl_ms.to_string())));
        members.push(("cacheScope", raw(json_string(hint.scope()))));
    }
    let mut meta = RawObject::default();
    meta.set(super::modern::META_SERVER_INFO, server_info.to_owned());
    members.push(("_meta", meta.to_raw()));
    members
}

/// An error object as a modern host must see it: the session era's "resource not found"
/// (-32002) is invalid params (-32602) since 2026-07-28; the message and data are kept.
pub fn shape_error(error: &RawValue) -> Box<RawValue> {
    let Ok(mut obj) = RawObject::parse(error.get()) else {
        return error.to_owned();
    };
    if obj.get("code").map(RawValue::get) == Some("-32002") {
        obj.set("code", raw("-32602".into()));
        return obj.to_raw();
    }
    error.to_owned()
}

/// An error object as a session-era host must see it: a modern upstream's -32602 for a missing
/// resource (its data names the `uri`) is -32002 again.
pub fn legacy_resource_error(error: &RawValue) -> Box<RawValue> {
    let Ok(mut obj) = RawObject::parse(error.get()) else {
        return error.to_owned();
    };
    let names_uri = obj.get_object("data").is_some_and(|d| d.contains("uri"));
    if obj.get("code").map(RawValue::get) == Some("-32602") && names_uri {
        obj.set("code", raw("-32002".into()));
        return obj.to_raw();
    }
    error.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> Box<RawValue> {
        raw(r#"{"name":"mcpmux","version":"1"}"#.into())
    }

    #[test]
    fn results_get_a_type_hints_and_server_info_and_keep_the_rest() {
        let r = raw(r#"{"tools":[],"_meta":{"x":1},"extra":true}"#.into());
        let hint = CacheHint {
            ttl_ms: 500,
            private: false,
        };
        let out = shape_result(&r, Some(hint), &info());
        let v: serde_json::Value = serde_json::from_str(out.get()).unwrap();
        assert_eq!(v["resultType"], "complete");
        assert_eq!(v["ttlMs"], 500);
        assert_eq!(v["cacheScope"], "public");
        assert_eq!(v["extra"], true);
        assert_eq!(v["_meta"]["x"], 1);
        assert_eq!(v["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mcpmux");
        let pending = raw(r#"{"resultType":"input_required","requestState":"s"}"#.into());
        let out = shape_result(&pending, None, &info());
        assert!(out.get().contains(r#""resultType":"input_required""#));
        assert!(!out.get().contains("ttlMs"));
    }

    #[test]
    fn an_upstreams_identity_never_reaches_a_host() {
        let upstream = raw(
            r#"{"content":[],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"py"},"x.y/z":{"k": 1}}}"#.into(),
        );
        let modern = shape_result(&upstream, None, &info());
        let v: serde_json::Value = serde_json::from_str(modern.get()).unwrap();
        assert_eq!(v["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mcpmux");
        assert!(
            modern.get().contains(r#""x.y/z":{"k": 1}"#),
            "other _meta kept byte for byte"
        );
        let old = session_era_result(upstream.clone(), true);
        assert_eq!(old.get(), r#"{"content":[],"_meta":{"x.y/z":{"k": 1}}}"#);
        let only_info = raw(r#"{"ttlMs":5,"_meta":{"io.modelcontextprotocol/serverInfo":{}}}"#.into());
        // From a session-era upstream, its own members stay; only the identity goes.
        assert_eq!(
            session_era_result(only_info.clone(), false).get(),
            r#"{"ttlMs":5}"#
        );
        assert_eq!(session_era_result(only_info, true).get(), "{}");
        let plain = raw(r#"{"content":[ {"type":"text","text":"resultType"} ]}"#.into());
        assert_eq!(session_era_result(plain.clone(), true).get(), plain.get());
    }

    #[test]
    fn own_members_are_what_shaping_adds() {
        let page = r#"{"tools":[{"name":"x"}],"nextCursor":"c"}"#;
        for cache in [None, Some(CacheHint::NONE)] {
            let mut obj = RawObject::parse(page).unwrap();
            for (key, value) in own_result_members(cache, &info()) {
                obj.set(key, value);
            }
            assert_eq!(
                obj.to_json(),
                shape_result(&raw(page.into()), cache, &info()).get()
            );
        }
    }

    #[test]
    fn hints_combine_to_the_shortest_and_most_private() {
        let a = CacheHint {
            ttl_ms: 60_000,
            private: false,
        };
        let b = CacheHint {
            ttl_ms: 1_000,
            private: false,
        };
        assert_eq!(a.combine(b), b);
        assert_eq!(a.combine(CacheHint::NONE), CacheHint::NONE);
        let read = |json: &str| CacheHint::of_result(&RawObject::parse(json).unwrap());
        assert_eq!(read(r#"{"ttlMs":-5,"cacheScope":"public"}"#).ttl_ms, 0);
        assert_eq!(
            read(r#"{"ttlMs":2500,"cacheScope":"public"}"#),
            CacheHint {
                ttl_ms: 2500,
                private: false
            }
        );
        assert!(read(r#"{"ttlMs":2500}"#).private);
    }

    #[test]
    fn not_found_codes_cross_eras() {
        let old = raw(r#"{"code":-32002,"message":"Resource not found","data":{"uri":"a://b"}}"#.into());
        let modern = shape_error(&old);
        assert!(modern.get().contains("-32602") && modern.get().contains("a://b"));
        assert!(legacy_resource_error(&modern).get().contains("-32002"));
        let unknown_tool = raw(r#"{"code":-32602,"message":"Unknown tool"}"#.into());
        assert_eq!(legacy_resource_error(&unknown_tool).get(), unknown_tool.get());
    }
}
