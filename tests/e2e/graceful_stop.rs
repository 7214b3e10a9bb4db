//! The real `mcpmux` binary: graceful stop on SIGTERM / SIGINT leaves no upstream
//! process behind (including grandchildren of wrapper shells), and configuration errors make
//! `serve` fail with a message naming the problem.

use crate::support::mcp::RawSession;
use crate::support::serve::ServeProcess;
use crate::support::{free_port, peers, run_client, scratch_dir};
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Upper bound for the gateway to exit after the signal (its own drain + upstream stop run inside).
const EXIT_TIMEOUT: Duration = Duration::from_secs(20);
/// Upper bound for upstream processes to disappear after the gateway exited.
const GONE_TIMEOUT: Duration = Duration::from_secs(10);
/// Upper bound for `serve` to fail on a bad configuration.
const CONFIG_ERROR_TIMEOUT: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------------------
// Scratch files
// ---------------------------------------------------------------------------------------------

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("mcpmux.toml");
    fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path
}

fn mcpmux_cmd(subcommand: &str, config: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpmux"));
    cmd.arg(subcommand).arg("--config").arg(config);
    cmd
}

// ---------------------------------------------------------------------------------------------
// /proc
// ---------------------------------------------------------------------------------------------

/// One process, identified by pid and start time (so a reused pid is never mistaken for it).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Proc {
    pid: i32,
    ppid: i32,
    pgid: i32,
    start: u64,
    comm: String,
}

/// `/proc/PID/stat`, or None if the process is gone.
fn read_stat(pid: i32) -> Option<(Proc, char)> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text[open + 1..close].to_string();
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // After "pid (comm)": state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
    // cmajflt utime stime cutime cstime priority nice num_threads itrealvalue starttime ...
    let state = rest.first()?.chars().next()?;
    let ppid = rest.get(1)?.parse().ok()?;
    let pgid = rest.get(2)?.parse().ok()?;
    let start = rest.get(19)?.parse().ok()?;
    Some((
        Proc {
            pid,
            ppid,
            pgid,
            start,
            comm,
        },
        state,
    ))
}

fn all_procs() -> Vec<Proc> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| read_stat(pid).map(|(p, _)| p))
        .collect()
}

/// Every process below `root` (children, grandchildren, ...), plus every other member of the
/// process groups they lead or belong to (a wrapper's stray background job stays in its group).
fn upstream_processes(root: i32) -> Vec<Proc> {
    let procs = all_procs();
    let mut children: HashMap<i32, Vec<&Proc>> = HashMap::new();
    for p in &procs {
        children.entry(p.ppid).or_default().push(p);
    }
    let mut found: Vec<Proc> = Vec::new();
    let mut queue = vec![root];
    while let Some(pid) = queue.pop() {
        for child in children.get(&pid).into_iter().flatten() {
            found.push((*child).clone());
            queue.push(child.pid);
        }
    }
    let root_pgid = read_stat(root).map(|(p, _)| p.pgid);
    let groups: HashSet<i32> = found
        .iter()
        .map(|p| p.pgid)
        .filter(|g| Some(*g) != root_pgid)
        .collect();
    let known: HashSet<i32> = found.iter().map(|p| p.pid).collect();
    for p in &procs {
        if groups.contains(&p.pgid) && !known.contains(&p.pid) && p.pid != root {
            found.push(p.clone());
        }
    }
    found
}

/// Is this very process (same pid and start time) still running? Zombies count as gone.
fn alive(p: &Proc) -> bool {
    match read_stat(p.pid) {
        Some((now, state)) => now.start == p.start && state != 'Z' && state != 'X',
        None => false,
    }
}

/// SIGKILLs the recorded processes that are still alive when a test fails half-way.
struct KillLeftovers(Vec<Proc>);

impl Drop for KillLeftovers {
    fn drop(&mut self) {
        for p in &self.0 {
            if alive(p) {
                // SAFETY: plain syscall on a process we verified by pid and start time.
                unsafe {
                    libc::kill(p.pid, libc::SIGKILL);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Graceful stop
// ---------------------------------------------------------------------------------------------

/// `sh -c` script for a wrapper that forks server-everything in the background and waits for it.
/// A non-interactive shell gives background jobs /dev/null as stdin, so the real stdin is passed
/// on through fd 3.
fn forking_wrapper(everything_js: &str) -> String {
    format!("exec 3<&0; node '{everything_js}' stdio <&3 3<&- & wait")
}

/// `sh -c` script for a doubly wrapped server-everything (a shell running a shell running node,
/// like npx) next to a stray background `sleep` that keeps the outer shell waiting.
fn nested_wrapper(everything_js: &str) -> String {
    format!("sleep 600 & sh -c \"node '{everything_js}' stdio; echo node exited >&2\"; wait")
}

/// Start `mcpmux serve` with two wrapper-launched server-everything upstreams, wait until both
/// serve, record every upstream process, send `signal`, and check the gateway exits with success
/// and no recorded process survives.
async fn stop_on_signal_leaves_no_process(signal: libc::c_int, signal_name: &str) {
    let everything_js = tokio::task::spawn_blocking(|| peers().everything_js.clone())
        .await
        .expect("peer installation panicked");
    let everything_js = everything_js.to_str().expect("UTF-8 path").to_string();
    assert!(
        !everything_js.contains('\''),
        "path with a quote: {everything_js}"
    );

    let dir = scratch_dir(&format!("stop-{signal_name}"));
    let servers = format!(
        "[servers.fork]\ncommand = \"sh\"\nargs = [\"-c\", {:?}]\n\n\
         [servers.nested]\ncommand = \"sh\"\nargs = [\"-c\", {:?}]\n",
        forking_wrapper(&everything_js),
        nested_wrapper(&everything_js),
    );
    let mut gateway = ServeProcess::start(&dir, "", &servers, &dir, &[]);
    let gateway_pid = gateway.guard.pid() as i32;

    // Ready: both upstreams' tools listed, and a call answered through each wrapper.
    let tools = gateway.wait_tools(&["fork__echo", "nested__echo"]).await;
    let url = gateway.url();
    let session = RawSession::open(&url, json!({})).await;
    for tool in ["fork__echo", "nested__echo"] {
        let msg = format!("through {tool}");
        let reply = session
            .call("tools/call", json!({"name": tool, "arguments": {"message": msg}}))
            .await;
        assert_eq!(
            reply["result"]["content"][0]["text"],
            format!("Echo: {msg}"),
            "{tool} reply: {reply}; log:\n{}",
            gateway.log()
        );
    }
    session.delete().await;

    // Every process the upstreams consist of.
    let procs = upstream_processes(gateway_pid);
    let _cleanup = KillLeftovers(procs.clone());
    let count = |comm: &str| procs.iter().filter(|p| p.comm == comm).count();
    assert_eq!(
        count("node"),
        2,
        "expected two node servers below the gateway: {procs:#?}"
    );
    assert_eq!(count("sleep"), 1, "expected the stray sleep: {procs:#?}");
    assert!(count("sh") >= 3, "expected the wrapper shells: {procs:#?}");
    let gateway_pgid = read_stat(gateway_pid).map(|(p, _)| p.pgid);
    assert!(
        procs.iter().all(|p| Some(p.pgid) != gateway_pgid),
        "an upstream process shares the gateway's process group: {procs:#?}"
    );
    assert!(tools.len() >= 2, "{tools:?}");

    gateway.signal(signal);
    let status = gateway.wait_exit(EXIT_TIMEOUT).await;
    let log_text = gateway.log();
    assert!(
        status.success(),
        "gateway exit after {signal_name}: {status}; log:\n{log_text}"
    );
    assert!(
        log_text.contains(&format!("{signal_name} received")),
        "gateway did not log the {signal_name}; log:\n{log_text}"
    );

    let deadline = Instant::now() + GONE_TIMEOUT;
    let survivors = loop {
        let survivors: Vec<&Proc> = procs.iter().filter(|p| alive(p)).collect();
        if survivors.is_empty() || Instant::now() >= deadline {
            break survivors;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        survivors.is_empty(),
        "upstream processes still alive {GONE_TIMEOUT:?} after the gateway exited: {survivors:#?}\n\
         all recorded: {procs:#?}\nlog:\n{log_text}"
    );
    let _ = fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_gateway_and_every_upstream_process() {
    let _suite = crate::suite::enter(module_path!());
    stop_on_signal_leaves_no_process(libc::SIGTERM, "SIGTERM").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_stops_gateway_and_every_upstream_process() {
    let _suite = crate::suite::enter(module_path!());
    stop_on_signal_leaves_no_process(libc::SIGINT, "SIGINT").await;
}

/// A server started as `sh -c "sleep 1000 & exec <server-everything>"` (the shell writes the
/// `sleep`'s pid to a file): after `signal` the gateway exits with success and the `sleep`, a
/// grandchild it never knew about, is gone too.
async fn stop_leaves_no_grandchild(signal: libc::c_int, signal_name: &str) {
    let everything_js = tokio::task::spawn_blocking(|| peers().everything_js.clone())
        .await
        .expect("peer installation panicked");
    let dir = scratch_dir(&format!("grandchild-{signal_name}"));
    let pid_file = dir.join("sleep.pid");
    let script = format!(
        "sleep 1000 & echo $! > '{}'; exec node '{}' stdio",
        pid_file.display(),
        everything_js.display()
    );
    let servers = format!("[servers.wrapped]\ncommand = \"sh\"\nargs = [\"-c\", {script:?}]\n");
    let mut gateway = ServeProcess::start(&dir, "", &servers, &dir, &[]);
    gateway.wait_tools(&["wrapped__echo"]).await;
    let pid: i32 = (fs::read_to_string(&pid_file).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in {}", pid_file.display()));
    let (sleep, _) = read_stat(pid).unwrap_or_else(|| panic!("the sleep ({pid}) is not running"));
    assert_eq!(sleep.comm, "sleep", "{sleep:?}");
    let _cleanup = KillLeftovers(vec![sleep.clone()]);

    gateway.signal(signal);
    let status = gateway.wait_exit(EXIT_TIMEOUT).await;
    let log = gateway.log();
    assert!(
        status.success(),
        "exit after {signal_name}: {status}; log:\n{log}"
    );
    assert!(log.contains(&format!("{signal_name} received")), "{log}");
    let deadline = Instant::now() + GONE_TIMEOUT;
    while alive(&sleep) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !alive(&sleep),
        "the grandchild survived {signal_name}: {sleep:?}; log:\n{log}"
    );
    let _ = fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_leaves_no_grandchild() {
    let _suite = crate::suite::enter(module_path!());
    stop_leaves_no_grandchild(libc::SIGTERM, "SIGTERM").await;
}

// ---------------------------------------------------------------------------------------------
// Configuration errors
// ---------------------------------------------------------------------------------------------

/// Run `mcpmux serve --config FILE` and require it to fail by itself (bounded).
fn serve_must_fail(config: &Path, env_remove: &[&str]) -> crate::support::ClientRun {
    let mut cmd = mcpmux_cmd("serve", config);
    for var in env_remove {
        cmd.env_remove(var);
    }
    let run = run_client(cmd, CONFIG_ERROR_TIMEOUT);
    assert!(!run.timed_out, "serve kept running on a bad config:\n{run}");
    assert!(!run.status.success(), "serve succeeded on a bad config:\n{run}");
    run
}

#[test]
fn unknown_key_fails_naming_key_and_line() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("unknown-key");
    let port = free_port();
    // Line 6, inside a server table.
    let config = write_config(
        &dir,
        &format!(
            "[gateway]\nlisten = \"127.0.0.1:{port}\"\n\n[servers.alpha]\ncommand = \"node\"\ncolour = \"blue\"\n"
        ),
    );
    let run = serve_must_fail(&config, &[]);
    let at = format!("{}:6:", config.display());
    assert!(run.stderr.contains("colour"), "key not named:\n{run}");
    assert!(run.stderr.contains(&at), "line not named (want {at:?}):\n{run}");

    // Line 3, inside [gateway].
    let config = write_config(
        &dir,
        &format!("[gateway]\nlisten = \"127.0.0.1:{port}\"\nlisten_backlog = 5\n"),
    );
    let run = serve_must_fail(&config, &[]);
    let at = format!("{}:3:", config.display());
    assert!(run.stderr.contains("listen_backlog"), "key not named:\n{run}");
    assert!(run.stderr.contains(&at), "line not named (want {at:?}):\n{run}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn missing_env_var_fails_naming_the_variable() {
    let _suite = crate::suite::enter(module_path!());
    const VAR: &str = "MCPMUX_GRACEFUL_TEST_SURELY_UNSET_VAR";
    let dir = scratch_dir("missing-env");
    let port = free_port();
    // Line 7.
    let config = write_config(
        &dir,
        &format!(
            "[gateway]\nlisten = \"127.0.0.1:{port}\"\n\n[servers.alpha]\ncommand = \"node\"\n\
             args = [\"stdio\"]\nenv = {{ TOKEN = \"${{{VAR}}}\" }}\n"
        ),
    );
    let run = serve_must_fail(&config, &[VAR]);
    assert!(run.stderr.contains(VAR), "variable not named:\n{run}");
    let at = format!("{}:7", config.display());
    assert!(
        run.stderr.contains(&at),
        "location not named (want {at:?}):\n{run}"
    );

    // Control: the same file is accepted once the variable is set.
    let mut check = mcpmux_cmd("check-config", &config);
    check.env(VAR, "secret-value");
    let run = run_client(check, CONFIG_ERROR_TIMEOUT);
    assert!(
        run.status.success() && !run.timed_out,
        "check-config with {VAR} set:\n{run}"
    );
    assert!(
        !run.stdout.contains("secret-value") && !run.stderr.contains("secret-value"),
        "{run}"
    );
    let _ = fs::remove_dir_all(&dir);
}
