//! Unit tests of the meta-tools through the pipeline: a hub whose upstreams are never started,
//! its catalog filled by hand; a `search` profile, an `auto` profile with a small budget, the
//! main endpoint.

use super::{request, Outcome};
use crate::catalog::ListKind;
use crate::config::Config;
use crate::core::context::RequestCtx;
use crate::core::hub::Hub;
use crate::protocol::{ClientCaps, RawObject, RequestId};
use crate::session::SessionState;
use serde_json::{json, Value};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const CONFIG: &str = r#"
[servers.t]
command = "unused"
[servers.u]
command = "unused"
[profiles.agent]
path = "/mcp/agent"
discovery = "search"
tools = { exclude = ["u__*"] }
[profiles.auto]
path = "/mcp/auto"
discovery = "auto"
token_budget = 40
"#;

fn hub() -> Arc<Hub> {
    let config = Config::from_toml_str(CONFIG, "t.toml", &|_| None).unwrap();
    let (hub, _inputs) = Hub::new(Arc::new(config), CancellationToken::new(), None);
    let tool = |name: &str, description: &str| {
        RawObject::parse(
            &json!({"name": name, "description": description, "inputSchema": {"type": "object"}}).to_string(),
        )
        .unwrap()
    };
    hub.catalog.replace(
        &"t".into(),
        ListKind::Tools,
        vec![
            tool("echo", "Echo a message back"),
            tool("add", "Add two numbers"),
        ],
    );
    hub.catalog.replace(
        &"u".into(),
        ListKind::Tools,
        vec![tool("secret", "Echo a secret")],
    );
    hub
}

fn session(hub: &Hub, profile: Option<&str>) -> RequestCtx {
    let state = SessionState::new("2025-11-25", ClientCaps::ALL).in_profile(profile);
    RequestCtx::on(hub.open_session(format!("{profile:?}"), state))
}

async fn reply(hub: &Arc<Hub>, ctx: &RequestCtx, method: &str, params: Value) -> Value {
    let params = RawObject::parse(&params.to_string()).unwrap();
    match request(hub, ctx, RequestId::number(1), method.into(), params).await {
        Outcome::Reply(msg) => serde_json::from_str(&msg.to_json()).unwrap(),
        _ => panic!("{method}: not a reply"),
    }
}

fn names(list: &Value) -> Vec<&str> {
    (list["result"]["tools"].as_array().into_iter().flatten())
        .filter_map(|t| t["name"].as_str())
        .collect()
}

#[tokio::test]
async fn a_search_profile_lists_the_meta_tools_and_searches_only_its_view() {
    let hub = hub();
    let agent = session(&hub, Some("agent"));
    let listed = reply(&hub, &agent, "tools/list", json!({})).await;
    assert_eq!(
        names(&listed),
        [
            "mcpmux__search_tools",
            "mcpmux__describe_tool",
            "mcpmux__call_tool"
        ]
    );
    let cursor = reply(&hub, &agent, "tools/list", json!({"cursor": "x"})).await;
    assert_eq!(cursor["error"]["code"], json!(-32602), "{cursor}");
    let search = json!({"name": "mcpmux__search_tools", "arguments": {"query": "echo"}});
    let found = reply(&hub, &agent, "tools/call", search).await;
    let hits: Vec<&str> = (found["result"]["structuredContent"]["tools"]
        .as_array()
        .unwrap()
        .iter())
    .filter_map(|t| t["name"].as_str())
    .collect();
    assert_eq!(hits, ["t__echo"], "u__secret is outside the profile: {found}");
    assert_eq!(
        found["result"]["content"][0]["text"]
            .as_str()
            .map(|t| serde_json::from_str::<Value>(t).unwrap()),
        Some(found["result"]["structuredContent"].clone())
    );
    let describe = json!({"name": "mcpmux__describe_tool", "arguments": {"name": "t__add"}});
    let described = reply(&hub, &agent, "tools/call", describe).await;
    assert_eq!(
        described["result"]["structuredContent"]["tool"]["description"],
        json!("Add two numbers")
    );
    let hidden = json!({"name": "mcpmux__describe_tool", "arguments": {"name": "u__secret"}});
    assert_eq!(
        reply(&hub, &agent, "tools/call", hidden).await["result"]["isError"],
        json!(true)
    );
    for bad in [
        json!({}),
        json!({"query": "x", "limit": 0}),
        json!({"query": "x", "limit": 51}),
        json!({"query": 3}),
    ] {
        let call = json!({"name": "mcpmux__search_tools", "arguments": bad});
        let answer = reply(&hub, &agent, "tools/call", call).await;
        assert_eq!(answer["result"]["isError"], json!(true), "{bad}: {answer}");
    }
    // A call through the meta-tool is the call it names: a hidden or unknown tool is unknown.
    for (name, arguments) in [("u__secret", json!({})), ("nope", json!({}))] {
        let call = json!({"name": "mcpmux__call_tool", "arguments": {"name": name, "arguments": arguments}});
        let answer = reply(&hub, &agent, "tools/call", call).await;
        assert_eq!(answer["error"]["code"], json!(-32602), "{answer}");
        assert!(
            answer["error"]["message"].as_str().unwrap().contains(name),
            "{answer}"
        );
    }
    for bad in [
        json!({"arguments": {}}),
        json!({"name": 7}),
        json!({"name": "t__echo", "arguments": [1]}),
    ] {
        let call = json!({"name": "mcpmux__call_tool", "arguments": bad});
        let answer = reply(&hub, &agent, "tools/call", call).await;
        assert_eq!(answer["error"]["code"], json!(-32602), "{bad}: {answer}");
    }
}

#[tokio::test]
async fn auto_switches_at_its_budget_and_the_main_endpoint_has_no_meta_tools() {
    let hub = hub();
    // Three tools of ~90 bytes each: over 40 tokens.
    let auto = session(&hub, Some("auto"));
    assert_eq!(names(&reply(&hub, &auto, "tools/list", json!({})).await).len(), 3);
    assert!(names(&reply(&hub, &auto, "tools/list", json!({})).await)[0].starts_with("mcpmux__"));
    // One tool: within the budget, the catalog itself.
    hub.catalog.replace(&"t".into(), ListKind::Tools, Vec::new());
    hub.catalog.replace(
        &"u".into(),
        ListKind::Tools,
        vec![RawObject::parse(r#"{"name":"x"}"#).unwrap()],
    );
    assert_eq!(
        names(&reply(&hub, &auto, "tools/list", json!({})).await),
        ["u__x"]
    );
    let main = session(&hub, None);
    assert_eq!(
        names(&reply(&hub, &main, "tools/list", json!({})).await),
        ["u__x"]
    );
    let search = json!({"name": "mcpmux__search_tools", "arguments": {"query": "x"}});
    let answer = reply(&hub, &main, "tools/call", search).await;
    assert_eq!(
        answer["error"]["code"],
        json!(-32602),
        "not served on the main endpoint: {answer}"
    );
}
