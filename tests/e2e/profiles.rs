//! Profiles (`[profiles.NAME]`): another endpoint with a subset of the catalog. Through the
//! Python SDK in both eras and over legacy SSE, in front of real server-everything and
//! mcp-server-time, a profile's path lists only its servers' tools its globs keep, a call outside
//! it is refused as an unknown tool, and the main endpoint is unchanged; a session of one endpoint
//! is unknown on another; `list_changed` of a server outside a profile does not reach the
//! profile's sessions; with `[auth]` the protected resource metadata is served per profile path
//! and the challenge there names it; `[[policy]]` narrows a profile, never widens it.

use crate::support::mcp::{none_within, wait_for, RawSession};
use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

/// server-everything and mcp-server-time (the profile's), and the in-repo test server (not).
fn servers() -> String {
    let (cmd, args) = peers().everything_stdio_cmd();
    let (python, time_args) = &peers().time_cmd;
    format!(
        "[servers.everything]\ncommand = {cmd:?}\nargs = {}\n\n\
         [servers.time]\ncommand = {:?}\nargs = {}\n\n{}\n\
         [profiles.review]\npath = \"/mcp/review\"\nservers = [\"everything\", \"time\"]\n\
         tools = {{ include = [\"everything__*\", \"time__*\"], exclude = [\"everything__get-env\"] }}\n",
        toml_list(&args),
        path_str(python),
        toml_list(time_args),
        test_server_toml("other", &[], None),
    )
}

fn names(tools: &[Value]) -> Vec<String> {
    (tools.iter())
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_serves_only_its_view_through_the_python_sdk_in_both_eras_and_legacy_sse() {
    let _suite = crate::suite::enter(module_path!());
    let gw = boot_gateway(&servers(), "").await;
    let profile = format!("http://{}/mcp/review", gw.local_addr());
    let sse = format!("{profile}/sse");
    let call = [
        "time__get_current_time",
        r#"{"timezone":"UTC"}"#,
        "other__echo",
        "everything__get-env",
        "time__no-such-tool",
        "mcpmux://other/test://static/0",
    ];
    let mut versions = Vec::new();
    for (target, mode, transport) in [
        (&profile, "legacy", "http"),
        (&profile, "auto", "http"),
        (&sse, "legacy", "sse"),
    ] {
        let mut args = vec!["--mode", mode, "--transport", transport];
        args.extend(call);
        let run = run_py_client_async(target, "shaped", &args).await;
        run.assert_ok();
        let o = &run.json;
        assert!(o["text"].as_str().is_some_and(|t| t.contains("UTC")), "{run}");
        let tools = o["tools"].as_array().cloned().unwrap_or_default();
        let seen = names(&tools);
        assert!(seen.iter().any(|n| n == "everything__echo"), "{seen:?}");
        assert!(seen.iter().any(|n| n == "time__get_current_time"), "{seen:?}");
        for name in &seen {
            let ours = name.starts_with("everything__") || name.starts_with("time__");
            assert!(
                ours && name != "everything__get-env",
                "{name} is not the profile's: {seen:?}"
            );
        }
        // Prompts and resources come from the profile's servers only.
        let prompts: Vec<&str> = (o["prompts"].as_array().into_iter().flatten())
            .filter_map(Value::as_str)
            .collect();
        assert!(
            prompts.iter().all(|p| p.starts_with("everything__")),
            "{prompts:?}"
        );
        let resources: Vec<&str> = (o["resources"].as_array().into_iter().flatten())
            .filter_map(Value::as_str)
            .collect();
        assert!(
            !resources.iter().any(|r| r.starts_with("mcpmux://other/")),
            "{resources:?}"
        );
        // A tool outside the profile is refused exactly as a name that never existed.
        let refusal = |name: &str| {
            let r = &o["refusals"][name];
            (
                r["code"].clone(),
                r["message"].as_str().unwrap_or_default().replace(name, "NAME"),
            )
        };
        let never = refusal("time__no-such-tool");
        assert!(never.0.is_i64(), "{run}");
        assert_eq!(refusal("other__echo"), never, "{run}");
        assert_eq!(refusal("everything__get-env"), never, "{run}");
        assert!(
            o["refusals"]["mcpmux://other/test://static/0"]["code"].is_i64(),
            "{run}"
        );
        versions.push(o["protocol_version"].as_str().unwrap_or_default().to_string());
    }
    assert_ne!(versions[0], versions[1], "both eras: {versions:?}");

    // The main endpoint is unchanged: every server's tools, the one the profile excludes too.
    let run = run_py_client_async(&gw.url(), "call", &["other__echo", r#"{"message":"main"}"#]).await;
    run.assert_ok();
    let main: Vec<&str> = (run.json["tools"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    for name in [
        "other__echo",
        "everything__get-env",
        "everything__echo",
        "time__get_current_time",
    ] {
        assert!(
            main.contains(&name),
            "{name} missing on the main endpoint: {main:?}"
        );
    }
    assert_eq!(run.json["calls"][0]["text"], "echo: main", "{run}");

    // /status names the profile and counts what it sees.
    let doc = gateway_status(&gw).await;
    let entry = &doc["profiles"][0];
    assert_eq!(entry["name"], "review", "{doc}");
    assert_eq!(entry["path"], "/mcp/review", "{doc}");
    assert_eq!(entry["servers"], json!(["everything", "time"]), "{doc}");
    let s = RawSession::open(&profile, json!({})).await;
    let (tools, _) = s.list_all("tools/list", "tools").await;
    assert_eq!(entry["tools"], json!(tools.len()), "{doc}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_known_only_on_the_endpoint_that_opened_it() {
    let _suite = crate::suite::enter(module_path!());
    let gw = boot_gateway(&servers(), "").await;
    let profile = format!("http://{}/mcp/review", gw.local_addr());
    let ping = |id: i64| json!({"jsonrpc":"2.0","id":id,"method":"ping"});
    let main = RawSession::open(&gw.url(), json!({})).await;
    let mine = RawSession::open(&profile, json!({})).await;
    assert_eq!(main.post(ping(1)).await.status(), 200);
    assert_eq!(mine.post(ping(1)).await.status(), 200);
    // The main endpoint's session id on the profile, and the profile's on the main endpoint.
    assert_eq!(main.at(&profile).post(ping(2)).await.status(), 404);
    assert_eq!(mine.at(&gw.url()).post(ping(2)).await.status(), 404);
    assert_eq!(main.at(&profile).get(None).await.status(), 404);
    assert_eq!(main.at(&profile).delete().await, 404);
    // Refused elsewhere, each still works where it was opened.
    let (tools, _) = mine.list_all("tools/list", "tools").await;
    assert!(names(&tools).iter().all(|n| !n.starts_with("other__")));
    let (tools, _) = main.list_all("tools/list", "tools").await;
    assert!(names(&tools).iter().any(|n| n.starts_with("other__")));
    // A path that is no endpoint stays 404.
    let nothing = format!("http://{}/mcp/nothing", gw.local_addr());
    assert!(RawSession::try_open(&nothing, json!({}), "2025-11-25")
        .await
        .is_err());
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_of_a_server_outside_a_profile_does_not_reach_its_sessions() {
    let _suite = crate::suite::enter(module_path!());
    let servers = format!(
        "{}\n{}\n[profiles.inner]\npath = \"/inner/mcp\"\nservers = [\"inside\"]\n",
        test_server_toml("inside", &[], None),
        test_server_toml("outside", &[], None),
    );
    let gw = boot_gateway(&servers, "").await;
    let profile = format!("http://{}/inner/mcp", gw.local_addr());
    let main = RawSession::open(&gw.url(), json!({})).await;
    let mine = RawSession::open(&profile, json!({})).await;
    let (mut main_stream, mut mine_stream) = (main.get_stream().await, mine.get_stream().await);
    let changed = |m: &Value| m["method"] == "notifications/tools/list_changed";
    // A server outside the profile changes its tools: the main endpoint's session is told.
    let added = main.tool_text("outside__add_tool", json!({"name": "away"})).await;
    assert_eq!(added, "added");
    wait_for(&mut main_stream, changed).await;
    // Then one inside it: both are told. Once the main session heard of the second change,
    // every notification of both changes was queued for the profile's session: it must hold
    // exactly one (the second change's), not two.
    assert_eq!(
        main.tool_text("inside__add_tool", json!({"name": "near"})).await,
        "added"
    );
    wait_for(&mut main_stream, changed).await;
    wait_for(&mut mine_stream, changed).await;
    let (tools, _) = mine.list_all("tools/list", "tools").await;
    let seen = names(&tools);
    assert!(seen.contains(&"inside__near".to_string()), "{seen:?}");
    assert!(!seen.iter().any(|n| n.starts_with("outside__")), "{seen:?}");
    assert!(
        none_within(&mut mine_stream, Duration::from_millis(500), changed).await,
        "the profile's session was told of the change outside it"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_auth_each_profile_path_has_its_metadata_and_policy_narrows_the_profile() {
    let _suite = crate::suite::enter(module_path!());
    let servers = format!(
        "{}\n[auth]\n[[auth.api_keys]]\nname = \"alice\"\nkey = \"alice-key-0123456789\"\n\n\
         [[policy]]\nprincipals = [\"alice\"]\nallow = [\"everything__*\", \"time__*\"]\ndeny = [\"everything__echo\"]\n",
        servers().replace(
            "tools = { include = [\"everything__*\", \"time__*\"], exclude = [\"everything__get-env\"] }",
            "tools = { include = [\"everything__*\"] }"
        )
    );
    let gw = boot_gateway(&servers, "public_url = \"https://mcp.example.com/mcp\"").await;
    let base = format!("http://{}", gw.local_addr());
    let http = reqwest::Client::new();
    let metadata = |path: &str| {
        let http = http.clone();
        let url = format!("{base}/.well-known/oauth-protected-resource{path}");
        async move {
            let resp = http.get(&url).send().await.expect("GET metadata");
            let status = resp.status().as_u16();
            let text = resp.text().await.unwrap_or_default();
            (
                status,
                serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
            )
        }
    };
    let (status, doc) = metadata("/mcp/review").await;
    assert_eq!(status, 200, "{doc}");
    assert_eq!(doc["resource"], "https://mcp.example.com/mcp/review", "{doc}");
    assert_eq!(doc["bearer_methods_supported"], json!(["header"]), "{doc}");
    let (_, main_doc) = metadata("/mcp").await;
    assert_eq!(main_doc["resource"], "https://mcp.example.com/mcp", "{main_doc}");
    assert_eq!(metadata("/mcp/nothing").await.0, 404);
    // The challenge on the profile's path names the profile's metadata; the main one its own.
    let challenge = |path: &'static str| {
        let http = http.clone();
        let url = format!("{base}{path}");
        async move {
            let resp = (http.post(&url))
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
                .send()
                .await
                .expect("POST");
            assert_eq!(resp.status(), 401, "{path}");
            let header = resp.headers().get("www-authenticate").cloned();
            header
                .and_then(|h| h.to_str().ok().map(str::to_string))
                .unwrap_or_default()
        }
    };
    let at_profile = challenge("/mcp/review").await;
    assert!(
        at_profile.contains(
            "resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp/review\""
        ),
        "{at_profile}"
    );
    let at_main = challenge("/mcp").await;
    assert!(
        at_main.contains(
            "resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\""
        ),
        "{at_main}"
    );
    // The policy allows time__* and denies everything__echo: on the profile, which keeps only
    // everything__*, alice sees everything__* but echo (the policy narrows, never widens).
    let alice = RawSession::open_as(&format!("{base}/mcp/review"), "alice-key-0123456789").await;
    let (tools, _) = alice.list_all("tools/list", "tools").await;
    let seen = names(&tools);
    assert!(seen.iter().any(|n| n == "everything__get-sum"), "{seen:?}");
    assert!(
        seen.iter()
            .all(|n| n.starts_with("everything__") && n != "everything__echo"),
        "{seen:?}"
    );
    let main = RawSession::open_as(&gw.url(), "alice-key-0123456789").await;
    let (tools, _) = main.list_all("tools/list", "tools").await;
    assert!(names(&tools).iter().any(|n| n == "time__get_current_time"));
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_adds_and_removes_a_profile_for_the_next_request() {
    let _suite = crate::suite::enter(module_path!());
    let servers = format!(
        "{}\n{}",
        test_server_toml("inside", &[], None),
        test_server_toml("outside", &[], None)
    );
    let gw = boot_gateway(&servers, "").await;
    let config = |profiles: &str| {
        let text = format!("[gateway]\nlisten = \"127.0.0.1:0\"\n\n{servers}\n{profiles}");
        mcpmux::Config::from_toml_str(&text, "test.toml", &|_| None).expect("a valid config")
    };
    let profile = format!("http://{}/inner/mcp", gw.local_addr());
    assert!(RawSession::try_open(&profile, json!({}), "2025-11-25")
        .await
        .is_err());
    let with = config("[profiles.inner]\npath = \"/inner/mcp\"\nservers = [\"inside\"]\n");
    gw.reload(with).await.expect("the reload applies");
    let mine = RawSession::open(&profile, json!({})).await;
    let (tools, _) = mine.list_all("tools/list", "tools").await;
    let seen = names(&tools);
    assert!(seen.iter().any(|n| n == "inside__echo"), "{seen:?}");
    assert!(!seen.iter().any(|n| n.starts_with("outside__")), "{seen:?}");
    let mut stream = mine.get_stream().await;
    // Removed: no new session opens there, and the profile's open session sees nothing.
    gw.reload(config("")).await.expect("the reload applies");
    assert!(RawSession::try_open(&profile, json!({}), "2025-11-25")
        .await
        .is_err());
    wait_for(&mut stream, |m| m["method"] == "notifications/tools/list_changed").await;
    gw.stop().await;
}
