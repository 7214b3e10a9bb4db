//! What the README tells a new user works as written: `config.example.toml` runs as-is from any
//! working directory (the real binary started from elsewhere serves all four real servers;
//! relative paths follow the file, and the filesystem server's tools reach only the folder made
//! for them), and the README's Python snippets run as scripts with the SDK it pins (the second
//! one sending an API key to a gateway that requires one).

use crate::support::mcp::RawSession;
use crate::support::{free_port, repo_root, ChildGuard};
use serde_json::{json, Value};
use std::fs;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The first start downloads three npm packages and installs one PyPI package.
const READY_TIMEOUT: Duration = Duration::from_secs(300);

async fn status(base: &str) -> Option<Value> {
    let text = reqwest::get(format!("{base}/status"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    serde_json::from_str(&text).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_config_runs_from_any_directory() {
    let _suite = crate::suite::enter(module_path!());
    let root = repo_root();
    let example = fs::read_to_string(root.join("config.example.toml")).expect("read the example");
    let port = free_port();
    assert!(
        example.contains("listen = \"127.0.0.1:8080\""),
        "the example's listen line moved"
    );
    // A copy beside the original (relative paths resolve the same), on a free port.
    let copy = root.join(format!(".config.example.e2e-{}.toml", std::process::id()));
    let text = example.replace(
        "listen = \"127.0.0.1:8080\"",
        &format!("listen = \"127.0.0.1:{port}\""),
    );
    fs::write(&copy, text).expect("write the copy");
    let _remove = RemoveOnDrop(copy.clone());
    let elsewhere = std::env::temp_dir();
    let mut serve = Command::new(env!("CARGO_BIN_EXE_mcpmux"));
    serve
        .args(["serve", "--config"])
        .arg(&copy)
        .current_dir(&elsewhere)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let gateway = ChildGuard::spawn_group(&mut serve).expect("spawn mcpmux serve");
    let base = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let doc = status(&base).await;
        let phases: Vec<String> = (doc.iter())
            .flat_map(|d| d["upstreams"].as_array().cloned().unwrap_or_default())
            .map(|u| {
                format!(
                    "{}={}",
                    u["name"].as_str().unwrap_or("?"),
                    u["phase"].as_str().unwrap_or("?")
                )
            })
            .collect();
        if phases.len() == 4 && phases.iter().all(|p| p.ends_with("=ready")) {
            break;
        }
        if Instant::now() > deadline {
            panic!("the example's servers did not all become ready: {phases:?}\n{doc:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let host = RawSession::open(&format!("{base}/mcp"), json!({})).await;
    let allowed = host
        .tool_text("filesystem__list_allowed_directories", json!({}))
        .await;
    let files = root.join("examples/files");
    let files = fs::canonicalize(&files).unwrap_or(files);
    assert!(allowed.contains(&files.display().to_string()), "{allowed}");
    assert!(
        !allowed.lines().any(|l| l.trim() == root.display().to_string()),
        "{allowed}"
    );
    let outside = host
        .call(
            "tools/call",
            json!({"name": "filesystem__read_text_file",
                   "arguments": {"path": root.join(".git/HEAD").display().to_string()}}),
        )
        .await;
    assert!(
        outside["result"]["isError"] == true || outside.get("error").is_some(),
        "the clone's .git must be out of reach: {outside}"
    );
    let time = host
        .tool_text("time__get_current_time", json!({"timezone": "UTC"}))
        .await;
    assert!(time.contains("UTC"), "{time}");
    // Shaping: get-sum is exposed as everything__add, get-env is not there at all.
    let sum = host.tool_text("everything__add", json!({"a": 2, "b": 3})).await;
    assert!(sum.contains('5'), "{sum}");
    let env = host
        .call(
            "tools/call",
            json!({"name": "everything__get-env", "arguments": {}}),
        )
        .await;
    assert!(env.get("error").is_some(), "get-env must be unknown: {env}");
    // The profile serves the filesystem and time servers only.
    let files_host = RawSession::open(&format!("{base}/mcp/files"), json!({})).await;
    let (tools, _) = files_host.list_all("tools/list", "tools").await;
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(
        !names.is_empty()
            && names
                .iter()
                .all(|n| n.starts_with("filesystem__") || n.starts_with("time__")),
        "{names:?}"
    );
    // The agent profile: only the meta-tools, and every tool through them.
    let agent = RawSession::open(&format!("{base}/mcp/agent"), json!({})).await;
    let (tools, _) = agent.list_all("tools/list", "tools").await;
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "mcpmux__search_tools",
            "mcpmux__describe_tool",
            "mcpmux__call_tool"
        ]
    );
    let found = agent
        .call(
            "tools/call",
            json!({"name": "mcpmux__search_tools", "arguments": {"query": "what time is it in Tokyo"}}),
        )
        .await;
    let hits: Vec<&str> = (found["result"]["structuredContent"]["tools"]
        .as_array()
        .into_iter()
        .flatten())
    .take(3)
    .filter_map(|t| t["name"].as_str())
    .collect();
    assert!(hits.contains(&"time__get_current_time"), "{found}");
    let time = agent
        .tool_text(
            "mcpmux__call_tool",
            json!({"name": "time__get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}),
        )
        .await;
    assert!(time.contains("Asia/Tokyo"), "{time}");
    drop(gateway);
}

/// The copy of the example goes away however the test ends.
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Wait until every upstream of `gw` is ready (`/readyz` answers 200), so a snippet's first call
/// never meets the time server still starting on a loaded machine.
async fn wait_ready(gw: &mcpmux::Gateway) {
    let url = format!("http://{}/readyz", gw.local_addr());
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let ready = reqwest::get(&url).await.is_ok_and(|r| r.status().is_success());
        if ready {
            return;
        }
        assert!(Instant::now() < deadline, "{url} never answered 200");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The first fenced `lang` block after `entry` in the README, its list indentation (two spaces)
/// taken off, as a reader copies it.
fn readme_block(entry: &str, lang: &str) -> String {
    let readme = fs::read_to_string(repo_root().join("README.md")).expect("read the README");
    let block = (readme.split(entry).nth(1))
        .and_then(|rest| rest.split(&format!("```{lang}\n")).nth(1))
        .and_then(|rest| rest.split("\n  ```").next())
        .unwrap_or_else(|| panic!("no {lang} block after {entry:?} in the README"));
    block
        .lines()
        .map(|l| format!("{}\n", l.strip_prefix("  ").unwrap_or(l)))
        .collect()
}

/// The README's Python snippet, taken from the README itself, runs as a script against a
/// gateway in front of the real time server (the SDK version it pins is the peers').
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_python_snippet_runs() {
    let _suite = crate::suite::enter(module_path!());
    let peers = crate::support::peers();
    let script = readme_block("- **Python SDK**", "python");
    let pinned = script
        .lines()
        .next()
        .and_then(|first| first.split("\"mcp==").nth(1))
        .and_then(|rest| rest.split('"').next())
        .expect("the snippet pins mcp");
    let installed = Command::new(&peers.python)
        .args(["-c", "import importlib.metadata as m; print(m.version('mcp'))"])
        .output()
        .expect("ask the peers' python");
    assert_eq!(
        String::from_utf8_lossy(&installed.stdout).trim(),
        pinned,
        "the snippet's pin and the tested SDK differ"
    );

    let gw = time_gateway(peers, "").await;
    let script = script.replace("http://127.0.0.1:8080/mcp", &gw.url());
    let file = std::env::temp_dir().join(format!("try_mcpmux_{}.py", std::process::id()));
    fs::write(&file, script).expect("write the snippet");
    let mut run = Command::new(&peers.python);
    run.arg(&file);
    let out = tokio::task::spawn_blocking(move || crate::support::run_client(run, Duration::from_secs(60)))
        .await
        .expect("run the snippet");
    let _ = fs::remove_file(&file);
    assert!(out.status.success(), "{out}");
    assert!(out.stdout.contains("tools, e.g. ['time__"), "{out}");
    assert!(out.stdout.contains("\"timezone\": \"UTC\""), "{out}");
    gw.stop().await;
}

/// The README's Python snippet for a gateway behind an API key, taken from the README itself,
/// runs as a script: with the key in `MCPMUX_API_KEY` it lists the tools; with another key the
/// gateway refuses it (so it is the snippet's header that lets it in).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_api_key_snippet_runs() {
    let _suite = crate::suite::enter(module_path!());
    let peers = crate::support::peers();
    let script = readme_block("- **Python SDK with a key**", "python");
    const KEY: &str = "readme-snippet-key-0123456789";
    let auth = format!("\n[auth]\n[[auth.api_keys]]\nname = \"ci-bot\"\nkey = \"{KEY}\"\n");
    let gw = time_gateway(peers, &auth).await;
    assert!(
        script.contains("\"https://mcp.example.com/mcp\""),
        "the snippet's URL moved:\n{script}"
    );
    let script = script.replace("https://mcp.example.com/mcp", &gw.url());
    let file = std::env::temp_dir().join(format!("try_mcpmux_key_{}.py", std::process::id()));
    fs::write(&file, script).expect("write the snippet");
    let run_with = |key: &'static str| {
        let mut run = Command::new(&peers.python);
        run.arg(&file).env("MCPMUX_API_KEY", key);
        tokio::task::spawn_blocking(move || crate::support::run_client(run, Duration::from_secs(60)))
    };
    let with_key = run_with(KEY).await.expect("run the snippet");
    let wrong_key = run_with("not-the-key").await.expect("run the snippet");
    let _ = fs::remove_file(&file);
    assert!(with_key.status.success(), "{with_key}");
    assert!(with_key.stdout.contains("tools, e.g. ['time__"), "{with_key}");
    assert!(
        !wrong_key.status.success() && !wrong_key.stdout.contains("tools, e.g."),
        "a wrong key must be refused: {wrong_key}"
    );
    gw.stop().await;
}

/// The README's Claude Desktop entry: `mcp-remote` (at the version the README pins) bridges a
/// stdio host to the gateway; a host speaking stdio to it initializes and calls a tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_claude_desktop_bridge_works() {
    let _suite = crate::suite::enter(module_path!());
    let peers = crate::support::peers();
    let entry = readme_json("- **Claude Desktop**");
    let args: Vec<String> =
        serde_json::from_value(entry["mcpServers"]["mcpmux"]["args"].clone()).expect("args");
    let pinned = args
        .iter()
        .find_map(|a| a.strip_prefix("mcp-remote@"))
        .expect("mcp-remote pinned");
    let installed = peers.dir.join("mcp-remote/node_modules/mcp-remote/package.json");
    let installed: Value =
        serde_json::from_str(&fs::read_to_string(installed).expect("mcp-remote installed")).expect("json");
    assert_eq!(
        installed["version"], pinned,
        "the README's pin and the tested bridge differ"
    );
    assert_eq!(args.last().map(String::as_str), Some("http://127.0.0.1:8080/mcp"));

    let gw = time_gateway(peers, "").await;
    let url = gw.url();
    assert_bridge_tells_the_time(peers, vec![url], Vec::new(), "mcp-remote-home").await;
    gw.stop().await;
}

/// The README's Claude Desktop entry for a gateway behind an API key: `mcp-remote` with the
/// entry's own arguments and environment (the key put in place of `<key>`) reaches a gateway
/// that refuses requests without the key, and a tool call goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_claude_desktop_key_entry_works() {
    let _suite = crate::suite::enter(module_path!());
    let peers = crate::support::peers();
    let entry = readme_json("- **Claude Desktop** with a key");
    let server = &entry["mcpServers"]["mcpmux"];
    let args: Vec<String> = serde_json::from_value(server["args"].clone()).expect("args");
    let env: std::collections::BTreeMap<String, String> =
        serde_json::from_value(server["env"].clone()).expect("env");
    // npx -y mcp-remote@VERSION ARGS…: the installed bridge gets ARGS.
    let bridge_args = args
        .iter()
        .position(|a| a.starts_with("mcp-remote@"))
        .map(|i| args[i + 1..].to_vec())
        .expect("mcp-remote in args");

    const KEY: &str = "readme-desktop-key-0123456789";
    let auth = format!("\n[auth]\n[[auth.api_keys]]\nname = \"desktop\"\nkey = \"{KEY}\"\n");
    let gw = time_gateway(peers, &auth).await;
    let url = gw.url();
    assert!(
        bridge_args.iter().any(|a| a == "https://mcp.example.com/mcp"),
        "the entry's URL moved: {bridge_args:?}"
    );
    let bridge_args: Vec<String> = bridge_args
        .into_iter()
        .map(|a| a.replace("https://mcp.example.com/mcp", &url))
        .collect();
    let env: Vec<(String, String)> = env
        .into_iter()
        .map(|(k, v)| (k, v.replace("<key>", KEY)))
        .collect();
    assert_bridge_tells_the_time(peers, bridge_args, env, "mcp-remote-key-home").await;
    gw.stop().await;
}

/// A gateway in front of the peers' real time server, `extra` (more tables) in its
/// configuration, once `/readyz` says it is ready.
async fn time_gateway(peers: &crate::support::Peers, extra: &str) -> mcpmux::Gateway {
    let (python, args) = &peers.time_cmd;
    let servers = format!(
        "[servers.time]\ncommand = {:?}\nargs = {}\n{extra}",
        python.display().to_string(),
        crate::support::toml_list(args)
    );
    let gw = crate::support::boot_gateway(&servers, "").await;
    wait_ready(&gw).await;
    gw
}

/// The README's JSON block for `entry`, parsed.
fn readme_json(entry: &str) -> Value {
    let block = readme_block(entry, "json");
    serde_json::from_str(&block).unwrap_or_else(|e| panic!("the README's JSON: {e}\n{block}"))
}

/// `mcp-remote ARGS…` (with `env`, its HOME a scratch directory named `home`) bridges a desktop
/// host's tool call to the time server, whose answer comes back.
async fn assert_bridge_tells_the_time(
    peers: &crate::support::Peers,
    args: Vec<String>,
    env: Vec<(String, String)>,
    home: &str,
) {
    let home = crate::support::scratch_dir(home);
    let bin = peers.mcp_remote_bin.clone();
    let reply = tokio::task::spawn_blocking(move || bridge_call(&bin, &args, &env, &home))
        .await
        .expect("the bridge ran");
    assert!(
        reply["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("UTC")),
        "{reply}"
    );
}

/// Speak stdio to `mcp-remote ARGS…` (with `env` added to its environment) as a desktop host
/// would: initialize, then one tool call; the call's response.
fn bridge_call(
    bin: &std::path::Path,
    args: &[String],
    env: &[(String, String)],
    home: &std::path::Path,
) -> Value {
    use std::io::{BufRead, BufReader, Write};
    let mut cmd = Command::new("node");
    cmd.arg(bin)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut bridge = ChildGuard::spawn_group(&mut cmd).expect("start mcp-remote");
    let mut stdin = bridge.child_mut().stdin.take().expect("stdin");
    let stdout = bridge.child_mut().stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(message) = serde_json::from_str::<Value>(&line) {
                if tx.send(message).is_err() {
                    return;
                }
            }
        }
    });
    let send = |stdin: &mut std::process::ChildStdin, message: Value| {
        writeln!(stdin, "{message}").expect("write to mcp-remote");
    };
    let wait_for = |id: i64| loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(message) if message["id"] == id => return message,
            Ok(_) => continue,
            Err(e) => panic!("no answer to request {id} through mcp-remote: {e}"),
        }
    };
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "desktop-host", "version": "1"}}}),
    );
    let init = wait_for(1);
    assert_eq!(init["result"]["serverInfo"]["name"], "mcpmux", "{init}");
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "time__get_current_time", "arguments": {"timezone": "UTC"}}}),
    );
    wait_for(2)
}
