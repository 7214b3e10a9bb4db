//! Each client's format with its quirks, read and written as TOML.

use super::*;
use std::path::Path;

const HOME: &str = "/home/u";

fn parse_at(path: &str, text: &str) -> SourceFile {
    parse_in(Path::new(path), text, Some(HOME)).unwrap_or_else(|e| panic!("{e}"))
}

fn only(file: &SourceFile) -> &ImportedServer {
    assert_eq!(file.servers.len(), 1, "{:?}", file.servers);
    &file.servers[0]
}

type Pairs = [(String, String)];

fn stdio(server: &ImportedServer) -> (&str, &[String], &Pairs, Option<&str>) {
    match &server.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
            ..
        } => (command, args, env, cwd.as_deref()),
        other => panic!("not stdio: {other:?}"),
    }
}

fn http(server: &ImportedServer) -> (&str, &[(String, String)], HttpMode) {
    match &server.transport {
        Transport::Http { url, headers, mode } => (url, headers, *mode),
        other => panic!("not http: {other:?}"),
    }
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Rendered TOML of `files` (shown paths are their own), checked to be TOML.
fn toml_of(files: &[(&str, &SourceFile)], out_dir: &str) -> Rendered {
    let sources: Vec<(String, SourceFile)> = (files.iter())
        .map(|(p, f)| (p.to_string(), (*f).clone()))
        .collect();
    let rendered = render(&sources, out_dir, &mut Namer::default());
    if let Err(e) = toml::from_str::<toml::Table>(&rendered.text) {
        panic!("not TOML: {e}\n{}", rendered.text);
    }
    rendered
}

#[test]
fn claude_desktop_servers_and_literal_dollars() {
    let file = parse_at(
        "/home/u/.config/Claude/claude_desktop_config.json",
        r#"{"globalShortcut": "x", "mcpServers": {"fs": {
            "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "$HOME/${DIR}"],
            "env": {"PORT": 8080, "KEY": "a$b"}}}}"#,
    );
    assert_eq!(file.format, Format::ClaudeDesktop);
    assert!(
        file.notes.is_empty(),
        "a Desktop file's other settings are not servers: {:?}",
        file.notes
    );
    let server = only(&file);
    let (command, args, env, cwd) = stdio(server);
    assert_eq!(command, "npx");
    assert_eq!(args[2], "$$HOME/$${DIR}");
    assert_eq!(env, pairs(&[("PORT", "8080"), ("KEY", "a$$b")]));
    assert_eq!(cwd, None);
    assert!(
        server.notes.iter().any(|n| n.contains("env.PORT")),
        "{:?}",
        server.notes
    );
}

#[test]
fn claude_code_types_and_default_syntax() {
    let file = parse_at(
        "/home/u/proj/.mcp.json",
        r#"{"mcpServers": {
            "api": {"type": "http", "url": "${API_URL:-https://api.example.com/mcp}",
                    "headers": {"Authorization": "Bearer ${API_KEY}"}},
            "events": {"type": "sse", "url": "https://e.example.com/sse"},
            "local": {"type": "stdio", "command": "${PY:-python3}", "args": ["-m", "srv"],
                      "env": {"LEVEL": "${LEVEL:-info}"}}}}"#,
    );
    assert_eq!(file.format, Format::ClaudeCode);
    let (url, headers, mode) = http(&file.servers[0]);
    assert_eq!(url, "${API_URL:-https://api.example.com/mcp}");
    assert_eq!(headers, pairs(&[("Authorization", "Bearer ${API_KEY}")]));
    assert_eq!(mode, HttpMode::StreamableHttp);
    assert_eq!(http(&file.servers[1]).2, HttpMode::Sse);
    let (command, _, env, cwd) = stdio(&file.servers[2]);
    assert_eq!(command, "${PY:-python3}");
    assert_eq!(env, pairs(&[("LEVEL", "${LEVEL:-info}")]));
    assert_eq!(cwd, Some("/home/u/proj"), "Claude Code runs it in the project");
    let toml = toml_of(&[("/home/u/proj/.mcp.json", &file)], "/home/u/proj").text;
    assert!(toml.contains("transport = \"streamable-http\""), "{toml}");
    assert!(toml.contains("transport = \"sse\""), "{toml}");
    assert!(
        !toml.contains("cwd ="),
        "the output's own folder is the default cwd:\n{toml}"
    );
    let elsewhere = toml_of(&[("/home/u/proj/.mcp.json", &file)], "/etc/mcpmux").text;
    assert!(elsewhere.contains("cwd = \"/home/u/proj\""), "{elsewhere}");
}

#[test]
fn claude_code_user_file_names_project_entries_after_their_folder() {
    let file = parse_at(
        "/home/u/.claude.json",
        r#"{"numStartups": 3, "mcpServers": {"github": {"type": "http", "url": "https://gh.example.com/mcp"}},
            "projects": {
              "/home/u/src/api": {"allowedTools": [], "mcpServers": {
                  "db": {"type": "stdio", "command": "node", "args": ["db.js"]},
                  "github": {"type": "http", "url": "https://other.example.com/mcp"}}},
              "/home/u/src/web": {"mcpServers": {}}}}"#,
    );
    assert_eq!(file.format, Format::ClaudeCodeUser);
    assert!(file.notes.is_empty(), "{:?}", file.notes);
    let names: Vec<&str> = file.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["github", "api-db", "api-github"]);
    assert_eq!(file.servers[1].project.as_deref(), Some("/home/u/src/api"));
    assert_eq!(stdio(&file.servers[1]).3, Some("/home/u/src/api"));
    assert!(
        file.servers[1].notes[0].contains("/home/u/src/api"),
        "{:?}",
        file.servers[1].notes
    );
    let toml = toml_of(&[("/home/u/.claude.json", &file)], "/home/u").text;
    assert!(
        toml.contains("[servers.api-db]") && toml.contains("cwd = \"/home/u/src/api\""),
        "{toml}"
    );
}

#[test]
fn cursor_url_servers_and_env_variables() {
    let file = parse_at(
        "/home/u/proj/.cursor/mcp.json",
        r#"{
          // Cursor reads comments
          "mcpServers": {
            "remote": {"url": "https://r.example.com/mcp", "headers": {"X-Key": "${env:R_KEY}"},},
            "tool": {"command": "node", "args": ["${workspaceFolder}/tool.js"], "envFile": ".env",
                     "env": {"CACHE": "${userHome}/.cache"}},
          }
        }"#,
    );
    assert_eq!(file.format, Format::Cursor);
    let (url, headers, mode) = http(&file.servers[0]);
    assert_eq!(url, "https://r.example.com/mcp");
    assert_eq!(headers, pairs(&[("X-Key", "${R_KEY}")]));
    assert_eq!(mode, HttpMode::Auto, "no type: mcpmux detects, as Cursor does");
    let (_, args, env, cwd) = stdio(&file.servers[1]);
    assert_eq!(args, ["/home/u/proj/tool.js"]);
    assert_eq!(env, pairs(&[("CACHE", "${HOME}/.cache")]));
    assert_eq!(cwd, Some("/home/u/proj"));
    let Transport::Stdio { env_file, .. } = &file.servers[1].transport else {
        unreachable!()
    };
    assert_eq!(env_file.as_deref(), Some("/home/u/proj/.env"));
    let global = parse_at(
        "/home/u/.cursor/mcp.json",
        r#"{"mcpServers": {"t": {"command": "x"}}}"#,
    );
    assert_eq!(
        stdio(only(&global)).3,
        None,
        "the user's ~/.cursor has no workspace"
    );
}

#[test]
fn vs_code_inputs_types_and_env_file() {
    let file = parse_at(
        "/home/u/proj/.vscode/mcp.json",
        r#"{
          "inputs": [
            {"type": "promptString", "id": "api-key", "description": "API key", "password": true},
            {"type": "pickString", "id": "region", "options": ["eu", "us"], "default": "eu"}
          ],
          "servers": {
            "everything": {"type": "stdio", "command": "npx", "args": ["-y", "srv"],
                           "env": {"API_KEY": "${input:api-key}", "REGION": "${input:region}"},
                           "envFile": "${workspaceFolder}/.env", "dev": {"watch": "src/**/*.ts"}},
            "remote": {"type": "http", "url": "https://r.example.com/mcp",
                       "headers": {"Authorization": "Bearer ${input:api-key}"}},
            "streaming": {"type": "streamable-http", "url": "https://s.example.com/mcp"},
            "legacy": {"type": "sse", "url": "https://l.example.com/sse"}
          }
        }"#,
    );
    assert_eq!(file.format, Format::VsCode);
    let everything = &file.servers[0];
    let (_, _, env, cwd) = stdio(everything);
    assert_eq!(
        env,
        pairs(&[("API_KEY", "${API_KEY}"), ("REGION", "${REGION:-eu}")])
    );
    assert_eq!(cwd, Some("/home/u/proj"));
    let input_note = (everything.notes.iter())
        .find(|n| n.contains("\"api-key\""))
        .expect("a note naming the input");
    assert!(
        input_note.contains("promptString \"API key\"") && input_note.contains("set API_KEY"),
        "{input_note}"
    );
    assert!(
        everything.dropped.iter().any(|d| d.contains("\"dev\"")),
        "{:?}",
        everything.dropped
    );
    let Transport::Stdio { env_file, .. } = &everything.transport else {
        unreachable!()
    };
    assert_eq!(env_file.as_deref(), Some("/home/u/proj/.env"));
    assert_eq!(
        http(&file.servers[1]).1,
        pairs(&[("Authorization", "Bearer ${API_KEY}")])
    );
    assert_eq!(http(&file.servers[1]).2, HttpMode::StreamableHttp);
    assert_eq!(
        http(&file.servers[2]).2,
        HttpMode::StreamableHttp,
        "streamable-http is http"
    );
    assert_eq!(http(&file.servers[3]).2, HttpMode::Sse);
    let toml = toml_of(&[("/home/u/proj/.vscode/mcp.json", &file)], "/home/u/proj").text;
    assert!(
        toml.contains("# ${API_KEY} is VS Code input \"api-key\""),
        "{toml}"
    );
    // An input without a default holds back only the servers that use it (`needs_env`); one
    // with a default holds back nothing.
    assert_eq!(everything.needs_env, ["API_KEY"]);
    assert_eq!(file.servers[1].needs_env, ["API_KEY"]);
    assert!(file.servers[2].needs_env.is_empty());
    assert!(
        toml.contains(
            "[servers.everything]\ncommand = \"npx\"\nargs = [\"-y\", \"srv\"]\nneeds_env = [\"API_KEY\"]\n"
        ),
        "{toml}"
    );
    assert!(
        toml.contains("[servers.remote]\nurl = \"https://r.example.com/mcp\"\ntransport = \"streamable-http\"\nneeds_env = [\"API_KEY\"]\n"),
        "{toml}"
    );
    assert_eq!(toml.matches("needs_env = [").count(), 2, "{toml}");
}

#[test]
fn an_mcp_servers_file_in_a_vscode_folder_is_vs_codes() {
    let file = parse_at(
        "/home/u/proj/.vscode/mcp.json",
        r#"{"mcpServers": {"t": {"command": "x", "env": {"K": "${input:k}"}}}}"#,
    );
    assert_eq!(file.format, Format::VsCode);
    assert_eq!(stdio(only(&file)).2, pairs(&[("K", "${K}")]));
}

#[test]
fn vs_code_settings_json_holds_servers_under_mcp() {
    let file = parse_at(
        "/home/u/.config/Code/User/settings.json",
        r#"{"editor.fontSize": 14, "mcp": {"servers": {"t": {"type": "stdio", "command": "x"}}}}"#,
    );
    assert_eq!(file.format, Format::VsCode);
    assert!(
        file.notes.is_empty(),
        "the rest of settings.json is not about servers"
    );
    assert_eq!(stdio(only(&file)).0, "x");
}

#[test]
fn an_unknown_field_becomes_a_comment_and_a_warning() {
    let file = parse_at(
        "/tmp/x/.mcp.json",
        r#"{"extra": 1, "mcpServers": {"s": {"command": "x", "alwaysAllow": ["a"], "shiny": {"k": 1}}}}"#,
    );
    let server = only(&file);
    assert!(server
        .dropped
        .iter()
        .any(|d| d.contains("\"alwaysAllow\"") && d.contains("[[policy]]")));
    assert!(server
        .dropped
        .iter()
        .any(|d| d.contains("\"shiny\": {\"k\":1}") && d.contains("no such setting")));
    let toml = toml_of(&[("/tmp/x/.mcp.json", &file)], "/tmp/x");
    assert!(
        toml.text.contains("# not carried: \"shiny\": {\"k\":1}"),
        "{}",
        toml.text
    );
    assert!(
        toml.text.contains("# not carried: top-level \"extra\": 1"),
        "{}",
        toml.text
    );
    let warnings = toml.warnings.join("\n");
    assert!(
        warnings.contains("shiny") && warnings.contains("extra"),
        "{warnings}"
    );
}

#[test]
fn odd_entries_are_commented_not_lost() {
    let file = parse_at(
        "/tmp/x/.mcp.json",
        r#"{"mcpServers": {
            "off": {"command": "x", "disabled": true},
            "ws": {"type": "ws", "url": "ws://h/x"},
            "nothing": {"env": {}},
            "bad url": {"url": "localhost:3000/mcp"},
            "str": "npx srv"}}"#,
    );
    assert!(file.servers[0].disabled);
    for server in &file.servers[1..] {
        assert!(
            matches!(server.transport, Transport::Unsupported(_)),
            "{server:?}"
        );
    }
    let toml = toml_of(&[("/tmp/x/.mcp.json", &file)], "/tmp/x");
    assert_eq!(toml.servers, 0);
    assert!(
        toml.text.contains("# [servers.off]\n# command = \"x\""),
        "{}",
        toml.text
    );
    assert!(toml.text.contains("# not converted: WebSocket"), "{}", toml.text);
    assert!(
        toml.text.contains("\"bad url\" is not a valid server name"),
        "{}",
        toml.text
    );
    assert_eq!(toml.warnings.len(), 5, "{:?}", toml.warnings);
}

#[test]
fn names_are_made_valid_and_collisions_reported() {
    let a = parse_at(
        "/tmp/a/servers.json",
        r#"{"mcpServers": {"my server": {"command": "x"}, "same": {"command": "y"}}}"#,
    );
    let b = parse_at(
        "/tmp/a/claude_desktop_config.json",
        r#"{"mcpServers": {"my-server": {"command": "z"}, "same": {"command": "y"}}}"#,
    );
    assert_eq!(a.servers[0].name, "my-server");
    let toml = toml_of(&[("a", &a), ("b", &b)], "/tmp/a");
    assert!(
        toml.text.contains("[servers.my-server]") && toml.text.contains("[servers.my-server-2]"),
        "{}",
        toml.text
    );
    assert_eq!(
        toml.servers, 3,
        "the identical `same` is written once:\n{}",
        toml.text
    );
    let warnings = toml.warnings.join("\n");
    assert!(
        warnings.contains("named my-server-2: my-server is taken (by a, \"my server\")"),
        "{warnings}"
    );
    assert!(warnings.contains("kept once"), "{warnings}");
}

#[test]
fn parse_errors_name_the_line_and_column() {
    let err = parse_in(
        Path::new("/tmp/c.json"),
        "{\n  \"mcpServers\": {\n    \"a\": {\"command\": x}\n  }\n}",
        None,
    )
    .unwrap_err();
    assert_eq!(err.at.map(|(line, _)| line), Some(3), "{err}");
    assert!(err.to_string().starts_with("/tmp/c.json:3:"), "{err}");
    assert!(!err.message.contains(" at line "), "said once: {err}");
    let err = parse_in(Path::new("/tmp/c.json"), r#"{"other": {}}"#, None).unwrap_err();
    assert!(err.message.contains("mcpServers"), "{err}");
    let err = parse_in(Path::new("/tmp/c.json"), r#"{"mcpServers": []}"#, None).unwrap_err();
    assert!(err.message.contains("not an object"), "{err}");
}

#[test]
fn an_mcp_servers_file_of_no_known_name_is_told_by_its_variables() {
    let cursor_like = parse_at(
        "/tmp/servers.json",
        r#"{"mcpServers": {"a": {"url": "https://h/${env:P}"}}}"#,
    );
    assert_eq!(cursor_like.format, Format::Cursor);
    assert_eq!(http(only(&cursor_like)).0, "https://h/${P}");
    let plain = parse_at("/tmp/servers.json", r#"{"mcpServers": {"a": {"command": "x"}}}"#);
    assert_eq!(plain.format, Format::ClaudeCode);
    assert!(
        plain.notes[0].contains("read as a Claude Code"),
        "{:?}",
        plain.notes
    );
}
