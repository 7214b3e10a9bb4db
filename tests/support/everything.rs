//! What a client run of the `everything` scenario (tests/clients) must have observed through
//! mcpmux in front of server-everything: sampling, elicitation, progress, prompts, resources and
//! logging/setLevel, optionally roots. Shared by the real-client tests and the interop matrix.

use super::ClientRun;
use serde_json::Value;

/// The strings of a JSON array (empty when it is not one).
pub fn str_list(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Every check of an `everything` run against upstream namespace `namespace`; `roots` also
/// requires the roots round trip. The error names the first check that failed.
pub fn check_everything(run: &ClientRun, namespace: &str, roots: bool) -> Result<(), String> {
    if !run.success() {
        return Err(format!("the client failed: {}", run.json["error"]));
    }
    let o = &run.json;
    let count = |key: &str| o[key].as_u64().unwrap_or(0);
    let require = |ok: bool, what: &str| if ok { Ok(()) } else { Err(what.to_string()) };
    require(
        o["server_name"] == "mcpmux",
        "the client did not see mcpmux as the server",
    )?;
    require(o["set_level"] == "ok", "logging/setLevel failed")?;
    require(
        count("sampling_calls") >= 1,
        "no sampling request reached the client",
    )?;
    require(
        o["sampling_result_has_text"] == true,
        "sampled text not in the tool result",
    )?;
    require(
        count("elicitation_calls") >= 1,
        "no elicitation request reached the client",
    )?;
    require(
        o["elicitation_accepted"] == true,
        "elicitation answer not seen by the upstream",
    )?;
    if roots {
        require(count("roots_calls") >= 1, "no roots/list reached the client")?;
        require(
            o["roots_listed"] == true,
            "the client's root not seen by the upstream",
        )?;
    }
    let progress = o["progress"].as_array().map(Vec::len).unwrap_or(0);
    require(
        progress >= 3,
        &format!("expected >= 3 progress notifications, got {progress}"),
    )?;
    let prompt = format!("{namespace}__simple-prompt");
    require(
        str_list(&o["prompts"]).contains(&prompt.as_str()),
        "prompt not namespaced as expected",
    )?;
    let prefix = format!("mcpmux://{namespace}/");
    let listed = o["resource_uri"].as_str().unwrap_or_default();
    let read = o["resource_read_uri"].as_str().unwrap_or_default();
    require(
        read.starts_with(&prefix),
        &format!("resource read back as {read:?}, expected prefix {prefix:?}"),
    )?;
    require(
        listed == read,
        "resources/read answered for a different URI than listed",
    )?;
    require(count("resource_text_len") > 0, "resource read returned no text")
}
