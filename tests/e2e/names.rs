//! The name budget in front of a real upstream (the Python SDK over stdio,
//! `tests/fixtures/py_names_server.py`) whose tool and prompt names are long (100+ characters),
//! dotted, slashed, spaced and non-ASCII: every name a host lists passes the Claude, OpenAI and
//! Gemini name rules within `max_name_length - name_reserve`, is unique, says its origin in
//! `_meta["mcpmux/original"]`, and reaches the upstream's own tool or prompt; lists come by
//! server, then name; a restarted gateway gives the same names.

use crate::support::mcp::RawSession;
use crate::support::*;
use serde_json::{json, Value};
use std::collections::HashSet;

/// A name that is long on its own (104 characters), and one sharing its first 90.
const LONG: &str =
    "summarize_the_quarterly_financial_reports_of_every_subsidiary_and_compare_them_with_last_years_figures";
const LONG_TOO: &str =
    "summarize_the_quarterly_financial_reports_of_every_subsidiary_and_compare_them_with_budget_forecasts";

/// The tools of server `names` (configured first), as the upstream names them.
const NAMES: &[&str] = &[
    LONG,
    LONG_TOO,
    "files.read",
    "files_read",
    "fs/write",
    "read file",
    "café_überprüfen",
    "数据",
    "3d_print",
    "echo",
];

/// The tools of server `alpha` (configured second, listed first).
const ALPHA: &[&str] = &["echo", "files.read"];

fn servers() -> String {
    let python = path_str(&peers().python);
    let script = path_str(&repo_root().join("tests/fixtures/py_names_server.py"));
    let args = |names: &[&str]| {
        let mut all = vec![script.clone()];
        all.extend(names.iter().map(|n| n.to_string()));
        toml_list(&all)
    };
    format!(
        "[servers.names]\ncommand = {python:?}\nargs = {}\n\n[servers.alpha]\ncommand = {python:?}\nargs = {}\n",
        args(NAMES),
        args(ALPHA)
    )
}

/// Whether `name` matches the JSON Schema `pattern`.
fn matches(pattern: &str, name: &str) -> bool {
    let schema = json!({"type": "string", "pattern": pattern});
    let validator = jsonschema::validator_for(&schema).expect("the pattern compiles");
    validator.is_valid(&json!(name))
}

/// Check every listed item's name against the three APIs' rules and the budget, that each is
/// unique, carries its origin, and that the list comes by server, then name.
fn check_names(items: &[Value], budget: usize, what: &str) -> Vec<(String, String, String)> {
    let rules = [
        ("Claude", "^[a-zA-Z0-9_-]{1,64}$"),
        ("OpenAI", "^[a-zA-Z0-9_-]{1,64}$"),
        ("Gemini", "^[a-zA-Z_][a-zA-Z0-9_.-]{0,63}$"),
    ];
    let mut seen = HashSet::new();
    let mut rows = Vec::new();
    for item in items {
        let name = item["name"].as_str().unwrap_or_default();
        for (api, pattern) in rules {
            assert!(
                matches(pattern, name),
                "{what} {name:?} breaks {api}'s rule {pattern}"
            );
        }
        assert!(name.len() <= budget, "{what} {name:?} is over {budget}");
        assert!(seen.insert(name.to_string()), "{what} {name:?} is listed twice");
        let origin = &item["_meta"]["mcpmux/original"];
        let server = origin["server"].as_str().unwrap_or_default();
        let original = origin["name"].as_str().unwrap_or_default();
        assert!(!server.is_empty() && !original.is_empty(), "{item}");
        rows.push((server.to_string(), name.to_string(), original.to_string()));
    }
    let keys: Vec<(&str, &str)> = rows.iter().map(|(s, n, _)| (s.as_str(), n.as_str())).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "{what}s by server, then name (in byte order)");
    rows
}

/// The upstreams' own names, as the rows say, per server.
fn originals(rows: &[(String, String, String)], server: &str, strip: &str) -> HashSet<String> {
    (rows.iter())
        .filter(|(s, _, _)| s == server)
        .map(|(_, _, o)| o.strip_prefix(strip).unwrap_or(o).to_string())
        .collect()
}

/// List through a gateway, check everything, call every tool and get every prompt; returns the
/// tools list as hosts saw it.
async fn list_and_call(gw: &mcpmux::Gateway, budget: usize) -> Vec<Value> {
    let s = RawSession::open(&gw.url(), json!({})).await;
    let (tools, _) = s.list_all("tools/list", "tools").await;
    let rows = check_names(&tools, budget, "tool");
    let want = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<HashSet<_>>();
    assert_eq!(originals(&rows, "names", ""), want(NAMES), "{tools:#?}");
    assert_eq!(originals(&rows, "alpha", ""), want(ALPHA), "{tools:#?}");
    for tool in &tools {
        let original = &tool["_meta"]["mcpmux/original"]["name"];
        assert_eq!(
            &tool["title"], original,
            "a tool without a title gets its own name: {tool}"
        );
        let name = tool["name"].as_str().unwrap_or_default();
        let text = s.tool_text(name, json!({})).await;
        assert_eq!(json!(text), *original, "{name} reached another tool");
    }
    let exposed: HashSet<&str> = rows.iter().map(|(_, n, _)| n.as_str()).collect();
    for kept in [
        "names__echo",
        "alpha__echo",
        "names__files_read",
        "names__3d_print",
    ] {
        assert!(
            exposed.contains(kept),
            "a name that fits is kept as it is: {exposed:?}"
        );
    }
    if budget >= "names__cafe_uberprufen".len() {
        assert!(exposed.contains("names__cafe_uberprufen"), "{exposed:?}");
        assert!(exposed.contains("names__fs_write") && exposed.contains("names__read_file"));
    }

    let (prompts, _) = s.list_all("prompts/list", "prompts").await;
    let rows = check_names(&prompts, budget, "prompt");
    assert_eq!(originals(&rows, "names", "prompt_"), want(NAMES), "{prompts:#?}");
    for (_, name, original) in &rows {
        let got = s
            .call("prompts/get", json!({"name": name, "arguments": {}}))
            .await;
        let text = &got["result"]["messages"][0]["content"]["text"];
        assert_eq!(text.as_str(), original.strip_prefix("prompt_"), "{name}: {got}");
    }
    tools
}

async fn boot(reserve: usize) -> mcpmux::Gateway {
    boot_gateway(&servers(), &format!("name_reserve = {reserve}\n")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_name_fits_every_model_api_reaches_its_tool_and_survives_a_restart() {
    let _suite = crate::suite::enter(module_path!());
    let gw = boot(0).await;
    let first = list_and_call(&gw, 64).await;
    gw.stop().await;
    let gw = boot(0).await;
    let again = list_and_call(&gw, 64).await;
    gw.stop().await;
    assert_eq!(
        first, again,
        "a restarted gateway lists the same tools, names and order"
    );
    let name_of = |original: &str| {
        (first.iter())
            .find(|t| t["_meta"]["mcpmux/original"] == json!({"server": "names", "name": original}))
            .and_then(|t| t["name"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    // The long ones keep a readable head and differ by their hash.
    let (long, long_too) = (name_of(LONG), name_of(LONG_TOO));
    assert!(
        long.starts_with("names__summarize_the_quarterly") && long.len() == 64,
        "{long}"
    );
    assert_ne!(long, long_too);
    // The dotted name meets `files_read` once mapped: it takes a hash, `files_read` keeps its name.
    assert!(
        name_of("files.read").starts_with("names__files_read_"),
        "{first:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_reserve_leaves_room_for_the_hosts_prefix() {
    let _suite = crate::suite::enter(module_path!());
    let gw = boot(24).await;
    let tools = list_and_call(&gw, 40).await;
    gw.stop().await;
    // Claude Code's own prefix for a server it calls "mcpmux" still leaves every name valid.
    for tool in &tools {
        let hosted = format!("mcp__mcpmux__{}", tool["name"].as_str().unwrap_or_default());
        assert!(matches("^[a-zA-Z0-9_-]{1,64}$", &hosted), "{hosted}");
    }
}
