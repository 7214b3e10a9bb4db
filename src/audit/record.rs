//! What one audit line says: a gated decision or a completed call, read or get, with who asked
//! (never a credential), where it went, what was decided by which rule, and how it ended.

use serde::Serialize;
use serde_json::value::RawValue;
use std::time::{SystemTime, UNIX_EPOCH};

/// One audit event. The writer adds `seq` and `prev` in front of these fields.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Event {
    /// RFC 3339, UTC, milliseconds.
    pub time: String,
    pub event: Kind,
    pub trace_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    pub principal: Option<Principal>,
    /// The `[profiles.NAME]` whose endpoint the request came to (absent: the main endpoint).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    pub method: String,
    /// The exposed tool or prompt name or resource URI, as the host sent it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The upstream (its configured name) and its own name for the item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original: Option<String>,
    /// The upstream grant the call went with (its id, as `mcpmux grants` lists it; never a
    /// token), when the upstream signs in with `auth = {...}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
    /// `allowed` or `denied` (on a decision line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<&'static str>,
    /// The first rule that made the decision (`policy[0]`), its line, and its file when that is
    /// not the configuration file itself (an `include`d one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_file: Option<String>,
    /// Why, in words (the decision with every rule that made it, or the step-up refusal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// On a completion: `ok`, `is_error` (a tool result with `isError: true`), `error` (a
    /// JSON-RPC error, `error_code`), or `cancelled` (the host cancelled it or went away).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<i64>,
    /// A tool result's `isError`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    /// The request's `arguments`, only when a rule that applies says `audit_arguments = true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Box<RawValue>>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The policy (or step-up) decided on a gated request.
    #[default]
    Decision,
    /// A call, get, read, subscribe or completion that was allowed ended.
    Completed,
    /// An upstream's tool definition differs from its pin (`[pinning]`): `upstream`,
    /// `original` (its tool name), `reason` (the members that changed and both hashes).
    #[serde(rename = "tool_drift")]
    ToolDrift,
}

/// Who asked: the token's issuer and subject, or the API key's name, and the OAuth client; the
/// subject of the client certificate its connection presented (alone, or beside the others).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Principal {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_certificate: Option<String>,
}

/// How a request ended: `outcome`, `error_code`, `is_error` of a completion line.
pub type Ending = (&'static str, Option<i64>, Option<bool>);

/// How a response ended, read from its JSON-RPC text.
pub fn outcome_of(response: &str) -> Ending {
    #[derive(serde::Deserialize)]
    struct Peek<'a> {
        #[serde(borrow)]
        result: Option<&'a RawValue>,
        #[serde(borrow)]
        error: Option<&'a RawValue>,
    }
    match serde_json::from_str::<Peek<'_>>(response) {
        Ok(Peek { error: Some(e), .. }) => error_ending(e.get()),
        Ok(Peek { result: Some(r), .. }) => result_ending(r.get()),
        _ => ("error", None, None),
    }
}

/// The ending of a JSON-RPC error object: its code.
pub fn error_ending(error: &str) -> Ending {
    #[derive(serde::Deserialize)]
    struct ErrorPeek {
        code: Option<i64>,
    }
    let code = serde_json::from_str::<ErrorPeek>(error).ok().and_then(|e| e.code);
    ("error", code, None)
}

/// The ending of a result: a tool result's `isError`.
pub fn result_ending(result: &str) -> Ending {
    #[derive(serde::Deserialize)]
    struct ResultPeek {
        #[serde(rename = "isError")]
        is_error: Option<bool>,
    }
    match serde_json::from_str::<ResultPeek>(result)
        .ok()
        .and_then(|r| r.is_error)
    {
        Some(true) => ("is_error", None, Some(true)),
        other => ("ok", None, other),
    }
}

/// Now, as RFC 3339 UTC with milliseconds (`2026-11-23T16:35:03.123Z`).
pub fn now_rfc3339() -> String {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    rfc3339(since.as_secs(), since.subsec_millis())
}

/// `secs` since the Unix epoch (and `millis`) as RFC 3339 UTC.
pub fn rfc3339(secs: u64, millis: u32) -> String {
    let days = (secs / 86_400) as i64;
    let rest = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(1_795_451_703, 123), "2026-11-23T16:35:03.123Z");
        assert_eq!(rfc3339(4_107_542_399, 999), "2100-02-28T23:59:59.999Z");
    }

    #[test]
    fn outcomes_are_read_from_the_response() {
        assert_eq!(
            outcome_of(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#),
            ("ok", None, None)
        );
        assert_eq!(
            outcome_of(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}}"#),
            ("ok", None, Some(false))
        );
        assert_eq!(
            outcome_of(r#"{"jsonrpc":"2.0","id":1,"result":{"isError":true,"content":[]}}"#),
            ("is_error", None, Some(true))
        );
        assert_eq!(
            outcome_of(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}"#),
            ("error", Some(-32602), None)
        );
    }
}
