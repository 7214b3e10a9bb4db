//! Shaping a server's tools, prompts and resources (`tools`/`prompts`/`resources` include and
//! exclude, `rename`, `descriptions`) and `enabled = false`, in front of real server-everything:
//! the Python SDK in both eras and over legacy SSE sees only what is kept, under the new names
//! and descriptions; a renamed call reaches the server's own tool; an excluded tool is unknown;
//! every other field of a tool passes as the server sent it; a disabled server is never started;
//! `[[policy]]` decides on the shaped names.

use crate::support::mcp::RawSession;
use crate::support::*;
use serde_json::{json, Value};

const DESCRIPTION: &str = "Repeat a message back.";

/// server-everything shaped as in the issue's example, the same server unshaped but for its
/// list of tools (to compare items with), and a disabled server whose command does not exist.
fn servers() -> String {
    let (cmd, args) = peers().everything_stdio_cmd();
    let args = toml_list(&args);
    format!(
        "[servers.everything]\ncommand = {cmd:?}\nargs = {args}\n\
         tools = {{ include = [\"echo\", \"get-*\"], exclude = [\"get-env\"] }}\n\
         rename = {{ echo = \"say\" }}\n\
         descriptions = {{ say = {DESCRIPTION:?} }}\n\
         prompts = {{ exclude = [\"args-*\"] }}\n\
         resources = {{ include = [\"demo://resource/static/document/*\"] }}\n\n\
         [servers.plain]\ncommand = {cmd:?}\nargs = {args}\n\
         tools = {{ include = [\"echo\"] }}\n\n\
         [servers.off]\nenabled = false\ncommand = \"/nonexistent/mcpmux-never-started\"\n"
    )
}

fn strs(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// What a run of the `shaped` scenario must have seen.
fn check_shaped(run: &ClientRun) {
    run.assert_ok();
    let o = &run.json;
    assert_eq!(o["text"], "Echo: shaped", "{run}");
    let tools = o["tools"].as_array().cloned().unwrap_or_default();
    let name = |t: &Value| t["name"].as_str().unwrap_or_default().to_string();
    let names: Vec<String> = tools.iter().map(name).collect();
    let say = tools.iter().find(|t| t["name"] == "everything__say");
    assert_eq!(say.map(|t| &t["description"]), Some(&json!(DESCRIPTION)), "{run}");
    assert!(names.iter().any(|n| n == "everything__get-sum"), "{names:?}");
    assert!(names.iter().any(|n| n == "plain__echo"), "{names:?}");
    let everything: Vec<&String> = names.iter().filter(|n| n.starts_with("everything__")).collect();
    for n in &everything {
        let own = n.trim_start_matches("everything__");
        assert!(
            own == "say" || (own.starts_with("get-") && own != "get-env"),
            "{n} is not kept by the shaping: {names:?}"
        );
    }
    assert!(
        !names.iter().any(|n| n.starts_with("off__")),
        "a disabled server's tools: {names:?}"
    );
    let prompts = strs(&o["prompts"]);
    assert!(prompts.contains(&"everything__simple-prompt"), "{prompts:?}");
    assert!(!prompts.contains(&"everything__args-prompt"), "{prompts:?}");
    let ours = |uri: &&str| uri.starts_with("mcpmux://everything/");
    let resources: Vec<&str> = strs(&o["resources"]).into_iter().filter(ours).collect();
    assert!(!resources.is_empty(), "{run}");
    assert!(
        (resources.iter()).all(|r| r.starts_with("mcpmux://everything/demo://resource/static/document/")),
        "{resources:?}"
    );
    let templates: Vec<&str> = strs(&o["templates"]).into_iter().filter(ours).collect();
    assert!(
        templates.is_empty(),
        "templates the shaping leaves out: {templates:?}"
    );
    // An excluded or renamed-away tool is refused exactly as a name that never existed.
    let refusal = |name: &str| {
        let r = &o["refusals"][name];
        (
            r["code"].clone(),
            r["message"].as_str().unwrap_or_default().replace(name, "NAME"),
        )
    };
    let never = refusal("everything__no-such-tool");
    assert!(never.0.is_i64(), "{run}");
    for excluded in [
        "everything__echo",
        "everything__get-env",
        "everything__trigger-long-running-operation",
    ] {
        assert_eq!(refusal(excluded), never, "{excluded}: {run}");
    }
    let read = &o["refusals"]["mcpmux://everything/demo://resource/dynamic/text/1"];
    assert!(read["code"].is_i64(), "{run}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shaped_lists_and_calls_through_the_python_sdk_in_both_eras_and_legacy_sse() {
    let _suite = crate::suite::enter(module_path!());
    let gw = boot_gateway(&servers(), "").await;
    let url = gw.url();
    let sse = format!("http://{}/sse", gw.local_addr());
    let call = [
        "everything__say",
        r#"{"message":"shaped"}"#,
        "everything__echo",
        "everything__get-env",
        "everything__trigger-long-running-operation",
        "everything__no-such-tool",
        "mcpmux://everything/demo://resource/dynamic/text/1",
    ];
    let mut versions = Vec::new();
    for (target, mode, transport) in [
        (&url, "legacy", "http"),
        (&url, "auto", "http"),
        (&sse, "legacy", "sse"),
    ] {
        let mut args = vec!["--mode", mode, "--transport", transport];
        args.extend(call);
        let run = run_py_client_async(target, "shaped", &args).await;
        check_shaped(&run);
        versions.push(
            run.json["protocol_version"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
    }
    assert_ne!(versions[0], versions[1], "both eras: {versions:?}");

    // Every other field of the tool is the server's: the renamed `echo` is `echo` but for its
    // name and description.
    let s = RawSession::open(&url, json!({})).await;
    let (tools, _) = s.list_all("tools/list", "tools").await;
    let item = |name: &str| tools.iter().find(|t| t["name"] == name).cloned();
    let (Some(mut say), Some(mut echo)) = (item("everything__say"), item("plain__echo")) else {
        panic!("say or echo missing: {tools:?}");
    };
    assert_ne!(echo["description"], json!(DESCRIPTION));
    // Both say where they come from: the server's own name is `echo`, its server theirs.
    assert_eq!(
        say["_meta"]["mcpmux/original"],
        json!({"server": "everything", "name": "echo"})
    );
    assert_eq!(
        echo["_meta"]["mcpmux/original"],
        json!({"server": "plain", "name": "echo"})
    );
    // server-everything titles its tools: the title stays the server's.
    assert_eq!(
        (&say["title"], &echo["title"]),
        (&json!("Echo Tool"), &json!("Echo Tool"))
    );
    for tool in [&mut say, &mut echo] {
        tool["name"] = json!("NAME");
        tool["description"] = json!("DESCRIPTION");
        tool["_meta"]["mcpmux/original"]["server"] = json!("SERVER");
    }
    assert_eq!(say, echo);

    // The disabled server is named in /status, never started, and not among the upstreams;
    // the counts there are the shaped ones.
    let doc = gateway_status(&gw).await;
    let upstreams: Vec<&str> = (doc["upstreams"].as_array().into_iter().flatten())
        .filter_map(|u| u["name"].as_str())
        .collect();
    assert_eq!(upstreams, ["everything", "plain"], "{doc}");
    assert_eq!(doc["disabled"], json!(["off"]), "{doc}");
    let listed = (tools.iter())
        .filter(|t| t["name"].as_str().is_some_and(|n| n.starts_with("everything__")))
        .count();
    assert_eq!(
        status_upstream(&doc, "everything")["tools"],
        json!(listed),
        "{doc}"
    );
    let ready = reqwest::get(format!("http://{}/readyz", gw.local_addr()))
        .await
        .expect("GET /readyz");
    assert_eq!(
        ready.status(),
        200,
        "a disabled server does not hold readiness back"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_decides_on_the_shaped_names() {
    let _suite = crate::suite::enter(module_path!());
    let (cmd, args) = peers().everything_stdio_cmd();
    let servers = format!(
        "[servers.everything]\ncommand = {cmd:?}\nargs = {}\n\
         tools = {{ include = [\"echo\", \"get-sum\"] }}\nrename = {{ echo = \"say\" }}\n\n\
         [auth]\n\
         [[auth.api_keys]]\nname = \"alice\"\nkey = \"alice-key-0123456789\"\n\
         [[auth.api_keys]]\nname = \"bob\"\nkey = \"bob-key-0123456789\"\n\n\
         [[policy]]\nprincipals = [\"alice\"]\nallow = [\"everything__*\"]\ndeny = [\"everything__echo\"]\n\n\
         [[policy]]\nprincipals = [\"bob\"]\nallow = [\"everything__*\"]\ndeny = [\"everything__say\"]\n",
        toml_list(&args)
    );
    let gw = boot_gateway(&servers, "").await;
    let url = gw.url();
    let names = |tools: Vec<Value>| -> Vec<String> {
        let mut names: Vec<String> = (tools.iter())
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect();
        names.sort();
        names
    };
    // A rule over the server's own name does not reach the renamed tool.
    let alice = RawSession::open_as(&url, "alice-key-0123456789").await;
    let (tools, _) = alice.list_all("tools/list", "tools").await;
    assert_eq!(names(tools), ["everything__get-sum", "everything__say"]);
    let said = alice
        .tool_text("everything__say", json!({"message": "allowed"}))
        .await;
    assert_eq!(said, "Echo: allowed");
    // A rule over the shaped name does: the tool is as unknown as a name that never existed.
    let bob = RawSession::open_as(&url, "bob-key-0123456789").await;
    let (tools, _) = bob.list_all("tools/list", "tools").await;
    assert_eq!(names(tools), ["everything__get-sum"]);
    let call = |name: &str| json!({"name": name, "arguments": {"message": "denied"}});
    let denied = bob.call("tools/call", call("everything__say")).await;
    let never = bob.call("tools/call", call("everything__never")).await;
    let shape = |reply: &Value, name: &str| reply["error"].to_string().replace(name, "NAME");
    assert!(denied["error"]["code"].is_i64(), "{denied}");
    assert_eq!(
        shape(&denied, "everything__say"),
        shape(&never, "everything__never")
    );
    gw.stop().await;
}
