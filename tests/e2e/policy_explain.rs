//! `mcpmux policy explain` as an operator runs it: the decision for one principal and one
//! exposed name, the rules that made it (index, line, the glob that matched), and the exit status
//! (0 allowed, 1 denied, 2 configuration error).

use crate::support::{run_client, scratch_dir, ClientRun};
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

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
