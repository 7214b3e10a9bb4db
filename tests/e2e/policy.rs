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
