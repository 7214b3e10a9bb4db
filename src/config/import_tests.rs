//! What `mcpmux import` writes loads as a configuration as it is: every client's format, its
//! variables in mcpmux's interpolation (defaults, inputs), odd names and collisions.

use super::*;
use crate::import::{parse_in, render, Namer};

fn imported(files: &[(&str, &str)], out_dir: &str) -> String {
    let sources: Vec<(String, crate::import::SourceFile)> = (files.iter())
        .map(|(path, text)| {
            let file = parse_in(Path::new(path), text, Some("/home/u")).unwrap_or_else(|e| panic!("{e}"));
            (path.to_string(), file)
        })
        .collect();
    render(&sources, out_dir, &mut Namer::default()).text
}

#[test]
fn every_format_converted_loads_with_its_variables() {
    let text = imported(
        &[
            (
                "/home/u/.config/Claude/claude_desktop_config.json",
                r#"{"mcpServers": {"my files": {"command": "npx", "args": ["srv", "${NOT_EXPANDED}"]}}}"#,
            ),
            (
                "/home/u/proj/.mcp.json",
                r#"{"mcpServers": {"api": {"type": "http", "url": "${API_URL:-http://127.0.0.1:9/mcp}",
                    "headers": {"Authorization": "Bearer ${TOKEN}"}},
                  "my files": {"type": "stdio", "command": "${PY:-python3}", "args": ["-m", "x"]}}}"#,
            ),
            (
                "/home/u/proj/.cursor/mcp.json",
                r#"{"mcpServers": {"sse": {"type": "sse", "url": "http://127.0.0.1:9/sse", "headers": {"K": "${env:TOKEN}"}}}}"#,
            ),
            (
                "/home/u/proj/.vscode/mcp.json",
                r#"{"inputs": [{"type": "promptString", "id": "api-key", "password": true}],
                    "servers": {"vs": {"type": "streamable-http", "url": "http://127.0.0.1:9/mcp",
                    "headers": {"X-Key": "${input:api-key}"}}}}"#,
            ),
        ],
        "/home/u/proj",
    );
    let env = |var: &str| match var {
        "TOKEN" => Some("t0k".to_string()),
        "API_KEY" => Some("k3y".to_string()),
        "PY" => Some(String::new()),
        _ => None,
    };
    let config =
        Config::from_toml_str(&text, "imported.toml", &env).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["my-files", "api", "my-files-2", "sse", "vs"], "{text}");
    let TransportConfig::Stdio { args, .. } = &config.servers[0].transport else {
        panic!()
    };
    assert_eq!(
        args,
        &["srv", "${NOT_EXPANDED}"],
        "Claude Desktop expands nothing"
    );
    let TransportConfig::Http {
        url, headers, mode, ..
    } = &config.servers[1].transport
    else {
        panic!()
    };
    assert_eq!(url, "http://127.0.0.1:9/mcp", "the default of an unset variable");
    assert_eq!(headers[0].1.expose(), "Bearer t0k");
    assert_eq!(*mode, HttpMode::StreamableHttp);
    let TransportConfig::Stdio { command, .. } = &config.servers[2].transport else {
        panic!()
    };
    assert_eq!(command, "python3", "the default of an empty variable");
    let TransportConfig::Http { mode, headers, .. } = &config.servers[3].transport else {
        panic!()
    };
    assert_eq!((*mode, headers[0].1.expose()), (HttpMode::LegacySse, "t0k"));
    let TransportConfig::Http { mode, headers, .. } = &config.servers[4].transport else {
        panic!()
    };
    assert_eq!((*mode, headers[0].1.expose()), (HttpMode::StreamableHttp, "k3y"));
}

#[test]
fn an_input_without_a_default_holds_back_only_the_server_that_uses_it() {
    let text = imported(
        &[(
            "/p/.vscode/mcp.json",
            r#"{"inputs": [{"type": "promptString", "id": "db-pass"}],
                "servers": {"db": {"type": "stdio", "command": "x", "env": {"PASS": "${input:db-pass}"}},
                            "files": {"type": "stdio", "command": "y"}}}"#,
        )],
        "/p",
    );
    let config = Config::from_toml_str(&text, "imported.toml", &|_| None).unwrap_or_else(|e| panic!("{e}"));
    let served: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(served, ["files"]);
    let waiting: Vec<(&str, Option<&str>)> = (config.disabled.iter())
        .map(|s| (s.name.as_str(), s.waiting.as_deref()))
        .collect();
    assert_eq!(
        waiting,
        [(
            "db",
            Some(
                "not started: it needs DB_PASS (needs_env), not set in mcpmux's environment; set it and \
                 restart mcpmux to serve it"
            )
        )]
    );
}

#[test]
fn a_server_that_needs_an_unset_variable_waits_and_the_rest_serve() {
    let text = "[servers.plain]\ncommand = \"sh\"\n\n[servers.keyed]\ncommand = \"sh\"\nneeds_env = [\"MCPMUX_TEST_INPUT_KEY\"]\n\
                env = { KEY = \"${MCPMUX_TEST_INPUT_KEY}\" }\n";
    let unset = |_: &str| None;
    let config = Config::from_toml_str(text, "t.toml", &unset).expect("the rest loads");
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["plain"]);
    assert_eq!(config.disabled.len(), 1);
    let keyed = &config.disabled[0];
    assert_eq!(keyed.name, "keyed");
    assert_eq!(
        keyed.waiting.as_deref(),
        Some(
            "not started: it needs MCPMUX_TEST_INPUT_KEY (needs_env), not set in mcpmux's environment; \
             set it and restart mcpmux to serve it"
        )
    );
    let found = config.preflight(Some("/usr/bin:/bin".into()), std::path::Path::new("/"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].severity, crate::config::Severity::Warning);
    assert_eq!(found[0].key.as_deref(), Some("servers.keyed.needs_env"));
    // Set, it is served.
    let set = |var: &str| (var == "MCPMUX_TEST_INPUT_KEY").then(|| "k".to_string());
    let config = Config::from_toml_str(text, "t.toml", &set).expect("loads");
    assert_eq!(config.servers.len(), 2);
    assert!(config.disabled.is_empty());
    // An unset variable it does not list, or a mistake of its own, is an error all the same.
    let other = text.replace("{ KEY = ", "{ OTHER = \"${MCPMUX_TEST_OTHER}\", KEY = ");
    let err = Config::from_toml_str(&other, "t.toml", &unset).expect_err("an error");
    assert_eq!(
        err.to_string(),
        "t.toml:7: servers.keyed.env.OTHER: environment variable \"MCPMUX_TEST_OTHER\" is not set"
    );
    let wrong = text.replace("command = \"sh\"\nneeds_env", "command = \"\"\nneeds_env");
    let err = Config::from_toml_str(&wrong, "t.toml", &unset).expect_err("an error");
    assert_eq!(
        err.to_string(),
        "t.toml:5: server \"keyed\": `command` must not be empty"
    );
    let bad = text.replace("[\"MCPMUX_TEST_INPUT_KEY\"]", "[\"not a name\"]");
    let err = Config::from_toml_str(&bad, "t.toml", &unset).expect_err("an error");
    assert!(
        err.to_string()
            .starts_with("t.toml:6: servers.keyed.needs_env: \"not a name\""),
        "{err}"
    );
}
