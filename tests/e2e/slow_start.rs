//! A stdio server's first start on a slow machine (an `npx -y` or PyPI install before it runs):
//! the real `mcpmux` binary counts `handshake_timeout_secs` from the child's first output on
//! stdout, so the in-repo test server sleeping longer than the timeout before it reads or writes
//! anything is waited for (an INFO "still starting (installing?)", no ERROR) and serves; a child
//! that stays silent past the bound (10 × the timeout) or writes garbage fails clearly.

use crate::support::mcp::RawSession;
use crate::support::serve::ServeProcess;
use crate::support::{scratch_dir, test_server_toml, toml_list};
use serde_json::json;
use std::time::Duration;

const STILL_STARTING: &str = "still starting (installing?)";
const FAILED_TO_START: &str = "upstream failed to start";

/// The lines of `log` at ERROR level.
fn errors(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains(" ERROR ")).collect()
}

/// `mcpmux serve` in a fresh scratch directory named `tag`, serving `servers`.
fn start_gateway(tag: &str, servers: &str) -> ServeProcess {
    let dir = scratch_dir(tag);
    ServeProcess::start(&dir, "", servers, &dir, &[])
}

/// The test server `name`, silent for `delay_ms` before it starts, with a handshake timeout of 1 s.
fn delayed_server(name: &str, delay_ms: &str) -> String {
    test_server_toml(name, &["--start-delay-ms", delay_ms], None) + "handshake_timeout_secs = 1\n"
}

/// SIGTERM stops `gw` cleanly.
async fn assert_stops_cleanly(gw: &mut ServeProcess) {
    gw.signal(libc::SIGTERM);
    let status = gw.wait_exit(Duration::from_secs(30)).await;
    assert!(status.success(), "{status}; log:\n{}", gw.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_slower_to_start_than_the_handshake_timeout_is_waited_for_without_an_error() {
    let _suite = crate::suite::enter(module_path!());
    // Silent for 4 s (installing), then an ordinary server; the handshake timeout is 1 s.
    let mut gw = start_gateway("slow-start-waited", &delayed_server("slow", "4000"));
    gw.wait_tools(&["slow__echo"]).await;
    let session = RawSession::open(&gw.url(), json!({})).await;
    let text = session.tool_text("slow__echo", json!({"message": "late"})).await;
    assert_eq!(text, "echo: late");
    let log = gw.log();
    let note = log.lines().find(|l| l.contains(STILL_STARTING));
    assert!(note.is_some_and(|l| l.contains(" INFO ")), "no INFO note:\n{log}");
    assert_eq!(
        errors(&log),
        Vec::<&str>::new(),
        "a slow first start logged errors:\n{log}"
    );
    assert!(!log.contains(FAILED_TO_START), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_silent_past_the_bound_fails_clearly() {
    let _suite = crate::suite::enter(module_path!());
    // Never writes within 10 × 1 s: it fails, saying so, well before it would ever answer.
    let mut gw = start_gateway("slow-start-silent", &delayed_server("mute", "600000"));
    let wanted = [" ERROR ", FAILED_TO_START, "wrote nothing on stdout within 10 s"];
    let line = gw.wait_log_line(&wanted, Duration::from_secs(40)).await;
    assert!(line.contains("mute"), "{line}");
    assert!(gw.log().contains(STILL_STARTING), "{}", gw.log());
    assert_stops_cleanly(&mut gw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_writes_garbage_fails_clearly_at_the_handshake_timeout() {
    let _suite = crate::suite::enter(module_path!());
    // It speaks at once, but no JSON-RPC: the handshake timer runs from that first output.
    let script = "echo 'Downloading... this is not JSON-RPC'; echo 'installer: done' >&2; exec sleep 600";
    let args = toml_list(&["-c".to_string(), script.to_string()]);
    let servers = format!("[servers.noisy]\ncommand = \"sh\"\nargs = {args}\nhandshake_timeout_secs = 1\n");
    let mut gw = start_gateway("slow-start-garbage", &servers);
    let wanted = [
        " ERROR ",
        FAILED_TO_START,
        "within 1 s of its first output",
        "installer: done",
    ];
    let line = gw.wait_log_line(&wanted, Duration::from_secs(30)).await;
    assert!(line.contains("noisy"), "{line}");
    assert!(gw.log().contains("not a JSON-RPC message"), "{}", gw.log());
    assert_stops_cleanly(&mut gw).await;
}
