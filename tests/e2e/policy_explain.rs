//! `mcpmux policy explain` as an operator runs it: the decision for one principal and one
//! exposed name, the rules that made it (index, line, the glob that matched), and the exit status
//! (0 allowed, 1 denied, 2 configuration error).

use crate::support::mcp::RawSession;
use crate::support::serve::ServeProcess;
use crate::support::{peers, run_client, scratch_dir, toml_list, ClientRun};
use serde_json::{json, Value};
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const RUN_TIMEOUT: Duration = Duration::from_secs(20);

const CONFIG: &str = r#"[gateway]
listen = "127.0.0.1:8080"

[[policy]]
principals = ["alice"]
groups = ["eng"]
scopes = ["mcp:tools"]
allow = ["everything__*", "mcpmux://everything/*"]
deny = ["everything__trigger-*"]

[[policy]]
groups = ["ops"]
allow = ["fs__*"]
rate_limit = "600/min"

[auth]
issuer = "https://idp.example.com"
scopes_supported = ["mcp:tools"]

[auth.scope_implies]
"mcp:admin" = ["mcp:tools"]
"#;

fn explain(config: &Path, principal: &str, groups: &str, scopes: &str, name: &str) -> ClientRun {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpmux"));
    cmd.args(["policy", "explain", "--config"]).arg(config).args([
        "--principal",
        principal,
        "--groups",
        groups,
        "--scopes",
        scopes,
        name,
    ]);
    run_client(cmd, RUN_TIMEOUT)
}

#[test]
fn policy_explain_prints_the_decision_the_rules_and_exits_by_it() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("policy-explain");
    let config = dir.join("mcpmux.toml");
    fs::write(&config, CONFIG).unwrap();

    // The issue's command line: allowed by rule 0's first allow glob.
    let run = explain(&config, "alice", "eng", "mcp:tools", "everything__echo");
    assert_eq!(run.status.code(), Some(0), "{run}");
    assert!(
        run.stdout
            .starts_with("allowed: \"everything__echo\" for principal \"alice\""),
        "{run}"
    );
    assert!(
        run.stdout
            .contains("policy[0] (line 4) allows it: \"everything__*\""),
        "{run}"
    );
    assert!(
        run.stdout
            .contains("policy[1] (line 11) does not apply: the principal is in none of groups [\"ops\"]"),
        "{run}"
    );

    // Allowed by the same rule, taken away by its deny.
    let run = explain(
        &config,
        "alice",
        "eng",
        "mcp:tools",
        "everything__trigger-long-running-operation",
    );
    assert_eq!(run.status.code(), Some(1), "{run}");
    assert!(run.stdout.starts_with("denied: "), "{run}");
    assert!(
        run.stdout
            .contains("policy[0] (line 4) denies it: \"everything__trigger-*\""),
        "{run}"
    );

    // A resource URI; lists separated by commas and spaces.
    let uri = "mcpmux://everything/demo://resource/static/document/a.md";
    let run = explain(&config, "alice", "eng, ops", "mcp:tools mcp:write", uri);
    assert_eq!(run.status.code(), Some(0), "{run}");
    assert!(
        run.stdout
            .contains("policy[0] (line 4) allows it: \"mcpmux://everything/*\""),
        "{run}"
    );

    // Rules apply, none allows the name.
    let run = explain(&config, "alice", "eng", "mcp:tools", "github__create_issue");
    assert_eq!(run.status.code(), Some(1), "{run}");
    assert!(
        run.stdout
            .contains("no allow glob of the rules that apply matches"),
        "{run}"
    );
    assert!(
        run.stdout.contains("policy[0] (line 4) applies but allows only"),
        "{run}"
    );

    // No rule applies (alice without the scope): deny by default, and why each rule does not apply.
    let run = explain(&config, "alice", "eng", "", "everything__echo");
    assert_eq!(run.status.code(), Some(1), "{run}");
    assert!(
        run.stdout
            .contains("no [[policy]] rule applies to the principal (deny by default)"),
        "{run}"
    );
    assert!(run.stdout.contains("scopes [\"mcp:tools\"] not granted"), "{run}");

    // Scope hierarchies: `mcp` is above `mcp:tools`; `[auth.scope_implies]` makes `mcp:admin` imply it.
    for broader in ["mcp", "mcp:admin"] {
        let run = explain(&config, "alice", "eng", broader, "everything__echo");
        assert_eq!(run.status.code(), Some(0), "{broader}: {run}");
    }
    let run = explain(&config, "alice", "eng", "mcp:tools:read", "everything__echo");
    assert_eq!(
        run.status.code(),
        Some(1),
        "a narrower scope does not cover a broader one: {run}"
    );

    // No [[policy]] at all: everything is allowed.
    fs::write(&config, "[gateway]\nlisten = \"127.0.0.1:8080\"\n").unwrap();
    let run = explain(
        &config,
        "bob",
        "",
        "",
        "everything__trigger-long-running-operation",
    );
    assert_eq!(run.status.code(), Some(0), "{run}");
    assert!(
        run.stdout.contains("no [[policy]] rule: everything is allowed"),
        "{run}"
    );

    // A configuration error: exit status 2, the line of the bad glob on stderr.
    fs::write(&config, "[[policy]]\nallow = [\"ok\",\n  \"tool[0-9]\"]\n").unwrap();
    let run = explain(&config, "alice", "eng", "mcp:tools", "ok");
    assert_eq!(run.status.code(), Some(2), "{run}");
    assert!(
        run.stderr
            .contains("mcpmux.toml:3: policy[0].allow[1] \"tool[0-9]\""),
        "{run}"
    );
    assert!(run.stdout.is_empty(), "{run}");
    let _ = fs::remove_dir_all(&dir);
}

/// `policy explain` with only `--principal` (no `--groups`, no `--scopes`).
fn explain_key(config: &Path, principal: &str, name: &str) -> ClientRun {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpmux"));
    cmd.args(["policy", "explain", "--config"])
        .arg(config)
        .args(["--principal", principal, name]);
    run_client(cmd, RUN_TIMEOUT)
}

/// For a name that is an API key's, explain uses the key's configured groups and scopes (and
/// says so), and its verdict is what the live gateway does for that key: each name it allows is
/// listed and answers, each it denies is neither (issue 25, item 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_for_an_api_key_agrees_with_the_live_gateway() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("policy-explain-keys");
    let (cmd, args) = peers().everything_stdio_cmd();
    let servers = format!(
        "[servers.everything]\ncommand = {cmd:?}\nargs = {}\n\n\
         [auth]\nscopes_supported = [\"mcp:read\"]\n\
         [[auth.api_keys]]\nname = \"ci-bot\"\nkey = \"ci-bot-key-0123456789\"\ngroups = [\"ci\"]\n\
         [[auth.api_keys]]\nname = \"reader\"\nkey = \"reader-key-0123456789\"\ngroups = [\"ci\"]\nscopes = [\"mcp:read\"]\n\
         [[auth.api_keys]]\nname = \"stranger\"\nkey = \"stranger-key-0123456789\"\n\n\
         [[policy]]\ngroups = [\"ci\"]\nallow = [\"everything__echo\", \"everything__get-sum\"]\n\n\
         [[policy]]\nprincipals = [\"reader\"]\ndeny = [\"everything__get-sum\"]\n\n\
         [[policy]]\nscopes = [\"mcp:read\"]\nallow = [\"everything__get-tiny-image\"]\n",
        toml_list(&args),
    );
    let mut gateway = ServeProcess::start(&dir, "", &servers, &dir, &[]);
    let url = gateway.url();
    // Ready when ci-bot sees echo.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            gateway.guard.try_wait().is_none(),
            "gateway exited:\n{}",
            gateway.log()
        );
        if let Ok(Ok(s)) = tokio::time::timeout(
            Duration::from_secs(10),
            RawSession::try_open_as(&url, "ci-bot-key-0123456789"),
        )
        .await
        {
            let (tools, _) = s.list_all("tools/list", "tools").await;
            s.delete().await;
            if Value::Array(tools).to_string().contains("everything__echo") {
                break;
            }
        }
        assert!(Instant::now() < deadline, "not ready:\n{}", gateway.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let names: [(&str, Value); 4] = [
        ("everything__echo", json!({"message": "hi"})),
        ("everything__get-sum", json!({"a": 1, "b": 2})),
        ("everything__get-tiny-image", json!({})),
        ("everything__get-env", json!({})),
    ];
    let mut allowed_somewhere = 0;
    let mut denied_somewhere = 0;
    for (principal, key) in [
        ("ci-bot", "ci-bot-key-0123456789"),
        ("reader", "reader-key-0123456789"),
        ("stranger", "stranger-key-0123456789"),
    ] {
        let session = RawSession::open_as(&url, key).await;
        let (tools, _) = session.list_all("tools/list", "tools").await;
        let listed: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        for (name, arguments) in &names {
            let run = explain_key(&gateway.config, principal, name);
            let says = match run.status.code() {
                Some(0) => true,
                Some(1) => false,
                _ => panic!("{principal} {name}: {run}"),
            };
            assert!(
                run.stdout
                    .contains(&format!("  {principal} is an API key ([[auth.api_keys]] at ")),
                "{run}"
            );
            let reply = session
                .call("tools/call", json!({"name": name, "arguments": arguments}))
                .await;
            let answered = reply.get("result").is_some() && reply["result"]["isError"] != true;
            assert_eq!(
                says,
                listed.contains(name),
                "{principal} {name}: explain and the live list disagree\nlisted: {listed:?}\n{run}"
            );
            assert_eq!(says, answered, "{principal} {name}: {reply}\n{run}");
            if says {
                allowed_somewhere += 1;
            } else {
                denied_somewhere += 1;
            }
        }
        session.delete().await;
    }
    assert!(
        allowed_somewhere >= 3 && denied_somewhere >= 3,
        "both verdicts are compared"
    );

    // The line says where the key is and what it holds.
    let run = explain_key(&gateway.config, "reader", "everything__get-tiny-image");
    let at = format!("{}:", gateway.config.display());
    assert!(
        run.stdout
            .contains(&format!("reader is an API key ([[auth.api_keys]] at {at}"))
            && run.stdout.contains("): groups ci; scopes mcp:read\n"),
        "{run}"
    );
    gateway.signal(libc::SIGTERM);
    assert!(gateway.wait_exit(Duration::from_secs(30)).await.success());
    let _ = fs::remove_dir_all(&dir);
}
