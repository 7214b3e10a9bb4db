//! Discovery by search (issue 27): a profile with `discovery = "search"` lists only
//! `mcpmux__search_tools`, `mcpmux__describe_tool` and `mcpmux__call_tool`, and a real host (the
//! Python SDK, both eras) that lists once works through them alone against real
//! server-everything: search, describe, a call, a long call with progress, a sampling request
//! within a call, a cancellation that reaches the upstream (the in-repo test server); a tool the
//! profile leaves out is neither found, described nor called. A profile is also chosen on the
//! main endpoint by a header or an API key's groups, per request; `auto` lists the catalog while
//! it fits its token budget and the meta-tools past it; `[[policy]]` filters search results.

use crate::support::mcp::RawSession;
use crate::support::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;

const META: [&str; 3] = [
    "mcpmux__call_tool",
    "mcpmux__describe_tool",
    "mcpmux__search_tools",
];

/// server-everything and the test server `t`, with the profile(s) in `profiles`.
fn servers(profiles: &str) -> String {
    let (cmd, args) = peers().everything_stdio_cmd();
    format!(
        "[servers.everything]\ncommand = {cmd:?}\nargs = {}\n\n{}\n{profiles}",
        toml_list(&args),
        test_server_toml("t", &[], None),
    )
}

const AGENT: &str = "[profiles.agent]\npath = \"/mcp/agent\"\ndiscovery = \"search\"\n\
     tools = { exclude = [\"everything__get-env\"] }\n\
     match = { header = \"X-Mcpmux-Profile\", value = \"agent\" }\n";

/// The Python SDK client's `meta` scenario at `url`, with `headers` on every request.
async fn meta_run(url: &str, mode: &str, headers: Value) -> ClientRun {
    let transport = if url.ends_with("/sse") { "sse" } else { "http" };
    let mut cmd = std::process::Command::new(&peers().python);
    cmd.arg(repo_root().join("tests/clients/py_client.py"))
        .arg(url)
        .args([
            "meta",
            "everything__get-env",
            "--mode",
            mode,
            "--transport",
            transport,
        ])
        .args(["--prefix", "everything__", "--cancel-prefix", "t__"])
        .env("MCPMUX_TEST_HEADERS", headers.to_string());
    tokio::task::spawn_blocking(move || run_client(cmd, std::time::Duration::from_secs(90)))
        .await
        .expect("the client runs")
}

fn names(tools: &[Value]) -> BTreeSet<String> {
    (tools.iter())
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_lists_once_works_through_the_meta_tools_in_both_eras() {
    let _suite = crate::suite::enter(module_path!());
    let gw = boot_gateway(&servers(AGENT), "").await;
    let agent = format!("http://{}/mcp/agent", gw.local_addr());
    for mode in ["legacy", "2026-07-28"] {
        let run = meta_run(&agent, mode, json!({})).await;
        run.assert_ok();
        let o = &run.json;
        assert_eq!(o["tools"], json!(META), "{run}");
        assert!(o["progress"].as_array().is_some_and(|p| p.len() >= 3), "{run}");
        assert_eq!(o["cancel_reached_upstream"], json!(true), "{run}");
        assert_eq!(o["hidden"]["found"], json!(false), "{run}");
    }
    // The main endpoint is unchanged: the catalog, no meta-tools.
    let main = RawSession::open(&format!("http://{}/mcp", gw.local_addr()), json!({})).await;
    let (tools, _) = main.list_all("tools/list", "tools").await;
    let listed = names(&tools);
    assert!(
        listed.contains("everything__echo") && listed.contains("t__slow"),
        "{listed:?}"
    );
    assert!(META.iter().all(|m| !listed.contains(*m)), "{listed:?}");
    let refused = main
        .call(
            "tools/call",
            json!({"name": "mcpmux__search_tools", "arguments": {"query": "echo"}}),
        )
        .await;
    assert_eq!(refused["error"]["code"], json!(-32602), "{refused}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_or_an_api_keys_group_chooses_the_profile_on_the_main_endpoint() {
    let _suite = crate::suite::enter(module_path!());
    let profiles = format!(
        "{AGENT}\n[profiles.bots]\npath = \"/mcp/bots\"\ndiscovery = \"search\"\n\
         match = {{ claim = \"groups\", value = \"agents\" }}\n\n\
         [auth]\n\
         [[auth.api_keys]]\nname = \"bot\"\nkey = \"bot-key-0123456789abcdef\"\ngroups = [\"agents\"]\n\
         [[auth.api_keys]]\nname = \"dev\"\nkey = \"dev-key-0123456789abcdef\"\ngroups = [\"eng\"]\n"
    );
    let gw = boot_gateway(&servers(&profiles), "").await;
    let main = format!("http://{}/mcp", gw.local_addr());
    // The header: the Python SDK works through the meta-tools on the main path, and on the main
    // legacy HTTP+SSE endpoint.
    let headers = json!({"X-Mcpmux-Profile": "agent", "Authorization": "Bearer dev-key-0123456789abcdef"});
    for url in [main.clone(), format!("http://{}/sse", gw.local_addr())] {
        let run = meta_run(&url, "legacy", headers.clone()).await;
        run.assert_ok();
        assert_eq!(run.json["tools"], json!(META), "{run}");
    }
    // Per request: the same principal without the header sees the catalog.
    let dev = RawSession::open_as(&main, "dev-key-0123456789abcdef").await;
    let (tools, _) = dev.list_all("tools/list", "tools").await;
    assert!(names(&tools).contains("everything__echo"), "{tools:?}");
    // The key's groups: the bots profile, with no header at all.
    let bot = RawSession::open_as(&main, "bot-key-0123456789abcdef").await;
    let (tools, _) = bot.list_all("tools/list", "tools").await;
    assert_eq!(
        names(&tools),
        META.iter().map(|m| m.to_string()).collect(),
        "{tools:?}"
    );
    let echo = bot
        .call(
            "tools/call",
            json!({"name": "mcpmux__call_tool", "arguments": {"name": "everything__echo", "arguments": {"message": "bot"}}}),
        )
        .await;
    assert!(
        echo["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("bot")),
        "{echo}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_lists_the_catalog_within_its_budget_and_the_meta_tools_past_it() {
    let _suite = crate::suite::enter(module_path!());
    let profiles = "[profiles.small]\npath = \"/mcp/small\"\ndiscovery = \"auto\"\ntoken_budget = 100000\n\
                    servers = [\"t\"]\n\n\
                    [profiles.big]\npath = \"/mcp/big\"\ndiscovery = \"auto\"\ntoken_budget = 200\n";
    let gw = boot_gateway(&servers(profiles), "").await;
    let at = |path: &str| format!("http://{}{path}", gw.local_addr());
    let small = RawSession::open(&at("/mcp/small"), json!({})).await;
    let (tools, _) = small.list_all("tools/list", "tools").await;
    let listed = names(&tools);
    assert!(listed.contains("t__echo"), "{listed:?}");
    assert!(
        META.iter().all(|m| !listed.contains(*m)),
        "catalog mode lists no meta-tools: {listed:?}"
    );
    // Past the budget: the meta-tools, and they search the whole profile's catalog.
    let big = RawSession::open(&at("/mcp/big"), json!({})).await;
    let (tools, _) = big.list_all("tools/list", "tools").await;
    assert_eq!(names(&tools), META.iter().map(|m| m.to_string()).collect());
    let found = big
        .call(
            "tools/call",
            json!({"name": "mcpmux__search_tools", "arguments": {"query": "echo a message back"}}),
        )
        .await;
    let hits: Vec<&str> = (found["result"]["structuredContent"]["tools"]
        .as_array()
        .into_iter()
        .flatten())
    .filter_map(|t| t["name"].as_str())
    .collect();
    assert!(hits.contains(&"everything__echo"), "{found}");
    // Bad arguments are a tool error the model can read, not a protocol error.
    let bad = big
        .call(
            "tools/call",
            json!({"name": "mcpmux__search_tools", "arguments": {"limit": 0}}),
        )
        .await;
    assert_eq!(bad["result"]["isError"], json!(true), "{bad}");
    let no_name = big
        .call(
            "tools/call",
            json!({"name": "mcpmux__call_tool", "arguments": {"arguments": {}}}),
        )
        .await;
    assert_eq!(no_name["error"]["code"], json!(-32602), "{no_name}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_filters_what_search_finds_describes_and_calls() {
    let _suite = crate::suite::enter(module_path!());
    let profiles = format!(
        "{AGENT}\n[auth]\n\
         [[auth.api_keys]]\nname = \"ci\"\nkey = \"ci-key-0123456789abcdef\"\ngroups = [\"ci\"]\n\n\
         [[policy]]\ngroups = [\"ci\"]\nallow = [\"everything__*\"]\ndeny = [\"everything__echo\"]\n"
    );
    let gw = boot_gateway(&servers(&profiles), "").await;
    let ci = RawSession::open_as(
        &format!("http://{}/mcp/agent", gw.local_addr()),
        "ci-key-0123456789abcdef",
    )
    .await;
    let search = |query: &'static str| {
        let ci = &ci;
        async move {
            let found = ci
                .call(
                    "tools/call",
                    json!({"name": "mcpmux__search_tools", "arguments": {"query": query, "limit": 50}}),
                )
                .await;
            (found["result"]["structuredContent"]["tools"]
                .as_array()
                .into_iter()
                .flatten())
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect::<Vec<String>>()
        }
    };
    let echo = search("echo a message").await;
    assert!(!echo.contains(&"everything__echo".to_string()), "{echo:?}");
    let slow = search("slow").await;
    assert!(
        slow.iter().all(|n| n.starts_with("everything__")),
        "the policy allows only everything__*: {slow:?}"
    );
    let sum = search("add two numbers").await;
    assert!(sum.contains(&"everything__get-sum".to_string()), "{sum:?}");
    let described = ci
        .call(
            "tools/call",
            json!({"name": "mcpmux__describe_tool", "arguments": {"name": "everything__echo"}}),
        )
        .await;
    assert_eq!(described["result"]["isError"], json!(true), "{described}");
    let called = ci
        .call(
            "tools/call",
            json!({"name": "mcpmux__call_tool", "arguments": {"name": "everything__echo", "arguments": {"message": "x"}}}),
        )
        .await;
    assert_eq!(called["error"]["code"], json!(-32602), "{called}");
    gw.stop().await;
}
