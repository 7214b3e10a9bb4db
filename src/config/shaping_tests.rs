//! Tests for `enabled` and the shaping keys of a server table: what they parse to, and the
//! errors (with their lines) for what can be known before a server lists its tools.

use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml_str(text, "shape.toml", &|var| {
        (var == "TOOL").then(|| "echo".to_string())
    })
}

fn err(text: &str) -> String {
    match parse(text) {
        Ok(c) => panic!("expected an error, got {c:?}"),
        Err(e) => e.to_string(),
    }
}

const ISSUE_EXAMPLE: &str = r#"
[servers.github]
enabled = false                          # kept in the file, not started
command = "github-mcp"
[servers.everything]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-everything@2026.8.31"]
tools = { include = ["echo", "get-*"], exclude = ["get-env"] }   # globs over the server's own names
rename = { echo = "say" }                # exposed as everything__say
descriptions = { say = "Repeat a message back." }
prompts = { exclude = ["*-secret"] }
resources = { include = ["demo://resource/static/*"] }
"#;

#[test]
fn the_issue_example_parses_into_a_shaping_and_a_disabled_server() {
    let config = parse(ISSUE_EXAMPLE).unwrap();
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["everything"]);
    let disabled: Vec<&str> = config.disabled.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(disabled, ["github"]);
    let shaping = &config.servers[0].shaping;
    assert!(shaping.tools.admits("echo") && shaping.tools.admits("get-sum"));
    assert!(!shaping.tools.admits("get-env") && !shaping.tools.admits("add"));
    assert!(shaping.prompts.admits("p") && !shaping.prompts.admits("p-secret"));
    assert!(shaping.resources.admits("demo://resource/static/1"));
    assert!(!shaping.resources.admits("demo://resource/dynamic/1"));
    assert_eq!(shaping.renamed("echo"), Some("say"));
    assert_eq!(shaping.description("say"), Some("Repeat a message back."));
    assert!(!shaping.is_identity());
    // Without the keys nothing is shaped; `enabled = true` is the default.
    let plain = parse("[servers.a]\ncommand = \"x\"\nenabled = true\n").unwrap();
    assert!(plain.servers[0].shaping.is_identity());
    assert!(plain.disabled.is_empty());
    // Values are interpolated like any other string.
    let interpolated = parse("[servers.a]\ncommand = \"x\"\nrename = { echo = \"${TOOL}2\" }\n").unwrap();
    assert_eq!(interpolated.servers[0].shaping.renamed("echo"), Some("echo2"));
}

#[test]
fn a_disabled_server_may_be_a_placeholder_and_may_share_a_namespace_with_an_enabled_one() {
    // The issue's `[servers.github]` with only `enabled = false`: kept, and what it lacks is a
    // warning for when it is turned on.
    let config = parse("[servers.off]\nenabled = false\n\n[servers.on]\ncommand = \"x\"\n").unwrap();
    let off = &config.disabled[0];
    assert_eq!(off.name, "off");
    let problem = off.problem.as_deref().unwrap_or_default();
    assert!(
        problem.starts_with("shape.toml:1:") && problem.contains("missing `command`"),
        "{problem}"
    );
    let findings = config.preflight(None, std::path::Path::new("/"));
    let warned = findings
        .iter()
        .find(|f| f.message.contains("servers.off has enabled = false"));
    assert!(
        warned.is_some_and(|f| f.severity == Severity::Warning && f.message.contains("missing `command`")),
        "{findings:?}"
    );
    // A complete disabled server has no problem.
    let complete =
        parse("[servers.off]\nenabled = false\ncommand = \"x\"\n[servers.on]\ncommand = \"y\"\n").unwrap();
    assert_eq!(complete.disabled[0].problem, None);
    // Nor does an unset variable in a disabled server stop the file from loading.
    let unset =
        parse("[servers.off]\nenabled = false\nurl = \"https://x/${SURELY_UNSET_TOKEN_VAR}\"\n").unwrap();
    assert!(unset.disabled[0]
        .problem
        .as_deref()
        .is_some_and(|p| p.contains("SURELY_UNSET_TOKEN_VAR")));
    // Two definitions of one server, one of them off: a usual way to keep an alternative.
    let text = "[servers.local]\nnamespace = \"gh\"\ncommand = \"x\"\n\n\
                [servers.remote]\nnamespace = \"gh\"\nenabled = false\nurl = \"https://example.com/mcp\"\n";
    let config = parse(text).unwrap();
    assert_eq!((config.servers.len(), config.disabled.len()), (1, 1));
    // Never started, so never looked for: only the empty catalog is worth a word.
    let only_off =
        parse("[servers.off]\nenabled = false\ncommand = \"mcpmux-surely-not-installed\"\n").unwrap();
    let found = only_off.preflight(None, std::path::Path::new("/"));
    let messages: Vec<String> = found.iter().map(|f| f.to_string()).collect();
    assert_eq!(
        messages,
        ["warning: every server has enabled = false: the gateway would serve an empty catalog"]
    );
    // Its shaping is checked too (a warning while it is off).
    let off =
        parse("[servers.a]\nenabled = false\ncommand = \"x\"\ntools = { include = [\"[a]\"] }\n").unwrap();
    let problem = off.disabled[0].problem.as_deref().unwrap_or_default();
    assert!(
        problem.starts_with("shape.toml:4:") && problem.contains("tools.include[0]"),
        "{problem}"
    );
}

#[test]
fn shaping_errors_name_the_key_and_line() {
    let server = "[servers.everything]\ncommand = \"npx\"\n";
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "tools = { include = [\"echo\", \"\"] }\n",
            "shape.toml:3:",
            &["tools.include[1]", "must not be empty"],
        ),
        (
            "prompts = { exclude = [\"a{b,c}\"] }\n",
            "shape.toml:3:",
            &["prompts.exclude[0]", "alternatives"],
        ),
        (
            "rename = { echo = \"say\", add = \"say\" }\n",
            "shape.toml:3:",
            &["\"echo\" and \"add\"", "\"say\""],
        ),
        (
            "tools = { exclude = [\"ec*\"] }\n\nrename = { echo = \"say\" }\n",
            "shape.toml:5:",
            &["rename.echo", "left out by `tools`"],
        ),
        (
            "tools = { include = [\"echo\", \"say\"] }\nrename = { echo = \"say\" }\n",
            "shape.toml:4:",
            &["\"echo\"", "\"say\"", "kept by `tools.include`"],
        ),
        (
            "rename = { echo = \"say\" }\ndescriptions = { echo = \"Repeat.\" }\n",
            "shape.toml:4:",
            &["descriptions.echo", "renamed to \"say\"", "keyed by the new name"],
        ),
        (
            "rename = { echo = \"two words\" }\n",
            "shape.toml:3:",
            &["rename.echo", "whitespace"],
        ),
        (
            "tools = { include = [\"a\"], only = [\"b\"] }\n",
            "shape.toml:3:",
            &["unknown key `only`"],
        ),
        ("enabled = \"no\"\n", "shape.toml:3:", &["invalid type"]),
    ];
    for (keys, at, words) in cases {
        let e = err(&format!("{server}{keys}"));
        assert!(e.starts_with(at), "{keys}: {e}");
        for word in *words {
            assert!(e.contains(word), "{keys}: {e} lacks {word}");
        }
    }
    // What is fine: a swap, a rename onto a name only a wildcard keeps (known at run time), a
    // description of a tool that is not renamed.
    let fine = [
        "rename = { echo = \"add\", add = \"echo\" }\n",
        "tools = { include = [\"*\"] }\nrename = { echo = \"add\" }\n",
        "descriptions = { add = \"Add.\" }\nrename = { echo = \"say\" }\n",
    ];
    for keys in fine {
        parse(&format!("{server}{keys}")).unwrap_or_else(|e| panic!("{keys}: {e}"));
    }
}

#[test]
fn a_rename_must_fit_the_name_budget_and_its_alphabet() {
    let long = "n".repeat(60);
    let cases = [
        // "everything__" (12) + 63 = 75 > 64.
        (
            String::new(),
            format!("rename = {{ echo = \"{long}abc\" }}\n"),
            64,
        ),
        // With a reserve of 24, 40 remain: 12 + 29.
        (
            "[gateway]\nname_reserve = 24\n".to_string(),
            format!("rename = {{ echo = \"{}\" }}\n", &long[..29]),
            40,
        ),
        (
            String::new(),
            "rename = { echo = \"files.read\" }\n".to_string(),
            64,
        ),
        (
            String::new(),
            "rename = { echo = \"caf\u{e9}\" }\n".to_string(),
            64,
        ),
    ];
    for (gateway, keys, budget) in cases {
        let text = format!("{gateway}[servers.everything]\ncommand = \"npx\"\n{keys}");
        let e = err(&text);
        let line = text.lines().count();
        assert!(e.starts_with(&format!("shape.toml:{line}:")), "{keys}: {e}");
        for word in [
            "rename.echo",
            "would be exposed as \"everything__",
            &format!("1 to {budget} characters"),
        ] {
            assert!(e.contains(word), "{keys}: {e} lacks {word}");
        }
    }
    // Exactly the budget is fine; an unprefixed server's rename is its whole name.
    for keys in [
        format!("rename = {{ echo = \"{}\" }}\n", &long[..52]),
        format!(
            "namespace = \"\"\nrename = {{ echo = \"{long}{}\" }}\n",
            &long[..4]
        ),
    ] {
        parse(&format!("[servers.everything]\ncommand = \"npx\"\n{keys}"))
            .unwrap_or_else(|e| panic!("{keys}: {e}"));
    }
}
