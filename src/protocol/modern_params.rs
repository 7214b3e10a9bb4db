//! `x-mcp-header` parameters of 2026-07-28 tools: which arguments a tool's input schema mirrors
//! into `Mcp-Param-<Name>` headers, the header values an argument set calls for, and the check of
//! a request's headers against its arguments. Pure.

use super::modern::{decode_header_value, encode_header_value};
use serde_json::Value;

/// One annotated argument: the header suffix and the property path leading to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    pub name: String,
    pub path: Vec<String>,
}

impl ParamHeader {
    /// The lowercase header name, `mcp-param-<name>`.
    pub fn header(&self) -> String {
        format!("mcp-param-{}", self.name.to_ascii_lowercase())
    }
}

/// The annotated arguments of an input schema, reachable through plain `properties` chains.
pub fn param_headers(input_schema: &Value) -> Vec<ParamHeader> {
    let mut out = Vec::new();
    collect(input_schema, &mut Vec::new(), &mut out);
    out
}

fn collect(schema: &Value, path: &mut Vec<String>, out: &mut Vec<ParamHeader>) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, prop) in props {
        path.push(key.clone());
        if let Some(name) = prop.get("x-mcp-header").and_then(Value::as_str) {
            out.push(ParamHeader {
                name: name.to_string(),
                path: path.clone(),
            });
        }
        collect(prop, path, out);
        path.pop();
    }
}

fn value_at<'a>(arguments: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter()
        .try_fold(arguments, |v, key| v.get(key))
        .filter(|v| !v.is_null())
}

/// The header text for an argument value (strings may need the Base64 form).
fn header_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(encode_header_value(s)),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

/// The `Mcp-Param-*` headers a call with `arguments` must carry.
pub fn param_header_values(annotations: &[ParamHeader], arguments: &Value) -> Vec<(String, String)> {
    annotations
        .iter()
        .filter_map(|a| Some((a.header(), header_text(value_at(arguments, &a.path)?)?)))
        .collect()
}

/// Check a request's `Mcp-Param-*` headers against its arguments (answered with -32020).
/// `header` looks a header up by lowercase name.
pub fn check_param_headers<'h>(
    header: impl Fn(&str) -> Option<&'h str>,
    annotations: &[ParamHeader],
    arguments: &Value,
) -> Result<(), String> {
    for a in annotations {
        let expected = value_at(arguments, &a.path);
        let sent = header(&a.header());
        match (expected, sent) {
            (None, None) => {}
            (None, Some(_)) => {
                return Err(format!(
                    "Header mismatch: Mcp-Param-{} sent for an absent argument",
                    a.name
                ))
            }
            // A value with no header form (an object, an array, a fractional number) gets no
            // header from `param_header_values` (nor from the reference SDK), so none is
            // required; this check used to refuse what the gateway itself sends. Found by fuzzing.
            (Some(value), None) if header_text(value).is_none() => {}
            (Some(_), None) => {
                return Err(format!(
                    "Header mismatch: the Mcp-Param-{} header is missing",
                    a.name
                ))
            }
            (Some(value), Some(sent)) => {
                let decoded =
                    decode_header_value(sent.trim()).map_err(|e| format!("Mcp-Param-{}: {e}", a.name))?;
                let same = match value {
                    Value::String(s) => *s == decoded,
                    Value::Number(n) => {
                        decoded.parse::<i128>().ok()
                            == n.as_i64().map(i128::from).or(n.as_u64().map(i128::from))
                    }
                    Value::Bool(b) => decoded == b.to_string(),
                    _ => true,
                };
                if !same {
                    return Err(format!(
                        "Header mismatch: Mcp-Param-{} header value '{decoded}' does not match body value '{value}'",
                        a.name
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

    fn schema() -> Value {
        json!({"type":"object","properties":{
            "region":{"type":"string","x-mcp-header":"Region"},
            "count":{"type":"integer","x-mcp-header":"Count"},
            "opts":{"type":"object","properties":{"tenant":{"type":"string","x-mcp-header":"Tenant"}}},
            "plain":{"type":"string"}
        }})
    }

    #[test]
    fn annotations_are_found_through_properties() {
        let found = param_headers(&schema());
        let names: Vec<&str> = found.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["Region", "Count", "Tenant"]);
        assert_eq!(found[2].path, ["opts", "tenant"]);
        assert_eq!(found[0].header(), "mcp-param-region");
    }

    fn check(h: &HashMap<String, String>, a: &[ParamHeader], args: &Value) -> Result<(), String> {
        check_param_headers(|n| h.get(n).map(String::as_str), a, args)
    }

    #[test]
    fn headers_follow_the_arguments() {
        let a = param_headers(&schema());
        let args = json!({"region":"Hello, 世界","count":42,"opts":{"tenant":"t1"},"plain":"x"});
        let headers: HashMap<String, String> = param_header_values(&a, &args).into_iter().collect();
        assert_eq!(headers["mcp-param-region"], "=?base64?SGVsbG8sIOS4lueVjA==?=");
        assert_eq!(headers["mcp-param-count"], "42");
        assert!(!headers.contains_key("mcp-param-plain"));
        assert_eq!(check(&headers, &a, &args), Ok(()));
        let mut wrong = headers.clone();
        wrong.insert("mcp-param-count".into(), "41".into());
        assert!(check(&wrong, &a, &args).is_err());
        let mut missing = headers.clone();
        missing.remove("mcp-param-tenant");
        assert!(check(&missing, &a, &args).unwrap_err().contains("Tenant"));
        // An absent argument must not come with a header.
        let fewer = json!({"region":"Hello, 世界","count":42});
        assert!(check(&headers, &a, &fewer).is_err());
    }

    #[test]
    fn arguments_without_a_header_form_need_no_header() {
        let a = param_headers(&schema());
        let args = json!({"region":{"nested":true},"count":1.5,"opts":{"tenant":["t"]}});
        let values = param_header_values(&a, &args);
        assert!(values.is_empty(), "{values:?}");
        assert_eq!(check(&HashMap::new(), &a, &args), Ok(()));
    }
}
