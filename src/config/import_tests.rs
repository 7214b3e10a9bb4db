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
    let TransportConfig::Http { url, headers, mode } = &config.servers[1].transport else {
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
fn a_missing_input_variable_is_named_when_the_file_loads() {
    let text = imported(
        &[(
            "/p/.vscode/mcp.json",
            r#"{"inputs": [{"type": "promptString", "id": "db-pass"}],
                "servers": {"db": {"type": "stdio", "command": "x", "env": {"PASS": "${input:db-pass}"}}}}"#,
        )],
        "/p",
    );
    let err = Config::from_toml_str(&text, "imported.toml", &|_| None).unwrap_err();
    assert!(
        matches!(&err, ConfigError::MissingEnv { var, .. } if var == "DB_PASS"),
        "{err}"
    );
}
