//! Config hygiene through the real binary: `mcpmux config schema` prints a JSON Schema that
//! editors can use (and that accepts the shipped example), and `check-config` (like a refused
//! `serve`) reports every problem of a configuration spread over a main file, an include and an
//! `mcp_json` file at once, each at its file and line.

use crate::support::{run_client, scratch_dir};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const RUN_TIMEOUT: Duration = Duration::from_secs(20);

fn mcpmux(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpmux"));
    cmd.args(args);
    for var in ["MCPMUX_E2E_UNSET_TOKEN", "MCPMUX_E2E_UNSET_KEY"] {
        cmd.env_remove(var);
    }
    cmd
}

#[test]
fn config_schema_prints_a_json_schema_the_example_config_meets() {
    let _suite = crate::suite::enter(module_path!());
    let run = run_client(mcpmux(&["config", "schema"]), RUN_TIMEOUT);
    assert!(run.status.success(), "{run}");
    let schema: serde_json::Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {run}"));
    assert_eq!(
        schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
        "{run}"
    );
    assert!(jsonschema::meta::is_valid(&schema), "not a JSON Schema: {run}");
    let validator = jsonschema::validator_for(&schema).expect("compiles");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml");
    let text = std::fs::read_to_string(&example).expect("config.example.toml");
    let value: toml::Value = toml::from_str(&text).expect("TOML");
    let instance = serde_json::to_value(value).expect("JSON");
    let errors: Vec<String> = validator.iter_errors(&instance).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let wrong = serde_json::json!({"servers": {"a": {"command": "x", "isolation": "per_session"}}});
    assert!(!validator.is_valid(&wrong));
}

#[test]
fn check_config_and_serve_report_every_problem_with_its_file_and_line() {
    let _suite = crate::suite::enter(module_path!());
    let (dir, main, team) = main_and_team(
        "config-hygiene",
        "include = [\"team.toml\"]\nmcp_json = [\".mcp.json\"]\n\n[gateway]\nmax_body_bytes = 0\n\n\
         [servers.alpha]\ncommand = \"sh\"\ncolour = \"red\"\n\n[servers.beta]\nurl = \"ftp://nowhere\"\n\n\
         [profiles.review]\npath = \"/mcp/review\"\nservers = [\"alpha\", \"ghost\"]\n",
        "[servers.gamma]\ncommand = \"sh\"\nhandshake_timeout_secs = \"soon\"\n\n[servers.delta]\ncommand = \"sh\"\n\
         env = { TOKEN = \"${MCPMUX_E2E_UNSET_TOKEN}\" }\n\n[servers.epsilon]\ncommand = \"sh\"\n\
         rename = { echo = \"say\", add = \"say\" }\n",
    );
    let json = write_in(
        &dir,
        ".mcp.json",
        "{\n  \"mcpServers\": {\n    \"local\": {\n      \"command\": \"sh\",\n      \"env\": {\n        \"KEY\": \"${MCPMUX_E2E_UNSET_KEY}\"\n      }\n    }\n  }\n}\n",
    );
    let expected = [
        format!("{main}:5: gateway.max_body_bytes must be at least 1"),
        format!("{main}:9:1: unknown key `colour`"),
        format!("{main}:12: server \"beta\": `url` \"ftp://nowhere\""),
        format!("{main}:16: profiles.review.servers[1]: no server \"ghost\""),
        format!("{team}:3:26: invalid type: string \"soon\""),
        format!(
            "{team}:7: servers.delta.env.TOKEN: environment variable \"MCPMUX_E2E_UNSET_TOKEN\" is not set"
        ),
        format!("{team}:11: server \"epsilon\": rename: tools \"echo\" and \"add\""),
        format!("{json}:6: servers.local.env.KEY: environment variable \"MCPMUX_E2E_UNSET_KEY\" is not set"),
    ];
    let run = run_client(mcpmux(&["check-config", "--config", &main]), RUN_TIMEOUT);
    assert_eq!(run.status.code(), Some(1), "{run}");
    let lines = problem_lines(&run);
    for line in &expected {
        assert_eq!(
            lines.iter().filter(|l| l.starts_with(line.as_str())).count(),
            1,
            "{line} in {run}"
        );
    }
    assert_eq!(lines.len(), expected.len() + 1, "{run}");
    assert_eq!(
        lines.last().copied(),
        Some("configuration has 8 error(s)"),
        "{run}"
    );

    // `serve` refuses to start with the same list.
    let run = run_client(mcpmux(&["serve", "--config", &main]), RUN_TIMEOUT);
    assert_eq!(run.status.code(), Some(1), "{run}");
    assert!(
        run.stderr.contains("error: the configuration has 8 problems:"),
        "{run}"
    );
    for line in &expected {
        assert!(
            run.stderr.lines().any(|l| l.starts_with(line.as_str())),
            "{line} in {run}"
        );
    }
}

/// Writes `text` as `name` in `dir`; its path as errors name it.
fn write_in(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path.display().to_string()
}

/// A fresh scratch directory named `tag` with `main` as its `mcpmux.toml` and `team` as its
/// `team.toml`; the directory, and the two files' paths as errors name them.
fn main_and_team(tag: &str, main: &str, team: &str) -> (PathBuf, String, String) {
    let dir = scratch_dir(tag);
    let main = write_in(&dir, "mcpmux.toml", main);
    let team = write_in(&dir, "team.toml", team);
    (dir, main, team)
}

/// The lines of stderr besides log lines.
fn problem_lines(run: &crate::support::ClientRun) -> Vec<&str> {
    run.stderr.lines().filter(|l| !l.contains(" WARN ")).collect()
}

/// A JSON syntax error in an `mcp_json` file is one problem among the others (a misspelt key in
/// the main file, with the key it was meant to be, and an unset variable in an include), each
/// at its file and line, in one run of check-config and of a refused serve.
#[test]
fn a_broken_mcp_json_file_is_reported_with_every_other_problem() {
    let _suite = crate::suite::enter(module_path!());
    let (dir, main, team) = main_and_team(
        "config-hygiene-broken-json",
        "include = [\"team.toml\"]\nmcp_json = [\"clients.json\"]\n\n[servers.alpha]\ncomand = \"oops\"\n",
        "[servers.delta]\ncommand = \"sh\"\nenv = { TOKEN = \"${MCPMUX_E2E_UNSET_TOKEN}\" }\n",
    );
    let json = write_in(
        &dir,
        "clients.json",
        "{\n  \"mcpServers\": {\n    \"local\": { \"command\": \"sh\" },,\n  }\n}\n",
    );
    let expected = [
        format!("{main}:5:1: unknown key `comand`: did you mean `command`? (in [servers.alpha])"),
        format!(
            "{team}:3: servers.delta.env.TOKEN: environment variable \"MCPMUX_E2E_UNSET_TOKEN\" is not set"
        ),
        format!("{json}:4:3: not JSON: trailing comma (mcp_json, named at {main}:2)"),
        "configuration has 3 error(s)".to_string(),
    ];
    let run = run_client(mcpmux(&["check-config", "--config", &main]), RUN_TIMEOUT);
    assert_eq!(run.status.code(), Some(1), "{run}");
    assert_eq!(problem_lines(&run), expected, "{run}");

    let run = run_client(mcpmux(&["serve", "--config", &main]), RUN_TIMEOUT);
    assert_eq!(run.status.code(), Some(1), "{run}");
    let mut refused = vec!["error: the configuration has 3 problems:".to_string()];
    refused.extend(expected[..3].iter().cloned());
    assert_eq!(problem_lines(&run), refused, "{run}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// What check-config finds on the machine (a command not on PATH, a working directory that is
/// not there) is said at the line of the key that caused it, in whichever file wrote it, in the
/// same run as the files' own problems.
#[test]
fn the_checks_on_the_machine_come_at_their_line_with_the_files_problems() {
    let _suite = crate::suite::enter(module_path!());
    let (dir, main, team) = main_and_team(
        "config-hygiene-machine",
        "include = [\"team.toml\"]\n\n[gateway]\nmax_body_bytes = 0\n\n[servers.here]\ncommand = \"sh\"\n",
        "[servers.far]\ncommand = \"mcpmux-surely-not-installed\"\n\n\
         [servers.lost]\ncommand = \"sh\"\ncwd = \"/mcpmux/no/such/dir\"\n",
    );
    let mut cmd = mcpmux(&["check-config", "--config", &main]);
    cmd.env("PATH", "/usr/bin:/bin");
    let run = run_client(cmd, RUN_TIMEOUT);
    assert_eq!(run.status.code(), Some(1), "{run}");
    assert_eq!(
        problem_lines(&run),
        [
            format!("{main}:4: gateway.max_body_bytes must be at least 1"),
            format!(
                "{team}:2: error: servers.far.command: `mcpmux-surely-not-installed` is not found on \
                 PATH (/usr/bin:/bin); install it or give its full path"
            ),
            format!(
                "{team}:6: error: servers.lost.cwd: the working directory /mcpmux/no/such/dir does not exist"
            ),
            "configuration has 3 error(s)".to_string(),
        ],
        "{run}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_reload_shows_every_problem_in_status() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("config-hygiene-reload");
    let server = crate::support::test_server_toml("keep", &[], None);
    let mut gateway = crate::support::serve::ServeProcess::start(&dir, "", &server, &dir, &[]);
    gateway.wait_tools(&["keep__echo"]).await;
    let good = std::fs::read_to_string(&gateway.config).expect("config");
    let broken = format!("{good}\n[servers.broken]\ncommand = 7\n\n[servers.other]\nurl = \"ftp://x\"\n");
    std::fs::write(&gateway.config, &broken).expect("write");
    let lines = broken.lines().count();
    gateway.signal(libc::SIGHUP);
    gateway.wait_reload("reload refused").await;
    let text = reqwest::get(format!("http://127.0.0.1:{}/status", gateway.port))
        .await
        .expect("GET /status")
        .text()
        .await
        .expect("body");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let error = doc["config"]["last_reload"]["error"].as_str().unwrap_or_default();
    let file = gateway.config.display().to_string();
    let problems: Vec<&str> = error.lines().collect();
    assert_eq!(problems.len(), 2, "{doc}");
    assert!(
        problems[0].starts_with(&format!("{file}:{}:11: invalid type", lines - 3)),
        "{doc}"
    );
    assert!(
        problems[1].starts_with(&format!("{file}:{lines}: server \"other\"")),
        "{doc}"
    );
    gateway.signal(libc::SIGTERM);
    assert!(gateway.wait_exit(Duration::from_secs(30)).await.success());
}

/// `mcpmux status --config FILE` needs the gateway's address only: a `${VAR}` the operator's
/// shell lacks (the gateway was started with it) does not stop it from asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_with_the_config_reads_only_the_address_and_ignores_unset_variables() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("config-hygiene-status");
    let server = format!(
        "{}env = {{ TOKEN = \"${{MCPMUX_E2E_STATUS_TOKEN}}\" }}\n",
        crate::support::test_server_toml("keep", &[], None)
    );
    let env = [("MCPMUX_E2E_STATUS_TOKEN", "secret")];
    let mut gateway = crate::support::serve::ServeProcess::start(&dir, "", &server, &dir, &env);
    gateway.wait_tools(&["keep__echo"]).await;
    let config = gateway.config.display().to_string();
    let mut cmd = mcpmux(&["status", "--config", &config]);
    cmd.env_remove("MCPMUX_E2E_STATUS_TOKEN");
    let run = run_client(cmd, RUN_TIMEOUT);
    assert_eq!(run.status.code(), Some(0), "{run}");
    let row = run.stdout.lines().find(|l| l.starts_with("keep "));
    assert!(row.is_some_and(|l| l.contains(" ready ")), "{run}");
    assert!(!run.stderr.contains("is not set"), "{run}");
    gateway.signal(libc::SIGTERM);
    assert!(gateway.wait_exit(Duration::from_secs(30)).await.success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `listen` address another program holds: `serve` says so and suggests a port that is free
/// (a file without `[gateway]`, as `mcpmux import` writes, meets this on a busy 8080).
#[test]
fn a_listen_address_in_use_is_refused_with_a_free_port_to_use_instead() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("config-hygiene-in-use");
    let held = std::net::TcpListener::bind("127.0.0.1:0").expect("a port to hold");
    let taken = held.local_addr().expect("its address");
    let main = write_in(&dir, "mcpmux.toml", &format!("[gateway]\nlisten = \"{taken}\"\n"));
    let run = run_client(mcpmux(&["serve", "--config", &main]), RUN_TIMEOUT);
    assert_eq!(run.status.code(), Some(1), "{run}");
    let line = run
        .stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_default();
    let prefix = format!("error: cannot listen on {taken}: ");
    let middle = ": another program (or another mcpmux) holds that address; give it another port in the \
                  configuration file, e.g. [gateway] listen = \"127.0.0.1:";
    let (head, tail) = line.split_once(middle).unwrap_or_else(|| panic!("{run}"));
    assert!(head.starts_with(&prefix), "{run}");
    let port = tail
        .strip_suffix("\" (free just now)")
        .unwrap_or_else(|| panic!("{run}"));
    let port: u16 = port.parse().unwrap_or_else(|_| panic!("{run}"));
    assert_ne!(port, taken.port(), "{run}");
    // The port offered is one this test can take.
    std::net::TcpListener::bind(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{port}: {e}\n{run}"));
    drop(held);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A VS Code `${input:…}` without a default, in a `.vscode/mcp.json` read through `mcp_json`,
/// holds back only the server that uses it: check-config passes with a warning at its entry,
/// the gateway serves the others and says why that one is not started, in its log and in
/// `/status`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vs_code_input_without_a_default_holds_back_only_its_server() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("config-hygiene-input");
    std::fs::create_dir_all(dir.join(".vscode")).expect("a .vscode folder");
    let bin = crate::support::path_str(crate::support::test_server::test_server_bin());
    let json = write_in(
        &dir,
        ".vscode/mcp.json",
        &format!(
            "{{\n  \"inputs\": [\n    {{\"type\": \"promptString\", \"id\": \"api-key\", \"password\": true}}\n  ],\n  \
             \"servers\": {{\n    \"keyed\": {{\n      \"command\": {bin:?},\n      \"args\": [\"--name\", \"keyed\"],\n      \
             \"env\": {{\"KEY\": \"${{input:api-key}}\"}}\n    }},\n    \"plain\": {{\n      \"command\": {bin:?},\n      \
             \"args\": [\"--name\", \"plain\"]\n    }}\n  }}\n}}\n"
        ),
    );
    let port = crate::support::free_port();
    let text = format!("mcp_json = [\".vscode/mcp.json\"]\n\n[gateway]\nlisten = \"127.0.0.1:{port}\"\n");
    let main = write_in(&dir, "mcpmux.toml", &text);
    let reason = "not started: it needs API_KEY (needs_env), not set in mcpmux's environment; set it and \
                  restart mcpmux to serve it";

    let mut cmd = mcpmux(&["check-config", "--config", &main]);
    cmd.env_remove("API_KEY");
    let run = run_client(cmd, RUN_TIMEOUT);
    assert_eq!(run.status.code(), Some(0), "{run}");
    assert_eq!(
        problem_lines(&run),
        [format!("{json}:6: warning: servers.keyed is {reason}")],
        "{run}"
    );
    assert_eq!(
        run.stdout.trim_end(),
        "configuration OK: 1 server(s) (1 more waiting for a needs_env variable), 1 warning(s)",
        "{run}"
    );

    let mut gateway = crate::support::serve::ServeProcess::start_text(port, &dir, &text, &dir, &[]);
    let tools = gateway.wait_tools(&["plain__echo"]).await;
    assert!(!tools.iter().any(|t| t.starts_with("keyed__")), "{tools:?}");
    let text = reqwest::get(format!("http://127.0.0.1:{port}/status"))
        .await
        .expect("GET /status")
        .text()
        .await
        .expect("body");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(doc["disabled"], serde_json::json!(["keyed"]), "{doc}");
    assert_eq!(doc["disabled_reasons"]["keyed"], reason, "{doc}");
    let log = gateway.log();
    assert!(
        log.lines()
            .any(|l| l.contains(" WARN ") && l.ends_with(&format!("{json}:6: servers.keyed is {reason}"))),
        "{log}"
    );
    gateway.signal(libc::SIGTERM);
    assert!(gateway.wait_exit(Duration::from_secs(30)).await.success());
    let _ = std::fs::remove_dir_all(&dir);
}
