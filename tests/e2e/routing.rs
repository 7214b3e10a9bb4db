//! Routing through mcpmux with the in-repo test server as upstreams: ids, cancellation,
//! progress, server-to-client requests, list_changed, pagination, URIs, subscriptions, logging,
//! faults.

use crate::support::mcp::*;
use crate::support::*;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc;

const SAMPLING: &str = r#"{"sampling":{},"elicitation":{},"roots":{}}"#;

struct TwoUpstreams {
    gw: mcpmux::Gateway,
    alpha_log: PathBuf,
    beta_log: PathBuf,
}

async fn two_upstreams(gateway_extra: &str) -> TwoUpstreams {
    let dir = scratch_dir("routing");
    let (alpha_log, beta_log) = (dir.join("alpha.jsonl"), dir.join("beta.jsonl"));
    let servers = format!(
        "{}\n{}",
        test_server_toml("alpha", &[], Some(&alpha_log)),
        test_server_toml("beta", &[], Some(&beta_log))
    );
    let gw = boot_gateway(&servers, gateway_extra).await;
    TwoUpstreams {
        gw,
        alpha_log,
        beta_log,
    }
}

fn caps() -> Value {
    serde_json::from_str(SAMPLING).unwrap()
}

fn text_of(resp: &Value) -> String {
    resp["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {resp}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_walks_every_upstream_page_and_serves_its_own_cursors() {
    let _suite = crate::suite::enter(module_path!());
    let env = two_upstreams("page_size = 7").await;
    let s = RawSession::open(&env.gw.url(), caps()).await;
    let (tools, pages) = s.list_all("tools/list", "tools").await;
    // 22 fixed + 25 generated tools per upstream, fetched upstream in pages of 10.
    assert_eq!(tools.len(), 94, "tools: {tools:?}");
    assert_eq!(pages, 94usize.div_ceil(7));
    let names: std::collections::HashSet<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 94);
    for n in ["alpha__echo", "alpha__gen_024", "beta__echo", "beta__gen_000"] {
        assert!(names.contains(n), "{n} missing");
    }
    let (resources, _) = s.list_all("resources/list", "resources").await;
    assert_eq!(resources.len(), 50);
    let (templates, _) = s.list_all("resources/templates/list", "resourceTemplates").await;
    assert_eq!(templates.len(), 26);
    let (prompts, _) = s.list_all("prompts/list", "prompts").await;
    assert_eq!(prompts.len(), 26);
    let bad = s.call("tools/list", json!({"cursor": "not-ours"})).await;
    assert_eq!(bad["error"]["code"], -32602);
    env.gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_sessions_reusing_ids_never_see_each_others_replies() {
    let _suite = crate::suite::enter(module_path!());
    let env = two_upstreams("").await;
    let url = env.gw.url();
    let mut tasks = Vec::new();
    for n in 0..16 {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let s = RawSession::open(&url, json!({})).await;
            let mut calls = Vec::new();
            for id in 1..=20 {
                let msg = format!("session {n} call {id}");
                let tool = if id % 2 == 0 { "alpha__echo" } else { "beta__echo" };
                let s = &s;
                calls.push(async move {
                    let (resp, _) = s
                        .call_with(
                            json!(id),
                            "tools/call",
                            json!({"name": tool, "arguments": {"message": msg.clone()}}),
                        )
                        .await;
                    assert_eq!(resp["id"], json!(id));
                    assert_eq!(text_of(&resp), format!("echo: {msg}"));
                });
            }
            futures_util::future::join_all(calls).await;
        }));
    }
    for t in tasks {
        t.await.expect("session task");
    }
    let s = RawSession::open(&url, json!({})).await;
    let seen: Vec<Value> = serde_json::from_str(&s.tool_text("alpha__seen_ids", json!({})).await).unwrap();
    let unique: std::collections::HashSet<String> = seen.iter().map(|v| v.to_string()).collect();
    assert_eq!(
        unique.len(),
        seen.len(),
        "an id was reused on the upstream connection"
    );
    assert!(seen.len() >= 160);
    env.gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_reaches_exactly_the_upstream_holding_the_request() {
    let _suite = crate::suite::enter(module_path!());
    let env = two_upstreams("").await;
    let s = RawSession::open(&env.gw.url(), json!({})).await;
    let mut slow = s
        .stream(
            json!("slow-1"),
            "tools/call",
            json!({"name":"alpha__slow","arguments":{"ms":30000}}),
        )
        .await;
    // Give the call time to reach the upstream before cancelling it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = s
        .notify(
            "notifications/cancelled",
            json!({"requestId":"slow-1","reason":"test"}),
        )
        .await;
    assert_eq!(status, 202);
    // The host gets no response for a cancelled request; its stream just ends.
    assert!(
        recv(&mut slow).await.is_none(),
        "a cancelled call must not be answered"
    );
    let alpha: Vec<Value> =
        serde_json::from_str(&s.tool_text("alpha__cancellations", json!({})).await).unwrap();
    let beta: Vec<Value> =
        serde_json::from_str(&s.tool_text("beta__cancellations", json!({})).await).unwrap();
    assert_eq!(alpha.len(), 1, "alpha saw {alpha:?}");
    assert!(
        beta.is_empty(),
        "beta must not see another upstream's cancellation: {beta:?}"
    );
    // The cancellation carried the upstream's id for that call, not the host's.
    let log = upstream_log(&env.alpha_log);
    let call = log
        .iter()
        .find(|m| m["params"]["name"] == "slow")
        .expect("slow call upstream");
    assert_eq!(alpha[0], call["id"]);
    assert!(log
        .iter()
        .all(|m| m["params"]["name"] != "slow" || m["id"] != json!("slow-1")));
    assert!(upstream_log(&env.beta_log)
        .iter()
        .all(|m| m["method"] != "notifications/cancelled"));
    env.gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_tokens_are_swapped_per_request_and_mapped_back() {
    let _suite = crate::suite::enter(module_path!());
    let env = two_upstreams("").await;
    let a = RawSession::open(&env.gw.url(), json!({})).await;
    let b = RawSession::open(&env.gw.url(), json!({})).await;
    let params = json!({"name":"alpha__progress","arguments":{"steps":3},"_meta":{"progressToken":"same"}});
    let (ra, rb) = tokio::join!(
        a.call_with(json!(1), "tools/call", params.clone()),
        b.call_with(json!(1), "tools/call", params)
    );
    for (resp, before) in [ra, rb] {
        assert_eq!(text_of(&resp), "done 3");
        let progress: Vec<&Value> = before
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        assert_eq!(progress.len(), 3, "{before:?}");
        assert!(progress.iter().all(|p| p["params"]["progressToken"] == "same"));
        assert_eq!(progress[2]["params"]["progress"], 3);
    }
    let tokens: Vec<Value> = upstream_log(&env.alpha_log)
        .iter()
        .filter(|m| m["params"]["name"] == "progress")
        .map(|m| m["params"]["_meta"]["progressToken"].clone())
        .collect();
    assert_eq!(tokens.len(), 2);
    assert_ne!(
        tokens[0], tokens[1],
        "upstream tokens must be unique across active requests"
    );
    env.gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_goes_to_the_calling_session_and_the_answer_goes_back() {
    let _suite = crate::suite::enter(module_path!());
    let env = two_upstreams("").await;
    let a = RawSession::open(&env.gw.url(), caps()).await;
    let b = RawSession::open(&env.gw.url(), caps()).await;
    let mut b_get = b.get_stream().await;
    let mut call = a
        .stream(
            json!(5),
            "tools/call",
            json!({"name":"alpha__sample","arguments":{"prompt":"hi"}}),
        )
        .await;
    let request = wait_for(&mut call, |m| m["method"] == "sampling/createMessage").await;
    assert_eq!(request["params"]["messages"][0]["content"]["text"], "hi");
    let answer = json!({"jsonrpc":"2.0","id":request["id"],"result":{"role":"assistant","model":"m","content":{"type":"text","text":"from A"}}});
    assert_eq!(a.post(answer).await.status(), 202);
    let done = wait_for(&mut call, |m| m["id"] == json!(5)).await;
    assert_eq!(text_of(&done), "sampled: from A");
    assert!(
        none_within(&mut b_get, Duration::from_millis(300), |m| m["method"]
            == "sampling/createMessage")
        .await
    );

    // A session that did not declare sampling gets a proper error back upstream.
    let plain = RawSession::open(&env.gw.url(), json!({})).await;
    let resp = plain
        .call(
            "tools/call",
            json!({"name":"alpha__sample","arguments":{"prompt":"x"}}),
        )
        .await;
    assert_eq!(resp["result"]["isError"], true, "{resp}");
    assert!(text_of(&resp).contains("does not support"), "{resp}");

    // Elicitation and roots round trips.
    let mut call = a
        .stream(
            json!(6),
            "tools/call",
            json!({"name":"alpha__elicit","arguments":{"message":"name?"}}),
        )
        .await;
    let request = wait_for(&mut call, |m| m["method"] == "elicitation/create").await;
    a.post(json!({"jsonrpc":"2.0","id":request["id"],"result":{"action":"accept","content":{"name":"Ada"}}}))
        .await;
    let done = wait_for(&mut call, |m| m["id"] == json!(6)).await;
    assert!(text_of(&done).contains("Ada"));
    let mut call = a
        .stream(
            json!(7),
            "tools/call",
            json!({"name":"alpha__roots","arguments":{}}),
        )
        .await;
    let request = wait_for(&mut call, |m| m["method"] == "roots/list").await;
    a.post(json!({"jsonrpc":"2.0","id":request["id"],"result":{"roots":[{"uri":"file:///work"}]}}))
        .await;
    let done = wait_for(&mut call, |m| m["id"] == json!(7)).await;
    assert!(text_of(&done).contains("file:///work"));
    env.gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_cancelling_its_own_request_reaches_the_right_session() {
    let _suite = crate::suite::enter(module_path!());
    let env = two_upstreams("").await;
    let a = RawSession::open(&env.gw.url(), caps()).await;
    let mut call = a
        .stream(
            json!(1),
            "tools/call",
            json!({"name":"alpha__cancel_own_request","arguments":{}}),
        )
        .await;
    let request = wait_for(&mut call, |m| m["method"] == "sampling/createMessage").await;
    let cancel = wait_for(&mut call, |m| m["method"] == "notifications/cancelled").await;
    assert_eq!(cancel["params"]["requestId"], request["id"]);
    let done = wait_for(&mut call, |m| m["id"] == json!(1)).await;
    assert_eq!(text_of(&done), "cancelled own request");
    env.gw.stop().await;
}

/// A `tools/list_changed` arrives on the GET stream, and no second one follows it.
async fn told_tools_changed_once(stream: &mut mpsc::Receiver<Value>) {
    let changed = |m: &Value| m["method"] == "notifications/tools/list_changed";
    wait_for(stream, changed).await;
    assert!(none_within(stream, Duration::from_millis(300), changed).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_reaches_every_open_session_once_and_the_catalog_follows() {
    let _suite = crate::suite::enter(module_path!());
    let env = two_upstreams("").await;
    let a = RawSession::open(&env.gw.url(), json!({})).await;
    let b = RawSession::open(&env.gw.url(), json!({})).await;
    let (mut ga, mut gb) = (a.get_stream().await, b.get_stream().await);
    assert_eq!(
        a.tool_text("alpha__add_tool", json!({"name":"fresh"})).await,
        "added"
    );
    for g in [&mut ga, &mut gb] {
        told_tools_changed_once(g).await;
    }
    let (tools, _) = b.list_all("tools/list", "tools").await;
    assert!(tools.iter().any(|t| t["name"] == "alpha__fresh"));
    assert_eq!(
        b.tool_text("alpha__fresh", json!({"message":"m"})).await,
        "fresh: m"
    );
    env.gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_list_changed_for_one_change_reaches_each_session_once() {
    let _suite = crate::suite::enter(module_path!());
    let env = two_upstreams("").await;
    let a = RawSession::open(&env.gw.url(), json!({})).await;
    let b = RawSession::open(&env.gw.url(), json!({})).await;
    let (mut ga, mut gb) = (a.get_stream().await, b.get_stream().await);
    // One change, announced 20 times in a row: re-fetched at once, the rest coalesced into one
    // more fetch that finds nothing new.
    let args = json!({"name":"burst","repeat":20});
    assert_eq!(a.tool_text("alpha__add_tool", args).await, "added");
    for g in [&mut ga, &mut gb] {
        told_tools_changed_once(g).await;
    }
    let (tools, _) = b.list_all("tools/list", "tools").await;
    assert!(tools.iter().any(|t| t["name"] == "alpha__burst"));
    env.gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_made_while_a_list_is_re_fetched_is_not_lost() {
    let _suite = crate::suite::enter(module_path!());
    let env = two_upstreams("").await;
    let a = RawSession::open(&env.gw.url(), json!({})).await;
    let mut ga = a.get_stream().await;
    // "late" joins alpha's tools (and is announced) when the last page of the next tools/list
    // is asked for, a page that does not show it yet: while the re-fetch that "early" caused
    // is still running.
    let late = json!({"name":"late","on_next_list":true});
    assert_eq!(a.tool_text("alpha__add_tool", late).await, "deferred");
    assert_eq!(
        a.tool_text("alpha__add_tool", json!({"name":"early"})).await,
        "added"
    );
    let mut notified = 0;
    loop {
        wait_for(&mut ga, |m| m["method"] == "notifications/tools/list_changed").await;
        notified += 1;
        let (tools, _) = a.list_all("tools/list", "tools").await;
        let shown = |name: &str| tools.iter().any(|t| t["name"] == name);
        if shown("alpha__early") && shown("alpha__late") {
            break;
        }
    }
    // Once per catalog that changed: at most one for each of the two changes.
    assert!(notified <= 2, "{notified} notifications for two changes");
    env.gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_uris_are_namespaced_wherever_they_appear() {
    let _suite = crate::suite::enter(module_path!());
    let env = two_upstreams("").await;
    let s = RawSession::open(&env.gw.url(), json!({})).await;
    let (resources, _) = s.list_all("resources/list", "resources").await;
    assert!(resources
        .iter()
        .any(|r| r["uri"] == "mcpmux://alpha/test://static/0"));
    let read = s
        .call("resources/read", json!({"uri":"mcpmux://beta/test://static/4"}))
        .await;
    assert_eq!(
        read["result"]["contents"][0]["uri"],
        "mcpmux://beta/test://static/4"
    );
    assert_eq!(read["result"]["contents"][0]["text"], "resource 4");
    let tmpl = s
        .call("resources/read", json!({"uri":"mcpmux://alpha/test://item/42"}))
        .await;
    assert_eq!(tmpl["result"]["contents"][0]["text"], "item 42");
    let (templates, _) = s.list_all("resources/templates/list", "resourceTemplates").await;
    assert!(templates
        .iter()
        .any(|t| t["uriTemplate"] == "mcpmux://alpha/test://item/{id}"));
    let missing = s
        .call("resources/read", json!({"uri":"mcpmux://nobody/x://y"}))
        .await;
    assert_eq!(missing["error"]["code"], -32002);

    let links = s
        .call(
            "tools/call",
            json!({"name":"alpha__resource_link","arguments":{}}),
        )
        .await;
    let content = &links["result"]["content"];
    assert_eq!(content[0]["uri"], "mcpmux://alpha/test://static/0");
    assert_eq!(content[1]["resource"]["uri"], "mcpmux://alpha/test://static/1");
    let prompt = s
        .call(
            "prompts/get",
            json!({"name":"beta__greet","arguments":{"name":"Ada"}}),
        )
        .await;
    assert_eq!(prompt["result"]["messages"][0]["content"]["text"], "Hello, Ada!");
    assert_eq!(
        prompt["result"]["messages"][1]["content"]["resource"]["uri"],
        "mcpmux://beta/test://static/0"
    );

    let by_prompt = s
        .call("completion/complete", json!({"ref":{"type":"ref/prompt","name":"alpha__greet"},"argument":{"name":"name","value":"al"}}))
        .await;
    assert_eq!(
        by_prompt["result"]["completion"]["values"],
        json!(["alice", "albert"])
    );
    let by_template = s
        .call("completion/complete", json!({"ref":{"type":"ref/resource","uri":"mcpmux://beta/test://item/{id}"},"argument":{"name":"id","value":""}}))
        .await;
    assert_eq!(
        by_template["result"]["completion"]["values"],
        json!(["1", "2", "3"])
    );
    let log = upstream_log(&env.beta_log);
    let sent = log
        .iter()
        .find(|m| m["method"] == "completion/complete")
        .expect("completion reached beta");
    assert_eq!(sent["params"]["ref"]["uri"], "test://item/{id}");
    env.gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_updates_go_only_to_subscribers() {
    let _suite = crate::suite::enter(module_path!());
    let env = two_upstreams("").await;
    let a = RawSession::open(&env.gw.url(), json!({})).await;
    let b = RawSession::open(&env.gw.url(), json!({})).await;
    let (mut ga, mut gb) = (a.get_stream().await, b.get_stream().await);
    let sub = a
        .call(
            "resources/subscribe",
            json!({"uri":"mcpmux://alpha/test://static/3"}),
        )
        .await;
    assert_eq!(sub["result"], json!({}));
    assert_eq!(
        b.tool_text("alpha__touch", json!({"uri":"test://static/3"}))
            .await,
        "touched"
    );
    let update = wait_for(&mut ga, |m| m["method"] == "notifications/resources/updated").await;
    assert_eq!(update["params"]["uri"], "mcpmux://alpha/test://static/3");
    assert!(
        none_within(&mut gb, Duration::from_millis(400), |m| m["method"]
            == "notifications/resources/updated")
        .await
    );
    env.gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_level_is_kept_per_session_and_messages_ride_the_call_stream() {
    let _suite = crate::suite::enter(module_path!());
    let env = two_upstreams("").await;
    let s = RawSession::open(&env.gw.url(), json!({})).await;
    assert_eq!(
        s.call("logging/setLevel", json!({"level":"warning"})).await["result"],
        json!({})
    );
    assert_eq!(
        s.call("logging/setLevel", json!({"level":"loud"})).await["error"]["code"],
        -32602
    );
    let (_, before) = s
        .call_with(
            json!(1),
            "tools/call",
            json!({"name":"alpha__log","arguments":{"count":2,"level":"info"}}),
        )
        .await;
    assert!(
        before.iter().all(|m| m["method"] != "notifications/message"),
        "{before:?}"
    );
    let (_, before) = s
        .call_with(
            json!(2),
            "tools/call",
            json!({"name":"alpha__log","arguments":{"count":3,"level":"error"}}),
        )
        .await;
    assert_eq!(
        before
            .iter()
            .filter(|m| m["method"] == "notifications/message")
            .count(),
        3,
        "{before:?}"
    );
    let sent = upstream_log(&env.alpha_log);
    assert!(sent
        .iter()
        .any(|m| m["method"] == "logging/setLevel" && m["params"]["level"] == "warning"));
    env.gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_stay_with_their_upstream() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("faults");
    let servers = format!(
        "{}\n{}\n{}",
        test_server_toml("alpha", &[], None),
        test_server_toml("beta", &[], None),
        test_server_toml("broken", &["--crash-on-start"], Some(&dir.join("broken.jsonl")))
    );
    let gw = boot_gateway(&servers, "").await;
    let s = RawSession::open(&gw.url(), json!({})).await;
    let unknown = s
        .call("tools/call", json!({"name":"nope__tool","arguments":{}}))
        .await;
    assert_eq!(unknown["error"]["code"], -32602);
    // A non-JSON line and an invalid UTF-8 line are skipped; the connection survives.
    assert_eq!(s.tool_text("alpha__garbage", json!({})).await, "garbage sent");
    let big = s.tool_text("alpha__big", json!({"bytes": 4_194_304})).await;
    assert_eq!(big.len(), 4_194_304);
    // An upstream dying mid-call: the pending call fails at once with an error naming it.
    let crashed = s
        .call("tools/call", json!({"name":"alpha__crash","arguments":{}}))
        .await;
    let message = crashed["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("alpha"), "{crashed}");
    assert_eq!(
        s.tool_text("beta__echo", json!({"message":"still here"})).await,
        "echo: still here"
    );
    let gone = s
        .call(
            "tools/call",
            json!({"name":"alpha__echo","arguments":{"message":"x"}}),
        )
        .await;
    assert!(
        gone.get("error").is_some() || gone["result"].is_object(),
        "{gone}"
    );
    gw.stop().await;
}
