//! Tests for `[profiles.NAME]`: what it parses to, where each profile is served, its resource
//! URL, and the errors (with their lines) for paths, servers and globs.

use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml_str(text, "profiles.toml", &|_| None)
}

fn err(text: &str) -> String {
    match parse(text) {
        Ok(c) => panic!("expected an error, got {c:?}"),
        Err(e) => e.to_string(),
    }
}

const SERVERS: &str = r#"
[servers.everything]
command = "npx"
[servers.time]
command = "uvx"
[servers.github]
enabled = false
command = "github-mcp"
"#;

#[test]
fn the_issue_example_parses() {
    let text = format!(
        "{SERVERS}\n[profiles.review]                        # another endpoint with a subset of the catalog\n\
         path = \"/mcp/review\"\nservers = [\"everything\", \"time\"]\n\
         tools = {{ include = [\"everything__*\"] }}   # globs over exposed names\n\
         [profiles.all]\npath = \"/all\"\n"
    );
    let config = parse(&text).unwrap();
    let review = config.profile("review").unwrap();
    assert_eq!(review.path, "/mcp/review");
    assert_eq!(
        review.servers,
        Some(vec![UpstreamId::new("everything"), UpstreamId::new("time")])
    );
    assert!(review.tools.admits("everything__echo") && !review.tools.admits("time__get_current_time"));
    assert!(review.prompts.is_everything() && review.resources.is_everything());
    assert_eq!(review.line, 10);
    let all = config.profile("all").unwrap();
    assert_eq!(all.servers, None);
    assert!(all.has_server(&UpstreamId::new("time")));
    assert!(!review.has_server(&UpstreamId::new("github")));
    // Where each is served: its path, and its legacy SSE endpoints under it.
    assert_eq!(
        config
            .profile_at("/mcp/review")
            .map(|(p, f)| (p.name.as_str(), f)),
        Some(("review", ProfileFace::Endpoint))
    );
    assert_eq!(
        config
            .profile_at("/mcp/review/sse")
            .map(|(p, f)| (p.name.as_str(), f)),
        Some(("review", ProfileFace::LegacyStream))
    );
    assert_eq!(
        config
            .profile_at("/all/message")
            .map(|(p, f)| (p.name.as_str(), f)),
        Some(("all", ProfileFace::LegacyMessage))
    );
    assert!(config.profile_at("/mcp").is_none() && config.profile_at("/mcp/other").is_none());
    // No profile: nothing is looked for.
    assert!(parse(SERVERS).unwrap().profiles.is_empty());
}

#[test]
fn a_disabled_server_may_be_named_and_adds_nothing() {
    let text = format!("{SERVERS}[profiles.p]\npath = \"/p\"\nservers = [\"github\", \"time\"]\n");
    let config = parse(&text).unwrap();
    let p = config.profile("p").unwrap();
    assert!(p.has_server(&UpstreamId::new("github")) && p.has_server(&UpstreamId::new("time")));
    assert!(!p.has_server(&UpstreamId::new("everything")));
}

#[test]
fn paths_servers_and_globs_are_checked_at_their_lines() {
    let profile = |body: &str| format!("{SERVERS}[profiles.p]\n{body}");
    // SERVERS is 8 lines (it starts with a newline): the table is line 9, its first key line 10.
    let cases = [
        (
            profile("servers = [\"time\"]\n"),
            "profiles.toml:9: profiles.p.path is required",
        ),
        (
            profile("path = \"mcp/p\"\n"),
            "profiles.toml:10: profiles.p.path \"mcp/p\" must start with '/'",
        ),
        (
            profile("path = \"/mcp\"\n"),
            "profiles.toml:10: profiles.p.path \"/mcp\" is already gateway.path",
        ),
        (
            profile("path = \"/sse\"\n"),
            "is already the legacy SSE stream of gateway.path",
        ),
        (
            profile("path = \"/message\"\n"),
            "is already the legacy SSE message endpoint of gateway.path",
        ),
        (profile("path = \"/status\"\n"), "is already an operator endpoint"),
        (
            profile("path = \"/.well-known/oauth-protected-resource/x\"\n"),
            "is under /.well-known/",
        ),
        (
            profile("path = \"/p\"\nservers = [\"time\", \"nope\"]\n"),
            "profiles.toml:11: profiles.p.servers[1]: no server \"nope\" is configured",
        ),
        (
            profile("path = \"/p\"\ntools = { include = [\"ok\", \"[\"] }\n"),
            "profiles.toml:11: profiles.p.tools.include[1] \"[\"",
        ),
        (
            profile("path = \"/p\"\nport = 1\n"),
            "profiles.toml:11:1: unknown key `port`",
        ),
        (
            format!("{SERVERS}[profiles.a]\npath = \"/x\"\n[profiles.b]\npath = \"/x\"\n"),
            "profiles.toml:12: profiles.b.path \"/x\" is already the path of profiles.a",
        ),
        (
            format!("{SERVERS}[profiles.a]\npath = \"/x\"\n[profiles.b]\npath = \"/x/sse\"\n"),
            "profiles.b.path \"/x/sse\" is already the legacy SSE stream of profiles.a",
        ),
        (
            format!("{SERVERS}[profiles.a]\npath = \"/x/sse\"\n[profiles.b]\npath = \"/x\"\n"),
            "profiles.b.path \"/x\": its legacy SSE stream \"/x/sse\" is already the path of profiles.a",
        ),
    ];
    for (text, expected) in cases {
        let message = err(&text);
        assert!(
            message.contains(expected),
            "{message}\n  does not contain\n{expected}"
        );
    }
    // Side by side under one prefix is fine: each profile's legacy endpoints are its own.
    let side_by_side = format!("{SERVERS}[profiles.a]\npath = \"/mcp/a\"\n[profiles.b]\npath = \"/mcp/b\"\n");
    assert_eq!(parse(&side_by_side).unwrap().profiles.len(), 2);
}

#[test]
fn a_profiles_resource_url_is_the_public_url_with_its_path() {
    let gateway = |public_url: &str, path: &str| GatewayConfig {
        public_url: public_url.into(),
        path: path.into(),
        ..GatewayConfig::default()
    };
    assert_eq!(
        resource_url(&gateway("https://mcp.example.com/mcp", "/mcp"), "/mcp/review"),
        "https://mcp.example.com/mcp/review"
    );
    // A proxy's prefix is kept.
    assert_eq!(
        resource_url(&gateway("https://example.com/team/mcp", "/mcp"), "/mcp/review"),
        "https://example.com/team/mcp/review"
    );
    assert_eq!(
        resource_url(&gateway("https://example.com/", "/mcp"), "/review"),
        "https://example.com/review"
    );
    assert_eq!(
        resource_url(&gateway("http://127.0.0.1:8080/mcp", "/mcp"), "/r"),
        "http://127.0.0.1:8080/r"
    );
}

#[test]
fn discovery_budget_and_match_parse_and_are_checked_at_their_lines() {
    let text = format!(
        "{SERVERS}[profiles.agent]\npath = \"/mcp/agent\"\ndiscovery = \"search\"\n\
         match = {{ header = \"X-Mcpmux-Profile\", value = \"agent\" }}\n\
         [profiles.auto]\npath = \"/mcp/auto\"\ndiscovery = \"auto\"\ntoken_budget = 500\n\
         match = {{ claim = \"groups\", value = \"agents\" }}\n\
         [profiles.plain]\npath = \"/mcp/plain\"\n"
    );
    let config = parse(&text).unwrap();
    let agent = config.profile("agent").unwrap();
    assert_eq!(agent.discovery, Discovery::Search);
    assert_eq!(
        agent.matcher,
        Some(ProfileMatch::Header {
            name: "x-mcpmux-profile".into(),
            value: "agent".into()
        })
    );
    let auto = config.profile("auto").unwrap();
    assert_eq!((auto.discovery, auto.token_budget), (Discovery::Auto, 500));
    assert_eq!(
        auto.matcher,
        Some(ProfileMatch::Claim {
            claim: "groups".into(),
            value: "agents".into()
        })
    );
    let plain = config.profile("plain").unwrap();
    assert_eq!(
        (plain.discovery, plain.token_budget, &plain.matcher),
        (Discovery::List, 8000, &None)
    );
    let profile = |body: &str| format!("{SERVERS}[profiles.p]\npath = \"/p\"\n{body}");
    let cases = [
        (
            profile("discovery = \"find\"\n"),
            "profiles.toml:11: profiles.p.discovery \"find\" is not one of \"list\", \"search\", \"auto\"",
        ),
        (
            profile("token_budget = 0\n"),
            "profiles.toml:11: profiles.p.token_budget must be at least 1",
        ),
        (
            profile("token_budget = 99999999999\n"),
            "profiles.p.token_budget 99999999999 is over the limit",
        ),
        (
            profile("match = { claim = \"groups\", header = \"X\", value = \"v\" }\n"),
            "profiles.toml:11: profiles.p.match names a claim and a header: give one of them",
        ),
        (
            profile("match = { value = \"v\" }\n"),
            "profiles.p.match needs a claim or a header",
        ),
        (
            profile("match = { header = \"X\" }\n"),
            "profiles.p.match needs a value",
        ),
        (
            profile("match = { header = \"X\", value = \"\" }\n"),
            "profiles.p.match.value must not be empty",
        ),
        (
            profile("match = { header = \"bad header\", value = \"v\" }\n"),
            "profiles.p.match.header \"bad header\" is not an HTTP header name",
        ),
        (
            profile("match = { cookie = \"c\", value = \"v\" }\n"),
            "profiles.toml:11:11: unknown key `cookie`, expected one of `claim`, `header`, `value`",
        ),
    ];
    for (text, expected) in cases {
        let got = err(&text);
        assert!(got.contains(expected), "{expected:?} not in {got:?}");
    }
}
