//! `policy explain` for a name that is an API key's: the key's configured groups and scopes,
//! said in the output; `--groups` and `--scopes` replace them, with a note.

use super::*;

const CONFIG: &str = "[auth]\nissuer = \"https://idp.example\"\nrequired_scopes = [\"mcp:tools\"]\n\
     [auth.scope_implies]\n\"mcp:admin\" = [\"mcp:read\"]\n\
     [[auth.api_keys]]\nname = \"ci-bot\"\nkey = \"k1\"\ngroups = [\"ci\"]\n\
     [[auth.api_keys]]\nname = \"ops\"\nkey = \"k2\"\ngroups = [\"ops\"]\nscopes = [\"mcp:tools\", \"mcp:admin\"]\n\
     [[policy]]\ngroups = [\"ci\"]\nallow = [\"everything__echo\"]\n\
     [[policy]]\nscopes = [\"mcp:read\"]\nallow = [\"everything__get-tiny-image\"]\n";

fn config() -> Config {
    Config::from_toml_str(CONFIG, "t.toml", &|_| None).unwrap()
}

/// The explanation and verdict for `principal` with the flags given.
fn run(principal: &str, groups: Option<&[&str]>, scopes: Option<&[&str]>, name: &str) -> (bool, String) {
    let owned = |v: Option<&[&str]>| v.map(|v| v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let (groups, scopes) = (owned(groups), owned(scopes));
    verdict(&config(), principal, groups.as_deref(), scopes.as_deref(), name)
}

#[test]
fn an_api_keys_name_is_explained_with_its_configured_groups_and_scopes() {
    let (allowed, text) = run("ci-bot", None, None, "everything__echo");
    assert!(allowed, "{text}");
    assert!(
        text.contains(
            "  ci-bot is an API key ([[auth.api_keys]] at t.toml:7): groups ci; scopes mcp:tools \
             (none given: auth.required_scopes)\n"
        ),
        "{text}"
    );
    assert!(text.contains("(groups: ci; scopes: mcp:tools)"), "{text}");
    // The rule for mcp:read does not apply to a key not given it.
    let (allowed, text) = run("ci-bot", None, None, "everything__get-tiny-image");
    assert!(!allowed, "{text}");
    assert!(text.contains("scopes [\"mcp:read\"] not granted"), "{text}");
    // A key given a scope holds it and what it implies.
    let (allowed, text) = run("ops", None, None, "everything__get-tiny-image");
    assert!(allowed, "{text}");
    assert!(
        text.contains("ops is an API key ([[auth.api_keys]] at t.toml:11): groups ops; scopes mcp:tools, mcp:admin, mcp:read\n"),
        "{text}"
    );
}

#[test]
fn flags_replace_a_keys_values_with_a_note() {
    let (allowed, text) = run("ci-bot", None, Some(&["mcp:read"]), "everything__get-tiny-image");
    assert!(allowed, "{text}");
    assert!(
        text.contains("--scopes replaces the key's scopes (mcp:tools) here: the gateway gives the key its configured ones"),
        "{text}"
    );
    let (allowed, text) = run("ci-bot", Some(&[]), None, "everything__echo");
    assert!(!allowed, "an empty --groups is given too: {text}");
    assert!(text.contains("--groups replaces the key's groups (ci)"), "{text}");
    assert!(!text.contains("--scopes"), "{text}");
}

#[test]
fn any_other_name_has_exactly_the_flags() {
    let (allowed, text) = run("alice", None, None, "everything__echo");
    assert!(!allowed, "{text}");
    assert!(!text.contains("API key"), "{text}");
    let (allowed, text) = run(
        "alice",
        Some(&["ci"]),
        Some(&["mcp:admin"]),
        "everything__get-tiny-image",
    );
    assert!(allowed, "scope_implies applies to the flags: {text}");
}
