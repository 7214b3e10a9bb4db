//! `[[policy]]` enforced for principals authenticated by API keys, in front of real
//! server-everything and the test server: each principal's lists hold exactly what it may use,
//! a name or URI it may not see is answered exactly as one that does not exist (calls, prompts,
//! reads, subscriptions, completions), and a principal no rule applies to sees nothing.

use crate::support::mcp::{wait_for, RawSession};
use crate::support::serve::ServeProcess;
use crate::support::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;

fn servers() -> String {
    let (cmd, args) = peers().everything_stdio_cmd();
    format!(
        "[servers.everything]\ncommand = {cmd:?}\nargs = {}\n\n{}\n\
         [auth]\n\
         [[auth.api_keys]]\nname = \"alice\"\nkey = \"alice-key-0123456789\"\ngroups = [\"eng\"]\n\
         [[auth.api_keys]]\nname = \"bot\"\nkey = \"bot-key-0123456789\"\ngroups = [\"ci\"]\n\
         [[auth.api_keys]]\nname = \"carol\"\nkey = \"carol-key-0123456789\"\n\n\
         [[policy]]\ngroups = [\"eng\"]\nallow = [\"everything__*\", \"mcpmux://everything/*\"]\n\
         deny = [\"everything__trigger-*\", \"everything__echo\"]\n\n\
         [[policy]]\ngroups = [\"ci\"]\nallow = [\"t__*\", \"mcpmux://t/*\"]\n",
        toml_list(&args),
        test_server_toml("t", &["--tools", "2", "--resources", "2", "--prompts", "2"], None),
    )
}

async fn names(s: &RawSession, method: &str, field: &str, key: &str) -> BTreeSet<String> {
    let (items, _) = s.list_all(method, field).await;
    items
        .iter()
        .filter_map(|i| i[key].as_str().map(str::to_string))
        .collect()
}

/// A reply's error with the name it is about replaced, to compare two refusals.
fn error_shape(reply: &Value, name: &str) -> Value {
    let text = reply["error"].to_string().replace(name, "NAME");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_principal_sees_and_uses_exactly_what_its_rules_allow() {
    let _suite = crate::suite::enter(module_path!());
    let gw = boot_gateway(&servers(), "").await;
    let url = gw.url();
    let alice = RawSession::open_as(&url, "alice-key-0123456789").await;
    let bot = RawSession::open_as(&url, "bot-key-0123456789").await;
    let carol = RawSession::open_as(&url, "carol-key-0123456789").await;

    let alice_tools = names(&alice, "tools/list", "tools", "name").await;
    let bot_tools = names(&bot, "tools/list", "tools", "name").await;
    assert!(alice_tools.contains("everything__get-sum"), "{alice_tools:?}");
    assert!(
        alice_tools.iter().all(|t| t.starts_with("everything__")),
        "{alice_tools:?}"
    );
    assert!(!alice_tools
        .iter()
        .any(|t| t.starts_with("everything__trigger-") || t == "everything__echo"));
    assert!(
        !bot_tools.is_empty() && bot_tools.iter().all(|t| t.starts_with("t__")),
        "{bot_tools:?}"
    );
    for method_field in [
        ("tools/list", "tools", "name"),
        ("prompts/list", "prompts", "name"),
        ("resources/list", "resources", "uri"),
        ("resources/templates/list", "resourceTemplates", "uriTemplate"),
    ] {
        let (method, field, key) = method_field;
        assert!(
            names(&carol, method, field, key).await.is_empty(),
            "carol sees {method}"
        );
    }

    // Listing never disagrees with calling: every name either principal saw, called by each,
    // is refused exactly as a name that does not exist when that principal did not list it.
    let nowhere = "everything__no-such-tool";
    for (session, listed) in [(&alice, &alice_tools), (&bot, &bot_tools)] {
        let unknown = session
            .call("tools/call", json!({"name": nowhere, "arguments": {}}))
            .await;
        let unknown = error_shape(&unknown, nowhere);
        let everyone: BTreeSet<&String> = alice_tools.iter().chain(&bot_tools).collect();
        let hidden = ["everything__echo", "everything__trigger-long-running-operation"];
        for name in everyone.iter().map(|n| n.as_str()).chain(hidden) {
            if listed.contains(name) {
                continue;
            }
            let reply = session
                .call("tools/call", json!({"name": name, "arguments": {}}))
                .await;
            assert_eq!(error_shape(&reply, name), unknown, "{name}: {reply}");
        }
    }
    let sum = alice
        .tool_text("everything__get-sum", json!({"a": 2, "b": 3}))
        .await;
    assert!(sum.contains('5'), "{sum}");
    assert_eq!(
        bot.tool_text("t__echo", json!({"message": "ci"})).await,
        "echo: ci"
    );

    // Prompts and resources follow the same rules.
    let alice_prompts = names(&alice, "prompts/list", "prompts", "name").await;
    let bot_prompts = names(&bot, "prompts/list", "prompts", "name").await;
    assert!(!alice_prompts.is_empty() && alice_prompts.iter().all(|p| p.starts_with("everything__")));
    assert!(!bot_prompts.is_empty() && bot_prompts.iter().all(|p| p.starts_with("t__")));
    let prompt = alice_prompts.iter().next().cloned().unwrap_or_default();
    let hidden_prompt = bot.call("prompts/get", json!({"name": prompt})).await;
    let no_prompt = bot
        .call("prompts/get", json!({"name": "everything__no-such-prompt"}))
        .await;
    assert_eq!(
        error_shape(&hidden_prompt, &prompt),
        error_shape(&no_prompt, "everything__no-such-prompt")
    );

    let alice_resources = names(&alice, "resources/list", "resources", "uri").await;
    assert!(
        !alice_resources.is_empty()
            && alice_resources
                .iter()
                .all(|u| u.starts_with("mcpmux://everything/"))
    );
    let uri = alice_resources.iter().next().cloned().unwrap_or_default();
    let read = alice.call("resources/read", json!({"uri": uri})).await;
    assert!(read["result"]["contents"].is_array(), "{read}");
    let hidden_read = bot.call("resources/read", json!({"uri": uri})).await;
    let missing = "mcpmux://everything/demo://no/such";
    let no_read = bot.call("resources/read", json!({"uri": missing})).await;
    assert_eq!(
        error_shape(&hidden_read, &uri),
        error_shape(&no_read, missing),
        "{hidden_read}"
    );
    // A bare URI only bot's hidden upstream lists is as unknown to bot.
    let bare = uri.trim_start_matches("mcpmux://everything/").to_string();
    let hidden_bare = bot.call("resources/read", json!({"uri": bare})).await;
    assert!(hidden_bare.get("error").is_some(), "{hidden_bare}");
    let completion = bot
        .call(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": prompt},
                                            "argument": {"name": "x", "value": ""}}),
        )
        .await;
    assert!(
        completion.get("error").is_some(),
        "a hidden prompt completes: {completion}"
    );
    gw.stop().await;
}

/// Open a session as `key` once the gateway answers and `tool` is listed to it.
async fn open_when_listed(gateway: &ServeProcess, key: &str, tool: &str) -> RawSession {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let opened = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            RawSession::try_open_as(&gateway.url(), key),
        )
        .await;
        if let Ok(Ok(session)) = opened {
            if names(&session, "tools/list", "tools", "name")
                .await
                .contains(tool)
            {
                return session;
            }
            session.delete().await;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{tool} never listed; log:\n{}",
            gateway.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// SIGHUP, or the edit itself, re-reads the policy: a removed `allow` takes effect on the next
/// request of a session opened before (no new token, no restart), its host is told to re-list; a
/// file that does not load changes nothing and the gateway serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reloaded_policy_takes_effect_on_the_next_request() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("policy-reload");
    let mut gateway = ServeProcess::start(&dir, "", &servers(), &dir, &[]);
    let alice = open_when_listed(&gateway, "alice-key-0123456789", "everything__get-sum").await;
    let mut stream = alice.get_stream().await;
    let sum = alice
        .tool_text("everything__get-sum", json!({"a": 2, "b": 3}))
        .await;
    assert!(sum.contains('5'), "{sum}");

    let text = std::fs::read_to_string(&gateway.config).unwrap();
    let narrowed = text.replace(
        "deny = [\"everything__trigger-*\", \"everything__echo\"]",
        "deny = [\"everything__trigger-*\", \"everything__echo\", \"everything__get-sum\"]",
    );
    assert_ne!(narrowed, text);
    std::fs::write(&gateway.config, &narrowed).unwrap();
    gateway.signal(libc::SIGHUP);
    gateway.wait_reload("configuration reloaded").await;
    wait_for(&mut stream, |m| m["method"] == "notifications/tools/list_changed").await;

    let tools = names(&alice, "tools/list", "tools", "name").await;
    assert!(
        !tools.contains("everything__get-sum") && tools.contains("everything__get-env"),
        "{tools:?}"
    );
    let refused = alice
        .call(
            "tools/call",
            json!({"name": "everything__get-sum", "arguments": {"a": 1, "b": 1}}),
        )
        .await;
    let unknown = alice
        .call(
            "tools/call",
            json!({"name": "everything__no-such-tool", "arguments": {}}),
        )
        .await;
    assert_eq!(
        error_shape(&refused, "everything__get-sum"),
        error_shape(&unknown, "everything__no-such-tool"),
        "{refused}"
    );

    // A broken edit: logged, nothing changes, the gateway serves on.
    std::fs::write(
        &gateway.config,
        format!("{text}\n[[policy]]\nallow = [\"tool[0-9]\"]\n"),
    )
    .unwrap();
    gateway.signal(libc::SIGHUP);
    gateway.wait_reload("reload refused, nothing changed").await;
    assert!(!names(&alice, "tools/list", "tools", "name")
        .await
        .contains("everything__get-sum"));
    assert!(alice
        .tool_text("everything__get-env", json!({}))
        .await
        .contains('{'));

    // The old rules again (a comment more: the watcher may not have seen the edits above, made
    // between two of its looks), with no signal: the edit itself is seen.
    std::fs::write(&gateway.config, format!("{text}\n# edited\n")).unwrap();
    gateway.wait_reload("configuration reloaded").await;
    assert!(gateway
        .log()
        .contains("the configuration file changed: reloading it"));
    let sum = alice
        .tool_text("everything__get-sum", json!({"a": 4, "b": 5}))
        .await;
    assert!(sum.contains('9'), "{sum}");

    gateway.signal(libc::SIGTERM);
    assert!(gateway
        .wait_exit(std::time::Duration::from_secs(30))
        .await
        .success());
}

/// Run the Python SDK client (mcp 2.3.0) against `url` with `Authorization: Bearer key`.
async fn py_client_as(url: &str, key: &str, args: &[&str]) -> ClientRun {
    let mut cmd = std::process::Command::new(&peers().python);
    cmd.arg(repo_root().join("tests/clients/py_client.py"))
        .arg(url)
        .args(args)
        .env("MCPMUX_TEST_BEARER", key);
    tokio::task::spawn_blocking(move || run_client(cmd, std::time::Duration::from_secs(60)))
        .await
        .expect("the client runs")
}

/// The exposed tool names a py_client scenario listed.
fn listed_tools(run: &ClientRun) -> BTreeSet<String> {
    (run.json["tools"].as_array().into_iter().flatten())
        .filter_map(|t| t.as_str().or_else(|| t["name"].as_str()).map(str::to_string))
        .collect()
}

/// An API key holds the scopes it is given, by default the required ones (issue 25, item 1):
/// a `[[policy]]` rule for `mcp:read` and an `[[auth.step_up]]` for `mcp:write` do not apply to
/// a key given neither, though `[auth]` names both scopes; a key given the scope passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_key_holds_only_the_scopes_it_is_given() {
    let _suite = crate::suite::enter(module_path!());
    let (cmd, args) = peers().everything_stdio_cmd();
    let servers = format!(
        "[servers.everything]\ncommand = {cmd:?}\nargs = {}\n\n\
         [auth]\nscopes_supported = [\"mcp:read\", \"mcp:write\"]\n\
         [[auth.api_keys]]\nname = \"ci-bot\"\nkey = \"ci-bot-key-0123456789\"\ngroups = [\"ci\"]\n\
         [[auth.api_keys]]\nname = \"reader\"\nkey = \"reader-key-0123456789\"\ngroups = [\"ci\"]\nscopes = [\"mcp:read\"]\n\
         [[auth.api_keys]]\nname = \"writer\"\nkey = \"writer-key-0123456789\"\ngroups = [\"ci\"]\nscopes = [\"mcp:write\"]\n\
         [[auth.step_up]]\ntools = [\"everything__get-sum\"]\nscopes = [\"mcp:write\"]\n\n\
         [[policy]]\ngroups = [\"ci\"]\nallow = [\"everything__echo\", \"everything__get-sum\"]\n\n\
         [[policy]]\nscopes = [\"mcp:read\"]\nallow = [\"everything__get-tiny-image\"]\n",
        toml_list(&args),
    );
    let gw = boot_gateway(&servers, "").await;
    let url = gw.url();

    // ci-bot (groups only): get-tiny-image is neither listed nor callable, as a real client sees.
    let bot = py_client_as(
        &url,
        "ci-bot-key-0123456789",
        &[
            "shaped",
            "everything__echo",
            "{\"message\": \"ci\"}",
            "everything__get-tiny-image",
        ],
    )
    .await;
    bot.assert_ok();
    let bot_tools = listed_tools(&bot);
    assert!(bot_tools.contains("everything__echo"), "{bot}");
    assert!(!bot_tools.contains("everything__get-tiny-image"), "{bot}");
    assert!(
        bot.json["refusals"]["everything__get-tiny-image"].is_object(),
        "{bot}"
    );
    // The key given mcp:read lists and calls it.
    let reader = py_client_as(
        &url,
        "reader-key-0123456789",
        &["call", "everything__get-tiny-image", "{}"],
    )
    .await;
    reader.assert_ok();
    assert!(
        listed_tools(&reader).contains("everything__get-tiny-image"),
        "{reader}"
    );

    // Step-up: get-sum needs mcp:write. ci-bot gets 403 insufficient_scope with the challenge.
    let sum = json!({"name": "everything__get-sum", "arguments": {"a": 2, "b": 3}});
    let session = RawSession::open_as(&url, "ci-bot-key-0123456789").await;
    let refused = session
        .post(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": sum}))
        .await;
    assert_eq!(refused.status(), 403);
    let challenge = (refused.headers().get("www-authenticate"))
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"mcp:write\""),
        "{challenge}"
    );
    // So does the key given mcp:read only; the one given mcp:write passes, with a real client.
    let reader = RawSession::open_as(&url, "reader-key-0123456789").await;
    let refused = reader
        .post(json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": sum}))
        .await;
    assert_eq!(refused.status(), 403);
    let writer = py_client_as(
        &url,
        "writer-key-0123456789",
        &["call", "everything__get-sum", "{\"a\": 2, \"b\": 3}"],
    )
    .await;
    writer.assert_ok();
    assert!(writer.call_text("everything__get-sum").contains('5'), "{writer}");
    gw.stop().await;
}

/// The list notifications a GET stream carries, in order, until `enough` says so (each wait
/// bounded).
async fn list_changes_until(
    stream: &mut tokio::sync::mpsc::Receiver<Value>,
    enough: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let mut seen = Vec::new();
    while !enough(&seen) {
        let message = crate::support::mcp::recv(stream)
            .await
            .unwrap_or_else(|| panic!("the stream went quiet after {seen:?}"));
        let method = message["method"].as_str().unwrap_or_default();
        if method.ends_with("/list_changed") {
            seen.push(method.trim_start_matches("notifications/").to_string());
        }
    }
    seen
}

/// Write `text` as the configuration and wait for the gateway to have put it in force.
async fn reload_to(gateway: &ServeProcess, text: &str) {
    std::fs::write(&gateway.config, text).unwrap();
    gateway.signal(libc::SIGHUP);
    gateway.wait_reload("configuration reloaded").await;
}

/// A policy change tells each host only of the lists whose view changed for it (issue 25,
/// item 20): hiding one tool sends `tools/list_changed` alone, hiding a prompt
/// `prompts/list_changed` alone, and a principal whose view did not change hears nothing.
/// Each host's stream is read up to a last change of its own, so what came before is all there
/// was (no waiting for silence).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_change_sends_only_the_lists_whose_view_changed() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("policy-list-changed");
    let mut gateway = ServeProcess::start(&dir, "", &servers(), &dir, &[]);
    let alice = open_when_listed(&gateway, "alice-key-0123456789", "everything__get-sum").await;
    let bot = open_when_listed(&gateway, "bot-key-0123456789", "t__echo").await;
    let alice_prompts = names(&alice, "prompts/list", "prompts", "name").await;
    assert!(
        alice_prompts.contains("everything__simple-prompt"),
        "{alice_prompts:?}"
    );
    let bot_prompt = (names(&bot, "prompts/list", "prompts", "name").await)
        .into_iter()
        .next()
        .expect("bot sees a prompt");
    let (mut alice_stream, mut bot_stream) = (alice.get_stream().await, bot.get_stream().await);

    let text = std::fs::read_to_string(&gateway.config).unwrap();
    let deny = "deny = [\"everything__trigger-*\", \"everything__echo\"";
    assert!(text.contains(deny));
    // 1. Alice loses one tool.
    let one_tool = text.replace(deny, &format!("{deny}, \"everything__get-sum\""));
    reload_to(&gateway, &one_tool).await;
    // 2. Alice loses one prompt.
    let one_prompt = one_tool.replace(deny, &format!("{deny}, \"everything__simple-prompt\""));
    reload_to(&gateway, &one_prompt).await;
    // 3. Alice loses another tool; bot, untouched so far, loses a prompt.
    let last = one_prompt
        .replace(deny, &format!("{deny}, \"everything__get-env\""))
        .replace(
            "allow = [\"t__*\", \"mcpmux://t/*\"]\n",
            &format!("allow = [\"t__*\", \"mcpmux://t/*\"]\ndeny = [{bot_prompt:?}]\n"),
        );
    assert_ne!(last, one_prompt);
    reload_to(&gateway, &last).await;

    let alice_told = list_changes_until(&mut alice_stream, |seen| {
        seen.iter().filter(|m| *m == "tools/list_changed").count() == 2
    })
    .await;
    assert_eq!(
        alice_told,
        ["tools/list_changed", "prompts/list_changed", "tools/list_changed"]
    );
    let bot_told = list_changes_until(&mut bot_stream, |seen| !seen.is_empty()).await;
    assert_eq!(
        bot_told,
        ["prompts/list_changed"],
        "bot heard of reloads that changed nothing it sees"
    );

    // What they were told is what they see.
    let tools = names(&alice, "tools/list", "tools", "name").await;
    assert!(!tools.contains("everything__get-sum") && !tools.contains("everything__get-env"));
    assert!(!names(&alice, "prompts/list", "prompts", "name")
        .await
        .contains("everything__simple-prompt"));
    assert!(!names(&bot, "prompts/list", "prompts", "name")
        .await
        .contains(&bot_prompt));
    gateway.signal(libc::SIGTERM);
    assert!(gateway
        .wait_exit(std::time::Duration::from_secs(30))
        .await
        .success());
}
