//! The shape rules of the params of every method mcpmux serves or routes, in one place: a request
//! whose params have the wrong shape is answered -32602 by mcpmux and never reaches an upstream
//! (a string `arguments` made a shared mcp-server-sqlite exit for every host).

use crate::error::RequestError;
use crate::protocol::RawObject;
use serde_json::value::RawValue;

/// What a member must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    String,
    Object,
    /// An object whose members are all strings (prompt arguments).
    StringMap,
    /// A string or an integer (a progress token).
    Token,
}

impl Kind {
    fn described(self) -> &'static str {
        match self {
            Kind::String => "a string",
            Kind::Object => "an object",
            Kind::StringMap => "an object of strings",
            Kind::Token => "a string or an integer",
        }
    }

    fn fits(self, value: &RawValue) -> bool {
        let text = value.get();
        match self {
            Kind::String => text.starts_with('"'),
            Kind::Object => text.starts_with('{'),
            Kind::StringMap => {
                RawObject::parse(text).is_ok_and(|o| o.members().all(|(_, v)| Kind::String.fits(v)))
            }
            Kind::Token => {
                text.starts_with('"') || text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok()
            }
        }
    }
}

/// One rule: the member at `path` (its parents are objects the rules check first) must be
/// `kind`, and must be there when `required`.
struct Rule {
    path: &'static [&'static str],
    /// How the member is named in the error (`params.` + this).
    name: &'static str,
    kind: Kind,
    required: bool,
}

const fn rule(path: &'static [&'static str], name: &'static str, kind: Kind, required: bool) -> Rule {
    Rule {
        path,
        name,
        kind,
        required,
    }
}

/// Rules every request's params follow.
const COMMON: &[Rule] = &[
    rule(&["_meta"], "_meta", Kind::Object, false),
    rule(
        &["_meta", "progressToken"],
        "_meta.progressToken",
        Kind::Token,
        false,
    ),
];
const CALL_TOOL: &[Rule] = &[
    rule(&["name"], "name", Kind::String, true),
    rule(&["arguments"], "arguments", Kind::Object, false),
];
const GET_PROMPT: &[Rule] = &[
    rule(&["name"], "name", Kind::String, true),
    rule(&["arguments"], "arguments", Kind::StringMap, false),
];
const BY_URI: &[Rule] = &[rule(&["uri"], "uri", Kind::String, true)];
const COMPLETE: &[Rule] = &[
    rule(&["ref"], "ref", Kind::Object, true),
    rule(&["ref", "type"], "ref.type", Kind::String, true),
    rule(&["argument"], "argument", Kind::Object, true),
    rule(&["argument", "name"], "argument.name", Kind::String, true),
    rule(&["argument", "value"], "argument.value", Kind::String, true),
    rule(&["context"], "context", Kind::Object, false),
    rule(
        &["context", "arguments"],
        "context.arguments",
        Kind::StringMap,
        false,
    ),
];
const LIST: &[Rule] = &[rule(&["cursor"], "cursor", Kind::String, false)];
const SET_LEVEL: &[Rule] = &[rule(&["level"], "level", Kind::String, true)];

/// The rules of one method beyond the common ones (none for a method mcpmux does not know).
fn rules_of(method: &str) -> &'static [Rule] {
    match method {
        "tools/call" => CALL_TOOL,
        "prompts/get" => GET_PROMPT,
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => BY_URI,
        "completion/complete" => COMPLETE,
        "tools/list" | "prompts/list" | "resources/list" | "resources/templates/list" => LIST,
        "logging/setLevel" => SET_LEVEL,
        _ => &[],
    }
}

/// Check the params (already known to be an object) of a `method` request: the first rule broken
/// is the -32602 answer.
pub fn check(method: &str, params: &RawObject) -> Result<(), RequestError> {
    for rule in COMMON.iter().chain(rules_of(method)) {
        match fits(params, rule.path, rule.kind) {
            Some(false) => {
                return Err(RequestError::WrongParam {
                    name: rule.name,
                    expected: rule.kind.described(),
                })
            }
            None if rule.required => return Err(RequestError::MissingParam(rule.name)),
            _ => {}
        }
    }
    Ok(())
}

/// Whether the member at `path` is a `kind`; `None` when it is absent (or a parent is not an
/// object: that is reported by the parent's own rule, which comes first).
fn fits(object: &RawObject, path: &[&str], kind: Kind) -> Option<bool> {
    let (first, rest) = path.split_first()?;
    let value = object.get(first)?;
    if rest.is_empty() {
        return Some(kind.fits(value));
    }
    fits(&RawObject::parse(value.get()).ok()?, rest, kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(method: &str, params: &str) -> Result<(), String> {
        let params = RawObject::parse(params).unwrap();
        check(method, &params).map_err(|e| e.to_string())
    }

    #[test]
    fn tool_calls_need_a_string_name_and_object_arguments() {
        assert_eq!(
            verdict("tools/call", r#"{"name":"t","arguments":{"a":[1]}}"#),
            Ok(())
        );
        assert_eq!(verdict("tools/call", r#"{"name":"t"}"#), Ok(()));
        let wrong = "params.arguments must be an object".to_string();
        assert_eq!(
            verdict("tools/call", r#"{"name":"t","arguments":"x"}"#),
            Err(wrong.clone())
        );
        assert_eq!(
            verdict("tools/call", r#"{"name":"t","arguments":[1]}"#),
            Err(wrong.clone())
        );
        assert_eq!(
            verdict("tools/call", r#"{"name":"t","arguments":null}"#),
            Err(wrong)
        );
        assert_eq!(
            verdict("tools/call", r#"{"name":7}"#),
            Err("params.name must be a string".into())
        );
        assert_eq!(verdict("tools/call", "{}"), Err("params.name is required".into()));
    }

    #[test]
    fn other_methods_have_their_shapes() {
        assert_eq!(
            verdict("prompts/get", r#"{"name":"p","arguments":{"a":"1"}}"#),
            Ok(())
        );
        assert!(verdict("prompts/get", r#"{"name":"p","arguments":{"a":1}}"#).is_err());
        assert!(verdict("resources/read", r#"{"uri":["x"]}"#).is_err());
        assert!(verdict("resources/subscribe", "{}").is_err());
        let complete = r#"{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":""}}"#;
        assert_eq!(verdict("completion/complete", complete), Ok(()));
        assert!(verdict(
            "completion/complete",
            r#"{"ref":"p","argument":{"name":"a","value":""}}"#
        )
        .is_err());
        assert_eq!(
            verdict(
                "completion/complete",
                r#"{"ref":{"type":"ref/prompt"},"argument":{"name":"a"}}"#
            ),
            Err("params.argument.value is required".into())
        );
        assert!(verdict("tools/list", r#"{"cursor":5}"#).is_err());
        assert!(verdict("ping", r#"{"_meta":{"progressToken":1.5}}"#).is_err());
        assert!(verdict("ping", r#"{"_meta":"x"}"#).is_err());
        assert_eq!(verdict("ping", r#"{"_meta":{"progressToken":"t"}}"#), Ok(()));
        assert_eq!(verdict("vendor/thing", r#"{"anything":[1]}"#), Ok(()));
    }
}
