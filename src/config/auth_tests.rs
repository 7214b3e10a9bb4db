//! The `[auth]` table and `gateway.public_url` / `allow_unauthenticated`: defaults, and each
//! refusal pointed at its line.

use crate::config::{Config, ConfigError};

fn parse(text: &str) -> Result<Config, String> {
    let env = |var: &str| (var == "CI_KEY").then(|| "s3cret-key".to_string());
    Config::from_toml_str(text, "t.toml", &env).map_err(|e: ConfigError| e.to_string())
}

fn refused(text: &str) -> String {
    match parse(text) {
        Ok(config) => panic!("accepted: {config:?}"),
        Err(message) => message,
    }
}

const HEX: &str = "a665a45920422f9d417e4867efdc4fb8a04a1f3fff1fa07e998e86f7f7a27ae3";

#[test]
fn defaults_follow_listen_and_path() {
    let c = parse(
        "[gateway]\nlisten = \"127.0.0.1:9000\"\npath = \"/x\"\n[auth]\nissuer = \"https://idp.example\"\n",
    )
    .unwrap();
    assert_eq!(c.gateway.public_url, "http://127.0.0.1:9000/x");
    assert!(!c.gateway.allow_unauthenticated);
    let auth = c.auth.unwrap();
    assert_eq!(auth.audience, ["http://127.0.0.1:9000/x"]);
    assert_eq!(auth.groups_claim, "groups");
    assert!(auth.jwks_uri.is_none() && auth.api_keys.is_empty() && auth.required_scopes.is_empty());
    assert!(parse("").unwrap().auth.is_none());
}

#[test]
fn every_key_of_the_issue_is_read() {
    let c = parse(&format!(
        "[gateway]\npublic_url = \"https://mcp.example.com/mcp\"\n[auth]\nissuer = \"https://idp.example.com\"\n\
         jwks_uri = \"https://idp.example.com/jwks\"\naudience = [\"a\", \"b\"]\n\
         scopes_supported = [\"mcp:tools\", \"mcp:write\"]\nrequired_scopes = [\"mcp:tools\"]\ngroups_claim = \"roles\"\n\
         [[auth.api_keys]]\nname = \"ci-bot\"\nsha256 = \"{HEX}\"\ngroups = [\"ci\"]\n\
         [[auth.api_keys]]\nname = \"other\"\nkey = \"${{CI_KEY}}\"\n\
         [[auth.step_up]]\ntools = [\"fs__write_*\"]\nscopes = [\"mcp:write\"]\n"
    ))
    .unwrap();
    assert_eq!(c.gateway.public_url, "https://mcp.example.com/mcp");
    let auth = c.auth.unwrap();
    assert_eq!(auth.audience, ["a", "b"]);
    assert_eq!(auth.required_scopes, ["mcp:tools"]);
    assert_eq!(auth.groups_claim, "roles");
    assert_eq!(auth.api_keys[0].name, "ci-bot");
    assert_eq!(auth.api_keys[0].sha256[0], 0xa6);
    assert_eq!(auth.api_keys[0].groups, ["ci"]);
    let digest = ring::digest::digest(&ring::digest::SHA256, b"s3cret-key");
    assert_eq!(auth.api_keys[1].sha256.as_slice(), digest.as_ref());
    assert!(!format!("{:?}", auth.api_keys).contains("s3cret"));
    assert_eq!(auth.step_up[0].tools[0].as_str(), "fs__write_*");
    assert_eq!(auth.step_up[0].scopes, ["mcp:write"]);
}

#[test]
fn a_network_listen_without_auth_is_refused_unless_allowed() {
    let msg = refused("[gateway]\nlisten = \"0.0.0.0:8080\"\n");
    assert!(
        msg.starts_with("t.toml:2: gateway.listen 0.0.0.0:8080") && msg.contains("allow_unauthenticated"),
        "{msg}"
    );
    parse("[gateway]\nlisten = \"0.0.0.0:8080\"\nallow_unauthenticated = true\n").unwrap();
    parse("[gateway]\nlisten = \"0.0.0.0:8080\"\n[auth]\nissuer = \"https://idp.example\"\n").unwrap();
    parse("[gateway]\nlisten = \"[::1]:8080\"\n").unwrap();
}

#[test]
fn introspection_is_read_with_its_secret_masked() {
    let c = parse(
        "[auth]\nintrospection = { endpoint = \"https://idp.example/i\", client_id = \"c\", client_secret = \"${CI_KEY}\" }\n",
    )
    .unwrap();
    let found = c.auth.unwrap().introspection.unwrap();
    assert_eq!(
        (found.endpoint.as_str(), found.client_id.as_str()),
        ("https://idp.example/i", "c")
    );
    assert_eq!(found.client_secret.expose(), "s3cret-key");
    assert!(!format!("{found:?}").contains("s3cret"));
    assert_eq!(found.cache_for, std::time::Duration::from_secs(60), "the default");
    let msg =
        refused("[auth]\nintrospection = { endpoint = \"idp\", client_id = \"c\", client_secret = \"s\" }\n");
    assert!(
        msg.starts_with("t.toml:2:") && msg.contains("auth.introspection.endpoint"),
        "{msg}"
    );
    let msg = refused("[auth]\nintrospection = { endpoint = \"https://i\", client_id = \"c\" }\n");
    assert!(msg.contains("missing field `client_secret`"), "{msg}");
}

#[test]
fn each_bad_value_is_refused_at_its_line() {
    let cases: &[(&str, &str)] = &[
        ("[gateway]\npublic_url = \"mcp.example.com\"\n", "t.toml:2: gateway.public_url"),
        ("[auth]\nissuer = \"not a url\"\n", "t.toml:2: auth.issuer"),
        ("[auth]\njwks_uri = \"https://idp/jwks\"\n[[auth.api_keys]]\nname = \"k\"\nkey = \"x\"\n", "needs auth.issuer"),
        ("[auth]\nscopes_supported = []\n", "needs `issuer`"),
        ("[auth]\nissuer = \"https://i\"\nscopes_supported = [\"a b\"]\n", "t.toml:3: auth.scopes_supported[0]"),
        ("[auth]\nissuer = \"https://i\"\naudience = []\n", "auth.audience must not be empty"),
        ("[auth]\nissuer = \"https://i\"\ngroups_claim = \"\"\n", "auth.groups_claim must not be empty"),
        ("[[auth.api_keys]]\nname = \"k\"\nsha256 = \"abc\"\n", "t.toml:3: auth.api_keys[0].sha256 must be 64"),
        ("[[auth.api_keys]]\nname = \"k\"\n", "exactly one of `sha256`"),
        ("[[auth.api_keys]]\nname = \"k\"\nkey = \"a\"\n[[auth.api_keys]]\nname = \"k\"\nkey = \"b\"\n", "is used by another"),
        ("[[auth.api_keys]]\nname = \"a\"\nkey = \"same\"\n[[auth.api_keys]]\nname = \"b\"\nkey = \"same\"\n", "same key as"),
        ("[[auth.api_keys]]\nname = \"\"\nkey = \"a\"\n", "name must not be empty"),
        ("[auth]\nissuer = \"https://i\"\n[[auth.step_up]]\ntools = []\nscopes = [\"s\"]\n", "auth.step_up[0].tools"),
        ("[auth]\nissuer = \"https://i\"\n[[auth.step_up]]\ntools = [\"t\"]\nscopes = []\n", "auth.step_up[0].scopes"),
        ("[auth]\nissuer = \"https://i\"\n[[auth.step_up]]\ntools = [\" t\"]\nscopes = [\"s\"]\n", "t.toml:4: auth.step_up[0].tools[0]"),
        ("[auth]\nissuer = \"https://i\"\n[auth.scope_implies]\n\"a b\" = [\"c\"]\n", "auth.scope_implies.\"a b\": \"a b\" is not a scope"),
        ("[auth]\nissuer = \"https://i\"\n[auth.scope_implies]\nadmin = [\"w x\"]\n", "t.toml:4: auth.scope_implies.\"admin\"[0]"),
        ("[auth]\nissuer = \"https://i\"\n[auth.scope_implies]\nadmin = \"write\"\n", "t.toml:4"),
        ("[auth]\nintrospection = { endpoint = \"https://i/x\", client_id = \"c\", client_secret = \"s\", cache_secs = 3601 }\n", "t.toml:2: auth.introspection.cache_secs must be at most 3600"),
        ("[auth]\nissuer = \"https://i\"\nbogus = 1\n", "unknown key `bogus`"),
        ("[[auth.api_keys]]\nname = \"k\"\nkey = \"a\"\nsecret = \"x\"\n", "unknown key `secret`"),
        ("[[auth.api_keys]]\nname = \"k\"\nkey = \"a\"\nscopes = [\"a b\"]\n", "t.toml:4: auth.api_keys[0].scopes[0]"),
        (
            "[auth]\nrequired_scopes = [\"mcp:tools\"]\n[[auth.api_keys]]\nname = \"k\"\nkey = \"a\"\nscopes = [\"mcp:read\"]\n",
            "t.toml:6: auth.api_keys[0].scopes lacks [\"mcp:tools\"] of auth.required_scopes",
        ),
    ];
    for (text, expected) in cases {
        let msg = refused(text);
        assert!(
            msg.contains(expected),
            "{text}\n=> {msg}\n(expected {expected:?})"
        );
    }
}

/// A key holds the scopes it is given, with what they imply; by default the required ones.
#[test]
fn a_keys_scopes_are_its_own_and_default_to_the_required_ones() {
    let c = parse(
        "[auth]\nrequired_scopes = [\"mcp:tools\"]\nscopes_supported = [\"mcp:tools\", \"mcp:read\", \"mcp:admin\"]\n\
         [auth.scope_implies]\n\"mcp:admin\" = [\"mcp:tools\", \"mcp:read\"]\n\
         [[auth.api_keys]]\nname = \"ci-bot\"\nkey = \"a\"\ngroups = [\"ci\"]\n\
         [[auth.api_keys]]\nname = \"reader\"\nkey = \"b\"\nscopes = [\"mcp:tools\", \"mcp:read\"]\n\
         [[auth.api_keys]]\nname = \"ops\"\nkey = \"c\"\nscopes = [\"mcp:admin\"]\n",
    )
    .unwrap();
    let auth = c.auth.unwrap();
    let held = |name: &str| auth.key_scopes(auth.api_key(name).unwrap());
    assert_eq!(auth.api_keys[0].scopes, None);
    assert_eq!(held("ci-bot"), ["mcp:tools"], "the default: admitted and no more");
    assert_eq!(held("reader"), ["mcp:tools", "mcp:read"]);
    assert_eq!(held("ops"), ["mcp:admin", "mcp:read", "mcp:tools"]);
    assert_eq!(auth.api_keys[1].at, "t.toml:11", "the line of its name");
    assert!(auth.api_key("nobody").is_none());
    // Implied scopes count towards the required ones.
    let c = parse(
        "[auth]\nrequired_scopes = [\"mcp:tools\"]\n[auth.scope_implies]\n\"mcp:admin\" = [\"mcp:tools\"]\n\
         [[auth.api_keys]]\nname = \"ops\"\nkey = \"c\"\nscopes = [\"mcp:admin\"]\n",
    );
    assert!(c.is_ok(), "{c:?}");
}
