//! The `mcpmux` command line as a new user meets it: `check-config` finds what would fail on
//! this machine (a command not on PATH, a missing `cwd`, no servers, an endpoint open to the
//! network), `status` says what to fix when it cannot reach a gateway, and logs written to a
//! pipe carry no colour escapes.

use crate::support::{free_port, run_client, scratch_dir, ChildGuard};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUN_TIMEOUT: Duration = Duration::from_secs(20);

fn mcpmux(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpmux"));
    cmd.args(args);
    cmd
}

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("mcpmux.toml");
    fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path
}

fn check(dir: &Path, text: &str) -> crate::support::ClientRun {
    let config = write_config(dir, text);
    let path = config.to_string_lossy().into_owned();
    run_client(mcpmux(&["check-config", "--config", &path]), RUN_TIMEOUT)
}

#[test]
fn check_config_refuses_what_cannot_start_and_warns_about_what_surprises() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("cli-check");

    let run = check(
        &dir,
        "[servers.tool]\ncommand = \"mcpmux-surely-not-installed\"\n",
    );
    assert!(!run.status.success(), "{run}");
    assert!(
        run.stderr
            .contains("servers.tool.command: `mcpmux-surely-not-installed` is not found on PATH"),
        "{run}"
    );

    let run = check(
        &dir,
        "[servers.tool]\ncommand = \"sh\"\ncwd = \"/mcpmux/no/such/dir\"\n",
    );
    assert!(!run.status.success(), "{run}");
    assert!(run.stderr.contains("servers.tool.cwd"), "{run}");
    assert!(
        run.stderr.contains("does not exist") && !run.stderr.contains("not found on PATH"),
        "{run}"
    );

    // A disabled server is validated but never started: its command is not looked for; a
    // shaping mistake is reported at its line.
    let run = check(
        &dir,
        "[servers.on]\ncommand = \"sh\"\n\n[servers.off]\nenabled = false\ncommand = \"mcpmux-surely-not-installed\"\n",
    );
    assert!(run.status.success(), "{run}");
    assert!(
        run.stdout
            .contains("configuration OK: 1 server(s) (1 more with enabled = false), 0 warning(s)"),
        "{run}"
    );
    let run = check(
        &dir,
        "[servers.on]\ncommand = \"sh\"\nrename = { echo = \"say\", add = \"say\" }\n",
    );
    assert!(!run.status.success(), "{run}");
    assert!(
        run.stderr.contains("mcpmux.toml:3: server \"on\": rename: tools \"echo\" and \"add\" would both be exposed as \"say\""),
        "{run}"
    );

    // A network listen address without [auth] is refused, unless allowed explicitly.
    let run = check(&dir, "[gateway]\nlisten = \"0.0.0.0:8080\"\n");
    assert!(!run.status.success(), "{run}");
    assert!(
        run.stderr.contains(":2: gateway.listen 0.0.0.0:8080")
            && run.stderr.contains("allow_unauthenticated"),
        "{run}"
    );
    let run = check(
        &dir,
        "[gateway]\nlisten = \"0.0.0.0:8080\"\nallow_unauthenticated = true\n",
    );
    assert!(run.status.success(), "warnings do not fail the check:\n{run}");
    assert!(run.stderr.contains("warning: no [servers.NAME] table"), "{run}");
    assert!(
        run.stderr.contains("warning: gateway.listen 0.0.0.0:8080"),
        "{run}"
    );
    assert!(
        run.stdout.contains("configuration OK: 0 server(s), 2 warning(s)"),
        "{run}"
    );

    // The control: a config that can run here passes clean.
    let run = check(&dir, "[servers.tool]\ncommand = \"sh\"\n");
    assert!(run.status.success() && run.stderr.is_empty(), "{run}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn status_errors_say_what_to_fix() {
    let _suite = crate::suite::enter(module_path!());
    let run = run_client(mcpmux(&["status"]), RUN_TIMEOUT);
    assert!(!run.status.success(), "{run}");
    assert!(
        run.stderr.contains("--url http://HOST:PORT/status") && run.stderr.contains("--config"),
        "{run}"
    );

    let port = free_port();
    let run = run_client(
        mcpmux(&["status", "--url", &format!("127.0.0.1:{port}/status")]),
        RUN_TIMEOUT,
    );
    assert_eq!(run.status.code(), Some(2), "{run}");
    assert!(
        run.stderr.contains("no scheme") && run.stderr.contains("http://127.0.0.1:8080/status"),
        "{run}"
    );
    assert!(!run.stderr.contains("builder error"), "{run}");

    let run = run_client(
        mcpmux(&["status", "--url", &format!("http://127.0.0.1:{port}/status")]),
        RUN_TIMEOUT,
    );
    assert_eq!(run.status.code(), Some(2), "{run}");
    assert!(
        run.stderr.to_ascii_lowercase().contains("connection refused"),
        "{run}"
    );
}

/// A gateway that serves: `status --url` without `/status` points at the right URL; its log
/// written to a pipe has no ANSI colour escapes.
#[test]
fn status_without_the_path_is_pointed_at_it_and_piped_logs_are_plain() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("cli-serve");
    let port = free_port();
    let gateway = serve_until_ready(&dir, &format!("[gateway]\nlisten = \"127.0.0.1:{port}\"\n"), port);
    let base = format!("http://127.0.0.1:{port}");
    let run = run_client(mcpmux(&["status", "--url", &format!("{base}/")]), RUN_TIMEOUT);
    assert_eq!(run.status.code(), Some(2), "{run}");
    assert!(run.stderr.contains(&format!("try --url {base}/status")), "{run}");

    let log = stop_and_read_log(gateway);
    assert!(log.contains("mcpmux listening"), "{log}");
    assert!(!log.contains('\u{1b}'), "colour escapes in a piped log:\n{log}");
    let _ = fs::remove_dir_all(&dir);
}

/// The log a person reads: plain values (a pid is a number, not `Some(…)`), and one line when
/// every upstream is ready.
#[test]
fn the_log_has_plain_values_and_says_when_every_upstream_is_ready() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("cli-log");
    let port = free_port();
    let servers = format!(
        "{}\n{}",
        crate::support::test_server_toml("one", &["--tools", "1"], None),
        crate::support::test_server_toml("two", &["--tools", "1"], None)
    );
    let config = format!("[gateway]\nlisten = \"127.0.0.1:{port}\"\n\n{servers}");
    let log = stop_and_read_log(serve_until_ready(&dir, &config, port));
    let started: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("started stdio upstream"))
        .collect();
    assert_eq!(started.len(), 2, "{log}");
    for line in started {
        let pid = line
            .split(" pid=")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next());
        assert!(
            pid.is_some_and(|p| p.parse::<u32>().is_ok()),
            "pid as a number: {line}"
        );
    }
    assert!(!log.contains("Some("), "debug formatting in the log:\n{log}");
    assert_eq!(log.matches("all 2 upstreams ready").count(), 1, "{log}");
    let _ = fs::remove_dir_all(&dir);
}

/// `mcpmux serve` with `config` (written in `dir`), its log piped as a service manager would,
/// once `mcpmux status` on `port` says every upstream is ready.
fn serve_until_ready(dir: &Path, config: &str, port: u16) -> ChildGuard {
    let config = write_config(dir, config);
    let mut serve = mcpmux(&["serve", "--config", &config.to_string_lossy()]);
    serve
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    serve.env_remove("RUST_LOG");
    let gateway = ChildGuard::spawn_group(&mut serve).expect("spawn mcpmux serve");
    let status = format!("http://127.0.0.1:{port}/status");
    let deadline = Instant::now() + RUN_TIMEOUT;
    loop {
        let run = run_client(mcpmux(&["status", "--url", &status]), RUN_TIMEOUT);
        if run.status.success() {
            return gateway;
        }
        assert!(
            Instant::now() < deadline,
            "the gateway's upstreams did not become ready:\n{run}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Kill the gateway and return everything it logged.
fn stop_and_read_log(mut gateway: ChildGuard) -> String {
    let mut stderr = gateway.child_mut().stderr.take().expect("piped stderr");
    gateway.kill();
    let mut log = String::new();
    let _ = stderr.read_to_string(&mut log);
    log
}

/// `.ci/run` ends with its `N passed, N failed` line even when a test fails, and fails itself.
/// Run with a stand-in `cargo` that passes every step but the tests.
#[test]
fn ci_prints_its_closing_line_when_a_test_fails() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("cli-ci");
    let fake = dir.join("cargo");
    fs::write(
        &fake,
        "#!/bin/sh\nif [ \"$1\" = test ]; then\n  echo 'test a::b ... FAILED'\n  \
         echo 'test result: FAILED. 3 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out'\n  \
         echo 'test result: ok. 5 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out'\n  exit 101\nfi\n",
    )
    .expect("write the stand-in cargo");
    let mut perms = fs::metadata(&fake).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    fs::set_permissions(&fake, perms).expect("chmod");
    let mut ci = Command::new("bash");
    ci.arg(crate::support::repo_root().join(".ci/run"));
    let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
    ci.env("PATH", path).env("MCPMUX_CI_LOG", dir.join("ci-test.log"));
    let run = run_client(ci, RUN_TIMEOUT);
    assert_eq!(run.status.code(), Some(101), "{run}");
    assert!(run.stdout.contains("mcpmux tests: 8 passed, 1 failed"), "{run}");
    assert!(run.stdout.contains("test a::b ... FAILED"), "{run}");
    let _ = fs::remove_dir_all(&dir);
}
