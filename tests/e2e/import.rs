//! `mcpmux import` end to end: real JSON files in each client's format, with their quirks (VS
//! Code `inputs` and `"streamable-http"`, Claude Code `${VAR:-default}` and `~/.claude.json`
//! project entries, Cursor `${env:…}` and JSONC), converted by the real binary, checked with
//! `check-config`, served, and called through the Python SDK on the real server-everything and
//! mcp-server-time; and the command's exit statuses.

use crate::support::serve::ServeProcess;
use crate::support::{
    free_port, path_str, peers, run_client, run_py_client_async, scratch_dir, start_everything_http,
    start_everything_sse, ClientRun,
};
use serde_json::{json, Value};
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const RUN_TIMEOUT: Duration = Duration::from_secs(20);

fn import(dir: &Path, args: &[&str]) -> ClientRun {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpmux"));
    cmd.arg("import").args(args).current_dir(dir);
    run_client(cmd, RUN_TIMEOUT)
}

fn write(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    }
    fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_clients_file_is_converted_served_and_called() {
    let _suite = crate::suite::enter(module_path!());
    let p = peers();
    let dir = scratch_dir("import");
    let (http_port, sse_port) = (free_port(), free_port());
    let _everything_http = start_everything_http(http_port);
    let _everything_sse = start_everything_sse(sse_port);
    let everything = path_str(&p.everything_js);
    let (python, time_args) = &p.time_cmd;
    let python = path_str(python);

    // Claude Desktop: stdio, a name that is not a valid server name, no variable expansion.
    let desktop = dir.join("claude_desktop_config.json");
    let text = json!({
        "globalShortcut": "Ctrl+Space",
        "mcpServers": {"desktop everything": {
            "command": "node", "args": [everything, "stdio"], "env": {"GREETING": "cost $5"}}}
    });
    write(&desktop, &text.to_string());
    // Claude Code .mcp.json: `type` stdio and http, `${VAR:-default}` (the variables are unset).
    let project = dir.join("proj");
    let mcp_json = project.join(".mcp.json");
    let mut args: Vec<Value> = time_args.iter().map(|a| json!(a)).collect();
    let last = args.len() - 1;
    args[last] = json!("${MCPMUX_IMPORT_TZ:-UTC}");
    let text = json!({"mcpServers": {
        "time": {"type": "stdio", "command": format!("${{MCPMUX_IMPORT_PY:-{python}}}"), "args": args},
        "remote": {"type": "http", "url": format!("http://127.0.0.1:${{MCPMUX_IMPORT_PORT:-{http_port}}}/mcp"),
                   "headers": {"X-Token": "${MCPMUX_IMPORT_TOKEN:-none}"}}
    }});
    write(&mcp_json, &text.to_string());
    // Claude Code ~/.claude.json: a project entry (legacy SSE), named after its project folder.
    let claude_json = dir.join("home").join(".claude.json");
    let api = dir.join("api");
    fs::create_dir_all(&api).expect("project folder");
    let text = json!({"numStartups": 7, "mcpServers": {}, "projects": {
        path_str(&api): {"allowedTools": [], "mcpServers": {
            "events": {"type": "sse", "url": format!("http://127.0.0.1:{sse_port}/sse")}}}
    }});
    write(&claude_json, &text.to_string());
    // Cursor (JSONC): a `url` server without `type`, `${env:NAME}`, a name Claude Code also uses.
    let cursor = project.join(".cursor").join("mcp.json");
    let text = format!(
        "{{\n  // the team's server\n  \"mcpServers\": {{\n    \"remote\": {{\"url\": \"http://127.0.0.1:{http_port}/mcp\", \
         \"headers\": {{\"X-Token\": \"${{env:IMPORT_TOKEN}}\"}}, \"alwaysAllow\": [\"echo\"]}},\n  }}\n}}\n"
    );
    write(&cursor, &text);
    // VS Code: `servers`, an input as an env value, `${workspaceFolder}`, "streamable-http".
    let vscode = project.join(".vscode").join("mcp.json");
    let text = json!({
        "inputs": [{"type": "promptString", "id": "secret-word", "description": "The word", "password": true}],
        "servers": {
            "vs-everything": {"type": "stdio", "command": "node", "args": [everything, "stdio"],
                              "cwd": "${workspaceFolder}", "env": {"SECRET_WORD": "${input:secret-word}"}},
            "streamed": {"type": "streamable-http", "url": format!("http://127.0.0.1:{http_port}/mcp")}
        }
    });
    write(&vscode, &text.to_string());

    let files = [&desktop, &mcp_json, &claude_json, &cursor, &vscode].map(|f| path_str(f));
    let mut args: Vec<&str> = files.iter().map(String::as_str).collect();
    args.extend(["--out", "imported.toml"]);
    let run = import(&dir, &args);
    assert!(run.exited_ok(), "{run}");
    let imported = fs::read_to_string(dir.join("imported.toml")).expect("the output");
    for expected in [
        "[servers.desktop-everything]",
        "[servers.time]",
        "[servers.api-events]",
        "[servers.remote-2]",
        "transport = \"sse\"",
        "transport = \"streamable-http\"",
        "# ${SECRET_WORD} is VS Code input \"secret-word\" (promptString \"The word\", a secret)",
        "GREETING = \"cost $$5\"",
        "# not carried: \"alwaysAllow\"",
    ] {
        assert!(imported.contains(expected), "no {expected:?} in:\n{imported}");
    }
    assert!(run.stderr.contains("named remote-2: remote is taken"), "{run}");
    assert!(
        run.stderr.contains("imported 7 server(s) from 5 file(s)"),
        "{run}"
    );

    // The output loads as it is.
    let env = [("SECRET_WORD", "swordfish"), ("IMPORT_TOKEN", "t0k")];
    let mut check = Command::new(env!("CARGO_BIN_EXE_mcpmux"));
    check
        .args(["check-config", "--config", "imported.toml"])
        .current_dir(&dir)
        .envs(env);
    let run = run_client(check, RUN_TIMEOUT);
    assert!(
        run.exited_ok() && run.stdout.contains("7 server(s)"),
        "{run}\n{imported}"
    );

    // Served (behind a [gateway] table for a free port) and called through a real client.
    let mut gateway = ServeProcess::start(&dir, "", &imported, &dir, &env);
    let wanted = [
        "desktop-everything__get-env",
        "time__get_current_time",
        "remote__echo",
        "remote-2__echo",
        "api-events__echo",
        "vs-everything__get-env",
        "streamed__echo",
    ];
    gateway.wait_tools(&wanted).await;
    let echo = json!({"message": "imported"}).to_string();
    let mut args = vec!["call", "time__get_current_time", r#"{"timezone": "UTC"}"#];
    for tool in [
        "remote__echo",
        "remote-2__echo",
        "api-events__echo",
        "streamed__echo",
    ] {
        args.extend([tool, echo.as_str()]);
    }
    args.extend([
        "desktop-everything__get-env",
        "{}",
        "vs-everything__get-env",
        "{}",
    ]);
    let run = run_py_client_async(&gateway.url(), args[0], &args[1..]).await;
    run.assert_ok();
    assert!(run.call_text("time__get_current_time").contains("UTC"), "{run}");
    assert!(run.call_text("api-events__echo").contains("imported"), "{run}");
    assert!(
        run.call_text("desktop-everything__get-env").contains("cost $5"),
        "{run}"
    );
    assert!(
        run.call_text("vs-everything__get-env").contains("swordfish"),
        "{run}"
    );
}

#[test]
fn import_exit_statuses_and_an_existing_output() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("import-exit");
    write(
        &dir.join(".mcp.json"),
        r#"{"mcpServers": {"a": {"command": "x"}}}"#,
    );
    write(
        &dir.join("broken.json"),
        "{\n  \"mcpServers\": {\n    \"a\": {\"command\": x}\n}}\n",
    );

    let run = import(&dir, &[".mcp.json"]);
    assert!(run.exited_ok() && run.stdout.contains("[servers.a]"), "{run}");
    let run = import(&dir, &["broken.json", ".mcp.json"]);
    assert_eq!(run.status.code(), Some(1), "{run}");
    assert!(run.stderr.contains("broken.json:3:"), "the file and line: {run}");
    assert!(run.stdout.is_empty(), "nothing written: {run}");
    let run = import(&dir, &["missing.json", "broken.json"]);
    assert_eq!(run.status.code(), Some(2), "{run}");
    assert!(run.stderr.contains("cannot read missing.json"), "{run}");

    let run = import(&dir, &[".mcp.json", "--out", "out.toml"]);
    assert!(run.exited_ok(), "{run}");
    write(
        &dir.join(".mcp.json"),
        r#"{"mcpServers": {"b": {"command": "y"}}}"#,
    );
    let run = import(&dir, &[".mcp.json", "--out", "out.toml"]);
    assert_eq!(run.status.code(), Some(2), "{run}");
    assert!(run.stderr.contains("--force"), "{run}");
    let kept = fs::read_to_string(dir.join("out.toml")).expect("out.toml");
    assert!(kept.contains("[servers.a]"), "not overwritten: {kept}");
    let run = import(&dir, &[".mcp.json", "--out", "out.toml", "--force"]);
    assert!(run.exited_ok(), "{run}");
    let replaced = fs::read_to_string(dir.join("out.toml")).expect("out.toml");
    assert!(
        replaced.contains("[servers.b]") && !replaced.contains("[servers.a]"),
        "{replaced}"
    );
}
