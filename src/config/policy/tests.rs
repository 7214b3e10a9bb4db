//! Tests for `[[policy]]` parsing: the issue's example, lines of rules and of bad values,
//! strict keys, globs and rate limits.

use crate::config::{Config, ConfigError, RateLimit, RatePeriod};

/// `text` with an `[auth]` table after it (rules need a principal to decide on).
fn parse(text: &str) -> Result<Config, ConfigError> {
    let text = format!("{text}\n[auth]\n[[auth.api_keys]]\nname = \"k\"\nkey = \"secret\"\n");
    Config::from_toml_str(&text, "config.toml", &|var| {
        (var == "TEAM").then(|| "eng".to_string())
    })
}

#[test]
fn rules_without_auth_are_refused_at_their_line() {
    let text = "[servers.a]\ncommand = \"x\"\n\n[[policy]]\nallow = [\"*\"]\n";
    let e = Config::from_toml_str(text, "config.toml", &|_| None)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("config.toml:4: [[policy]] needs [auth]"), "{e}");
}

fn err(text: &str) -> String {
    match parse(text) {
        Ok(c) => panic!("expected an error, got {:?}", c.policy),
        Err(e) => e.to_string(),
    }
}

const EXAMPLE: &str = r#"[gateway]
listen = "127.0.0.1:8080"

[[policy]]                                  # a comment
principals = ["alice"]
groups = ["eng"]
scopes = ["mcp:tools"]
allow = ["everything__*", "mcpmux://everything/*"]
deny = ["everything__trigger-*"]
rate_limit = "600/min"
audit_arguments = true

[[policy]]
groups = ["${TEAM}", "ops"]
allow = ["*"]

[audit]
path = "-"
"#;

#[test]
fn the_issue_example_parses_in_file_order_with_lines() {
    let c = parse(EXAMPLE).unwrap();
    assert_eq!(c.policy.len(), 2);
    let first = &c.policy[0];
    assert_eq!(first.line, 4);
    assert_eq!(first.principals.as_deref(), Some(&["alice".to_string()][..]));
    assert_eq!(first.groups.as_deref(), Some(&["eng".to_string()][..]));
    assert_eq!(first.scopes.as_deref(), Some(&["mcp:tools".to_string()][..]));
    let allow: Vec<&str> = first.allow.iter().map(|g| g.as_str()).collect();
    assert_eq!(allow, ["everything__*", "mcpmux://everything/*"]);
    assert_eq!(first.deny[0].as_str(), "everything__trigger-*");
    let limit = first.rate_limit.unwrap();
    assert_eq!((limit.requests.get(), limit.per), (600, RatePeriod::Minute));
    assert_eq!(limit.to_string(), "600/min");
    assert!(first.audit_arguments);
    let second = &c.policy[1];
    assert_eq!(second.line, 13);
    assert_eq!(second.principals, None);
    assert_eq!(second.scopes, None);
    assert_eq!(second.groups.as_ref().unwrap(), &["eng", "ops"], "interpolated");
    assert!(second.deny.is_empty() && second.rate_limit.is_none() && !second.audit_arguments);
}

#[test]
fn no_policy_table_is_an_empty_rule_list() {
    assert!(parse("").unwrap().policy.is_empty());
    assert!(parse("[servers.a]\ncommand = \"x\"\n").unwrap().policy.is_empty());
    // A rule with no allow grants nothing (it may still set a rate limit).
    let c = parse("[[policy]]\nprincipals = [\"ci\"]\nrate_limit = \"5/sec\"\n").unwrap();
    assert!(c.policy[0].allow.is_empty());
    // Inline tables are rules too; their line is their own.
    let c = parse("[gateway]\npath = \"/mcp\"\n\n[servers.a]\ncommand = \"x\"\n").unwrap();
    assert!(c.policy.is_empty());
    let c = parse("policy = [{ allow = [\"a\"] }]\n").unwrap();
    assert_eq!(c.policy[0].line, 1);
}

#[test]
fn unknown_keys_and_wrong_types_name_their_line() {
    let e = err("[[policy]]\nallow = [\"a\"]\nalow = [\"b\"]\n");
    assert!(e.starts_with("config.toml:3:1: unknown key `alow`"), "{e}");
    assert!(e.contains("(in [[policy]])"), "{e}");
    let e = err("[[policy]]\nallow = \"a\"\n");
    assert!(e.starts_with("config.toml:2:"), "{e}");
    let e = err("[gateway]\n[policy]\nallow = [\"a\"]\n");
    assert!(e.starts_with("config.toml:2:1: "), "{e}");
    assert!(
        e.ends_with("(write [[policy]]: each rule is a table of its own)"),
        "{e}"
    );
    let e = err("[[policy]]\naudit_arguments = \"yes\"\n");
    assert!(e.starts_with("config.toml:2:"), "{e}");
}

#[test]
fn bad_globs_are_errors_at_their_line() {
    let e = err("[[policy]]\nallow = [\"a\"]\n\n[[policy]]\nallow = [\"ok\",\n  \"\"]\n");
    assert!(
        e.starts_with("config.toml:6: policy[1].allow[1] \"\": a glob must not be empty"),
        "{e}"
    );
    let e = err("[[policy]]\ndeny = [\"tool[0-9]\"]\n");
    assert!(
        e.starts_with("config.toml:2: policy[0].deny[0] \"tool[0-9]\""),
        "{e}"
    );
    assert!(e.contains("only `*` and `?` are wildcards"), "{e}");
    let e = err("[[policy]]\nallow = [\"x__{a,b}\"]\n");
    assert!(e.contains("alternatives are not supported"), "{e}");
}

#[test]
fn who_lists_must_name_someone() {
    let e = err("[[policy]]\nallow = [\"*\"]\ngroups = []\n");
    assert!(
        e.starts_with("config.toml:1: policy[0].groups must not be empty"),
        "{e}"
    );
    let e = err("[[policy]]\nprincipals = [\"alice\", \"\"]\n");
    assert!(
        e.starts_with("config.toml:2: policy[0].principals[1] must not be empty"),
        "{e}"
    );
    let e = err("[[policy]]\nscopes = [\" mcp:tools\"]\n");
    assert!(e.contains("policy[0].scopes[0]"), "{e}");
}

#[test]
fn rate_limits_take_one_form() {
    let ok = |t: &str| RateLimit::parse(t).unwrap_or_else(|e| panic!("{t}: {e}"));
    assert_eq!(ok("1/sec").per, RatePeriod::Second);
    assert_eq!(ok("600/min").per.duration().as_secs(), 60);
    assert_eq!(ok("4294967295/hour").requests.get(), u32::MAX);
    for bad in [
        "",
        "600",
        "600/minute",
        "600/m",
        "/min",
        "0/min",
        "-1/min",
        "+1/min",
        "1.5/min",
        " 1/min",
        "1 /min",
        "1/ min",
        "4294967296/hour",
        "1/sec/min",
    ] {
        assert!(RateLimit::parse(bad).is_err(), "{bad:?} should be refused");
    }
    let e = err("\n[[policy]]\nrate_limit = \"600/minute\"\n");
    assert!(
        e.starts_with("config.toml:3: policy[0].rate_limit: \"600/minute\": unknown unit"),
        "{e}"
    );
    let e = err("[[policy]]\nrate_limit = \"0/sec\"\n");
    assert!(e.contains("at least 1"), "{e}");
}
