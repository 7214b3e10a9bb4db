//! An upstream's life as operators and hosts see it, with real servers: mcp-server-sqlite on the
//! old Python SDK (mcp 1.6.0), which exits on the era probe, is opened with `initialize` and
//! stays so across restarts; a killed HTTP or legacy SSE server-everything is down at once
//! (phase, `last_error`, tools gone, `list_changed`) and back when it returns, its failure then
//! marked past; a server that never answers its handshake, or a legacy SSE reconnect that hangs,
//! stalls neither hosts' `initialize` nor shutdown, and the handshake fails after
//! `handshake_timeout_secs` (a stdio child silent on stdout: after 10 × that); a failed start
//! says its exit status and last stderr lines, naming the upstream once.

use crate::support::mcp::{wait_for, RawSession};
use crate::support::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A guard against hangs (not a performance assertion): no single step here may take longer.
const STEP_LIMIT: Duration = Duration::from_secs(60);
/// How `last_error` starts once the upstream was ready again.
const PAST: &str = "past (ready again): ";

async fn bounded<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(STEP_LIMIT, fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what} did not finish within {STEP_LIMIT:?}"),
    }
}

/// Poll `/status` until upstream `name` satisfies `pred`; returns its entry.
async fn until_upstream(
    gw: &mcpmux::Gateway,
    name: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    bounded(what, async {
        loop {
            let doc = gateway_status(gw).await;
            let entry = status_upstream(&doc, name).clone();
            if pred(&entry) {
                break entry;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
}

async fn tool_names(s: &RawSession) -> Vec<String> {
    let (tools, _) = s.list_all("tools/list", "tools").await;
    tools
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

/// Poll `tools/list` until some tool starts with `prefix` (lists load just after "ready").
async fn until_listed(s: &RawSession, prefix: &str) {
    bounded("the tools listed", async {
        while !tool_names(s).await.iter().any(|t| t.starts_with(prefix)) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
}

fn text_of(reply: &Value) -> String {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {reply}"))
        .to_string()
}

async fn sqlite_call(s: &RawSession, tool: &str, args: Value) -> String {
    let reply = s
        .call(
            "tools/call",
            json!({"name": format!("sqlite__{tool}"), "arguments": args}),
        )
        .await;
    text_of(&reply)
}

/// The pids a start-recording wrapper wrote, one per start.
fn starts(log: &std::path::Path) -> Vec<i32> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_python_sdk_server_that_exits_on_the_era_probe_is_opened_with_initialize() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("sqlite-probe");
    let log = dir.join("starts.log");
    let db = dir.join("test.db");
    // Each start writes its pid (`$$$$` is `$$` once the config has read it), then becomes mcp-server-sqlite (mcp 1.6.0) with the default
    // config: `era` unset, so mcpmux probes with `server/discover`, which this server exits on.
    let script = format!(
        "echo $$$$ >> '{}'; exec '{}' --db-path '{}'",
        path_str(&log),
        path_str(&peers().sqlite_server),
        path_str(&db)
    );
    let servers = format!(
        "[servers.sqlite]\ncommand = \"sh\"\nargs = {}\n",
        toml_list(&["-c".into(), script])
    );
    let gw = boot_gateway(&servers, "").await;
    let entry = until_upstream(&gw, "sqlite", "sqlite ready", |u| u["phase"] == "ready").await;
    assert_eq!(
        (entry["era"].as_str(), entry["restarts"].as_u64()),
        (Some("session"), Some(0)),
        "{entry}"
    );
    // Started twice: the probe made it exit, the second start was opened with initialize.
    assert_eq!(starts(&log).len(), 2, "{:?}", starts(&log));

    let s = RawSession::open(&gw.url(), json!({})).await;
    let tools = tool_names(&s).await;
    for tool in ["list_tables", "read_query", "write_query", "create_table"] {
        assert!(tools.contains(&format!("sqlite__{tool}")), "{tools:?}");
    }
    sqlite_call(
        &s,
        "create_table",
        json!({"query": "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"}),
    )
    .await;
    sqlite_call(
        &s,
        "write_query",
        json!({"query": "INSERT INTO notes (body) VALUES ('kept')"}),
    )
    .await;
    assert!(sqlite_call(&s, "list_tables", json!({})).await.contains("notes"));
    let read = json!({"query": "SELECT body FROM notes"});
    assert!(sqlite_call(&s, "read_query", read.clone()).await.contains("kept"));

    // Killed, it is restarted once, with initialize straight away: the verdict was kept.
    let pid = *starts(&log).last().expect("a start");
    // SAFETY: kill(2) with a pid this test's wrapper recorded; no memory is involved.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let entry = until_upstream(&gw, "sqlite", "sqlite back after the kill", |u| {
        u["phase"] == "ready" && u["restarts"] == 1
    })
    .await;
    assert_eq!(
        starts(&log).len(),
        3,
        "one more start, no probe: {:?}",
        starts(&log)
    );
    until_listed(&s, "sqlite__").await;
    let last_error = entry["last_error"].as_str().unwrap_or_default();
    assert!(
        last_error.starts_with(PAST) && last_error.contains("signal: 9"),
        "{entry}"
    );
    assert!(sqlite_call(&s, "read_query", read).await.contains("kept"));
    let entry = status_upstream(&gateway_status(&gw).await, "sqlite").clone();
    assert_eq!(
        (entry["phase"].as_str(), entry["restarts"].as_u64()),
        (Some("ready"), Some(1)),
        "not restarted over and over: {entry}"
    );
    gw.stop().await;
}

/// How soon a killed upstream must be down. Not a performance bound: before, a legacy SSE
/// upstream was first retried eight times over 31.75 s of fixed backoff, and an HTTP one without
/// health checks never went down; now the first refused connection takes it down.
const DOWN_WITHIN: Duration = Duration::from_secs(15);

/// Kill server-everything behind upstream `name` and check it goes down at once; start it again
/// with `start` and check it comes back, its failure then marked past.
async fn killed_and_back(
    gw: &mcpmux::Gateway,
    name: &str,
    server: ChildGuard,
    start: impl FnOnce() -> ChildGuard + Send + 'static,
) {
    let prefix = format!("{name}__");
    let s = RawSession::open(&gw.url(), json!({})).await;
    let mut events = s.get_stream().await;
    assert!(tool_names(&s).await.iter().any(|t| t.starts_with(&prefix)));
    let echo = json!({"name": format!("{name}__echo"), "arguments": {"message": "hi"}});
    assert_eq!(text_of(&s.call("tools/call", echo.clone()).await), "Echo: hi");

    drop(server);
    let killed = Instant::now();
    // A call now fails (whichever of it and the lost stream tells mcpmux first).
    let reply = s.call("tools/call", echo.clone()).await;
    assert!(reply["error"].is_object(), "{reply}");
    let entry = until_upstream(gw, name, "the upstream down", |u| u["phase"] != "ready").await;
    assert!(
        killed.elapsed() < DOWN_WITHIN,
        "down only after {:?}",
        killed.elapsed()
    );
    let last_error = entry["last_error"].as_str().unwrap_or_default();
    assert!(
        last_error.contains("cannot be reached") || last_error.contains("refused"),
        "{entry}"
    );
    assert!(!last_error.starts_with(PAST), "{entry}");
    wait_for(&mut events, |m| m["method"] == "notifications/tools/list_changed").await;
    let tools = tool_names(&s).await;
    assert!(!tools.iter().any(|t| t.starts_with(&prefix)), "{tools:?}");

    let _server = tokio::task::spawn_blocking(start)
        .await
        .expect("restart the server");
    let entry = until_upstream(gw, name, "the upstream back", |u| u["phase"] == "ready").await;
    let last_error = entry["last_error"].as_str().unwrap_or_default();
    assert!(last_error.starts_with(PAST), "{entry}");
    wait_for(&mut events, |m| m["method"] == "notifications/tools/list_changed").await;
    until_listed(&s, &prefix).await;
    assert_eq!(text_of(&s.call("tools/call", echo).await), "Echo: hi");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_http_upstream_is_down_at_once_and_back_when_it_returns() {
    let _suite = crate::suite::enter(module_path!());
    let port = free_port();
    let server = tokio::task::spawn_blocking(move || start_everything_http(port))
        .await
        .expect("start server-everything");
    // No health check: only the refused connections can tell mcpmux the server is gone.
    let servers =
        format!("[servers.web]\nurl = \"http://127.0.0.1:{port}/mcp\"\nhealth_check_interval_secs = 0\n");
    let gw = boot_gateway(&servers, "").await;
    until_upstream(&gw, "web", "web ready", |u| u["phase"] == "ready").await;
    killed_and_back(&gw, "web", server, move || start_everything_http(port)).await;
    assert_eq!(
        status_upstream(&gateway_status(&gw).await, "web")["transport"],
        "http"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_legacy_sse_upstream_is_down_at_once_and_shown_as_sse() {
    let _suite = crate::suite::enter(module_path!());
    let port = free_port();
    let server = tokio::task::spawn_blocking(move || start_everything_sse(port))
        .await
        .expect("start server-everything (sse)");
    let url = format!("http://127.0.0.1:{port}/sse");
    let servers = format!(
        "[servers.ev]\nurl = {url:?}\ntransport = \"sse\"\nhealth_check_interval_secs = 0\n\n\
         [servers.found]\nurl = {url:?}\nhealth_check_interval_secs = 0\n"
    );
    let gw = boot_gateway(&servers, "").await;
    for name in ["ev", "found"] {
        let entry = until_upstream(&gw, name, "ready", |u| u["phase"] == "ready").await;
        // Configured as legacy SSE, or found to speak it: `/status` says so.
        assert_eq!(entry["transport"], "sse", "{entry}");
    }
    // Before, the lost stream was retried eight times (over 30 s of backoff) while `/status`
    // said ready; now the refused reconnect takes it down at once.
    killed_and_back(&gw, "ev", server, move || start_everything_sse(port)).await;
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_while_a_legacy_sse_upstream_reconnects_ends_the_attempt() {
    use tokio::io::AsyncReadExt;
    let _suite = crate::suite::enter(module_path!());
    let port = free_port();
    let server = tokio::task::spawn_blocking(move || start_everything_sse(port))
        .await
        .expect("start server-everything (sse)");
    let servers = format!(
        "[servers.ev]\nurl = \"http://127.0.0.1:{port}/sse\"\ntransport = \"sse\"\n\
         health_check_interval_secs = 0\n"
    );
    let gw = boot_gateway(&servers, "").await;
    until_upstream(&gw, "ev", "ev ready", |u| u["phase"] == "ready").await;
    drop(server);
    // Something now takes connections on the port and never answers: mcpmux's next attempt
    // to open the stream hangs there.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind the server's port");
    let (mut socket, _) = bounded("a reconnect attempt", listener.accept())
        .await
        .expect("accept");
    let mut head = [0u8; 512];
    let n = bounded("its request", socket.read(&mut head))
        .await
        .expect("read");
    assert!(
        head[..n].starts_with(b"GET "),
        "{:?}",
        String::from_utf8_lossy(&head[..n])
    );

    // The stop ends the attempt: mcpmux closes the connection. Before, the attempt ran on past
    // the stop (which gave up waiting for it after 20 s) until its own 30 s timeout.
    bounded("the stop", gw.stop()).await;
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        let mut rest = [0u8; 512];
        loop {
            match socket.read(&mut rest).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the hanging attempt outlived the stop");
}

/// Pids of `sleep` processes with exactly `arg` as their argument.
fn sleepers(arg: &str) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let parts: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            parts.len() >= 2 && parts[0].ends_with(b"sleep") && parts[1] == arg.as_bytes()
        })
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            !stat.contains(") Z ")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_stalls_neither_hosts_nor_shutdown_and_times_out() {
    let _suite = crate::suite::enter(module_path!());
    // Unusual arguments, to find these processes and no others.
    let (hung_arg, slow_arg) = ("1000.0417", "1000.0419");
    let servers = format!(
        "[servers.hung]\ncommand = \"sleep\"\nargs = [\"{hung_arg}\"]\n\n\
         [servers.slow]\ncommand = \"sleep\"\nargs = [\"{slow_arg}\"]\nhandshake_timeout_secs = 1\n\n{}\n{}",
        test_server_toml("real", &[], None),
        test_server_toml("late", &["--start-delay-ms", "20000"], None)
    );
    let gw = boot_gateway(&servers, "").await;
    until_upstream(&gw, "real", "the real server ready", |u| u["phase"] == "ready").await;

    // A host's initialize is answered while `hung` is still in its handshake (30 s by
    // default; before, initialize waited up to 60 s for it) and `late` still starting, and
    // lists the real server's tools.
    let s = RawSession::open(&gw.url(), json!({})).await;
    let mut events = s.get_stream().await;
    let doc = gateway_status(&gw).await;
    for name in ["hung", "late"] {
        assert_eq!(status_upstream(&doc, name)["phase"], "starting", "{doc}");
    }
    let tools = tool_names(&s).await;
    assert!(tools.iter().any(|t| t == "real__echo"), "{tools:?}");
    assert!(!tools.iter().any(|t| t.starts_with("late__")), "{tools:?}");
    assert_eq!(
        text_of(
            &s.call(
                "tools/call",
                json!({"name": "real__echo", "arguments": {"message": "up"}})
            )
            .await
        ),
        "echo: up"
    );

    // `late` (20 s to start) joins later: the host is told, and its tools are listed.
    wait_for(&mut events, |m| m["method"] == "notifications/tools/list_changed").await;
    until_listed(&s, "late__").await;

    // By now (20 s in) the gateway's first STARTUP_WAIT is long over: a new host does not wait
    // for `hung` at all (before, every initialize waited 10 s while it was starting).
    assert_eq!(
        status_upstream(&gateway_status(&gw).await, "hung")["phase"],
        "starting"
    );
    let asked = Instant::now();
    let _later = RawSession::open(&gw.url(), json!({})).await;
    let waited = asked.elapsed();
    assert!(
        waited < Duration::from_secs(5),
        "initialize waited {waited:?} for a hung upstream"
    );

    // `slow` (silent on stdout: it may be installing) gives up after 10 × its
    // handshake_timeout_secs and says why.
    let entry = until_upstream(&gw, "slow", "slow failed", |u| {
        u["phase"] == "restarting" || u["phase"] == "crash-loop"
    })
    .await;
    let last_error = entry["last_error"].as_str().unwrap_or_default();
    assert!(
        last_error.contains("wrote nothing on stdout within 10 s")
            && last_error.contains("handshake_timeout_secs"),
        "{entry}"
    );

    // Stopping does not wait for `hung`'s handshake: once stop returns, no sleep is left (before,
    // stop gave up waiting on its supervisor after 10 s and left the child to its handshake).
    assert!(!sleepers(hung_arg).is_empty(), "hung runs before the stop");
    bounded("the stop", gw.stop()).await;
    assert_eq!(sleepers(hung_arg), Vec::<i32>::new(), "hung outlived the stop");
    assert_eq!(sleepers(slow_arg), Vec::<i32>::new(), "slow outlived the stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_start_says_its_exit_status_and_last_stderr_lines_naming_the_upstream_once() {
    let _suite = crate::suite::enter(module_path!());
    let servers = format!(
        "{}\n[servers.nope]\ncommand = \"mcpmux-test-no-such-command\"\n",
        test_server_toml("broken", &["--crash-on-start"], None)
    );
    let gw = boot_gateway(&servers, "").await;
    let broken = until_upstream(&gw, "broken", "broken failed", |u| u["last_error"].is_string()).await;
    let last_error = broken["last_error"].as_str().unwrap_or_default();
    assert!(
        last_error.contains("exit status: 3")
            && last_error.contains("[test-server] --crash-on-start: exiting with code 3"),
        "{broken}"
    );
    let nope = until_upstream(&gw, "nope", "nope failed", |u| u["last_error"].is_string()).await;
    let last_error = nope["last_error"].as_str().unwrap_or_default();
    assert!(last_error.contains("mcpmux-test-no-such-command"), "{nope}");
    // The entry names the upstream; its error does not repeat "upstream 'nope' is not available".
    assert!(!last_error.contains("is not available"), "{nope}");
    gw.stop().await;
}
