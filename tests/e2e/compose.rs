//! Composing a configuration from files end to end: a TOML file that includes another and
//! takes servers from every client's JSON file (`mcp_json`, in Claude Desktop's, Claude Code's,
//! Cursor's and VS Code's formats, with their quirks), served by the real binary and called
//! through the Python SDK on the real server-everything and mcp-server-time; an edit of the
//! included file and of a client's file each reloads it; `mcpmux reload --url` and `--config`
//! reload it and report a broken edit, which leaves everything serving; `POST /reload` is only
//! on the operator address.

use crate::support::serve::ServeProcess;
use crate::support::{
    boot_gateway, free_port, path_str, peers, run_client, run_py_client_async, scratch_dir,
    start_everything_http, ClientRun,
};
use serde_json::json;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const RUN_TIMEOUT: Duration = Duration::from_secs(60);

fn write(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    }
    fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

fn mcpmux(dir: &Path, args: &[&str]) -> ClientRun {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpmux"));
    cmd.args(args).current_dir(dir);
    run_client(cmd, RUN_TIMEOUT)
}

/// Wait until the gateway's log has `n` lines with `needle`.
async fn wait_lines(gateway: &ServeProcess, needle: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while gateway.log().lines().filter(|l| l.contains(needle)).count() < n {
        assert!(
            Instant::now() < deadline,
            "fewer than {n} lines with {needle:?}; log:\n{}",
            gateway.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const RELOADED: &str = "configuration reloaded";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_include_and_clients_files_are_served_and_each_edit_reloads() {
    let _suite = crate::suite::enter(module_path!());
    let p = peers();
    let dir = scratch_dir("compose");
    let http_port = free_port();
    let _everything_http = start_everything_http(http_port);
    let everything = path_str(&p.everything_js);
    let (python, time_args) = &p.time_cmd;

    // The included file, in a folder of its own: mcp-server-time.
    let team = dir.join("team").join("team.toml");
    let time_table = format!(
        "[servers.time]\ncommand = {:?}\nargs = {}\n",
        path_str(python),
        crate::support::toml_list(time_args)
    );
    write(&team, &format!("# the team's servers\n{time_table}"));
    // Claude Desktop: stdio, no variable expansion.
    write(
        &dir.join("claude_desktop_config.json"),
        &json!({"mcpServers": {"everything": {"command": "node", "args": [everything, "stdio"],
                                              "env": {"GREETING": "cost $5"}}}})
        .to_string(),
    );
    // Claude Code: `type: "http"`, `${VAR:-default}`, and a name the TOML also has (the TOML wins).
    let claude_code = dir.join("proj").join(".mcp.json");
    let claude_code_text = |token: &str| {
        json!({"mcpServers": {
            "remote": {"type": "http", "url": format!("http://127.0.0.1:${{MCPMUX_COMPOSE_PORT:-{http_port}}}/mcp"),
                       "headers": {"X-Token": format!("${{MCPMUX_COMPOSE_TOKEN:-{token}}}")}},
            "time": {"command": "no-such-time-server"}
        }})
        .to_string()
    };
    write(&claude_code, &claude_code_text("one"));
    // Cursor (JSONC): a `url` without `type`, `${env:NAME}`.
    write(
        &dir.join("proj").join(".cursor").join("mcp.json"),
        &format!(
            "{{\n  // ours\n  \"mcpServers\": {{\"cursor-remote\": {{\"url\": \"http://127.0.0.1:{http_port}/mcp\", \
             \"headers\": {{\"X-Token\": \"${{env:COMPOSE_TOKEN}}\"}}}}}}\n}}\n"
        ),
    );
    // VS Code: `servers`, "streamable-http", an input.
    write(
        &dir.join("proj").join(".vscode").join("mcp.json"),
        &json!({"inputs": [{"type": "promptString", "id": "secret-word", "password": true}],
                "servers": {"vs": {"type": "streamable-http", "url": format!("http://127.0.0.1:{http_port}/mcp"),
                                   "headers": {"X-Key": "${input:secret-word}"}}}})
        .to_string(),
    );
    let port = free_port();
    let text = format!(
        "include = [\"team/team.toml\"]\n\
         mcp_json = [\"claude_desktop_config.json\", \"proj/.mcp.json\", \"proj/.cursor/mcp.json\",\n\
         \"proj/.vscode/mcp.json\", \"not/there/mcp.json\"]\n\
         [gateway]\nlisten = \"127.0.0.1:{port}\"\n"
    );
    let env = [("SECRET_WORD", "swordfish"), ("COMPOSE_TOKEN", "t0k")];
    let other_dir = scratch_dir("compose-cwd");
    let mut gateway = ServeProcess::start_text(port, &dir, &text, &other_dir, &env);
    let wanted = [
        "time__get_current_time",
        "everything__get-env",
        "remote__echo",
        "cursor-remote__echo",
        "vs__echo",
    ];
    gateway.wait_tools(&wanted).await;
    let log = gateway.log();
    assert!(
        log.contains("[servers.time] of the TOML configuration is used instead"),
        "the clash is named:\n{log}"
    );
    assert!(log.contains("not/there/mcp.json: no such file"), "{log}");
    let echo = json!({"message": "composed"}).to_string();
    let args = [
        "call",
        "time__get_current_time",
        r#"{"timezone": "UTC"}"#,
        "everything__get-env",
        "{}",
        "remote__echo",
        &echo,
        "cursor-remote__echo",
        &echo,
        "vs__echo",
        &echo,
    ];
    let run = run_py_client_async(&gateway.url(), args[0], &args[1..]).await;
    run.assert_ok();
    assert!(run.call_text("time__get_current_time").contains("UTC"), "{run}");
    assert!(run.call_text("everything__get-env").contains("cost $5"), "{run}");
    assert!(run.call_text("vs__echo").contains("composed"), "{run}");

    // An edit of the included file reloads; so does one of a client's file.
    write(&team, &format!("# the team's servers, edited\n{time_table}"));
    wait_lines(&gateway, RELOADED, 1).await;
    write(&claude_code, &claude_code_text("two"));
    wait_lines(&gateway, RELOADED, 2).await;

    // Asked for: by URL (a bare operator address) and by the file the gateway serves.
    let run = mcpmux(&dir, &["reload", "--url", &format!("http://127.0.0.1:{port}")]);
    assert!(run.exited_ok() && run.stdout.contains(RELOADED), "{run}");
    let run = mcpmux(&other_dir, &["reload", "--config", &path_str(&gateway.config)]);
    assert!(run.exited_ok() && run.stdout.contains(RELOADED), "{run}");
    wait_lines(&gateway, RELOADED, 4).await;

    // A broken edit of the included file: refused with its file and line, nothing changes.
    write(&team, &format!("{time_table}bogus = 1\n"));
    let run = mcpmux(&dir, &["reload", "--config", "mcpmux.toml"]);
    assert_eq!(run.status.code(), Some(1), "{run}");
    let at = format!("{}:4:1: unknown key `bogus`", path_str(&team));
    assert!(
        run.stderr.contains("reload refused") && run.stderr.contains(&at),
        "{run}"
    );
    wait_lines(&gateway, "reload refused", 1).await;
    let run = run_py_client_async(
        &gateway.url(),
        "call",
        &["time__get_current_time", r#"{"timezone": "UTC"}"#],
    )
    .await;
    run.assert_ok();
    let run = mcpmux(
        &dir,
        &[
            "reload",
            "--url",
            &format!("http://127.0.0.1:{}/reload", free_port()),
        ],
    );
    assert_eq!(run.status.code(), Some(2), "nothing there: {run}");
}

async fn post(url: &str) -> (u16, serde_json::Value) {
    let resp = reqwest::Client::new().post(url).send().await.expect("an answer");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or_default())
}

#[tokio::test]
async fn reload_over_http_is_only_on_the_operator_address() {
    let _suite = crate::suite::enter(module_path!());
    // [auth] on and no admin_listen: the main listener is a public face; not there.
    let gateway = boot_gateway("[[auth.api_keys]]\nname = \"ci\"\nkey = \"k\"\n", "").await;
    let (status, body) = post(&format!("http://{}/reload", gateway.local_addr())).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"].as_str().unwrap_or("").contains("admin_listen"),
        "{body}"
    );
    gateway.stop().await;

    // On admin_listen: answered by whoever reloads, with what it did or why it refused.
    let mut gateway = boot_gateway(
        "[[auth.api_keys]]\nname = \"ci\"\nkey = \"k\"\n",
        "admin_listen = \"127.0.0.1:0\"",
    )
    .await;
    let mut requests = gateway.take_reload_requests().expect("the reload requests");
    tokio::spawn(async move {
        let mut answers = [Err("servers.x: bad".to_string()), Ok("reloaded".to_string())].into_iter();
        while let Some(request) = requests.recv().await {
            let _ = request.answer.send(answers.next().unwrap_or(Ok(String::new())));
        }
    });
    let admin = gateway.admin_addr().expect("the admin address");
    let (status, body) = post(&format!("http://{admin}/reload")).await;
    assert_eq!(
        (status, &body),
        (422, &json!({"reloaded": false, "error": "servers.x: bad"}))
    );
    let (status, body) = post(&format!("http://{admin}/reload")).await;
    assert_eq!(
        (status, &body),
        (200, &json!({"reloaded": true, "message": "reloaded"}))
    );
    let (status, _) = post(&format!("http://{}/reload", gateway.local_addr())).await;
    assert_ne!(status, 200, "not on the main listener");
    gateway.stop().await;
}
