//! How the real `mcpmux` binary starts stdio servers (real server-everything): with a minimal
//! environment plus the server's own `env` (its `get-env` tool shows what it got) unless
//! `inherit_env = true`; in the config file's directory, relative paths taken from there
//! whatever directory mcpmux runs in; and a missing `cwd` named as such.

use crate::support::mcp::RawSession;
use crate::support::serve::ServeProcess;
use crate::support::{path_str, peers, scratch_dir};
use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// A variable of mcpmux's environment that looks like a secret.
const SECRET_VAR: &str = "MCPMUX_TEST_SECRET_TOKEN";
/// Upper bound for the upstream that cannot start to have a recorded error.
const ERROR_TIMEOUT: Duration = Duration::from_secs(20);

async fn everything_js() -> String {
    let js = tokio::task::spawn_blocking(|| peers().everything_js.clone())
        .await
        .expect("peer installation panicked");
    path_str(&js)
}

/// `dir/scripts/everything.sh`, an executable script that runs server-everything over stdio.
fn write_script(dir: &Path, everything_js: &str) {
    let scripts = dir.join("scripts");
    fs::create_dir_all(&scripts).expect("create scripts dir");
    let script = scripts.join("everything.sh");
    fs::write(&script, format!("#!/bin/sh\nexec node '{everything_js}' stdio\n")).expect("write script");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).expect("chmod script");
}

/// The environment server `name` reports through its `get-env` tool.
async fn env_of(session: &RawSession, name: &str) -> serde_json::Map<String, Value> {
    let text = session.tool_text(&format!("{name}__get-env"), json!({})).await;
    match serde_json::from_str(&text) {
        Ok(Value::Object(env)) => env,
        _ => panic!("{name}: get-env answered {text}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_servers_get_a_minimal_environment_unless_inherit_env() {
    let _suite = crate::suite::enter(module_path!());
    let js = everything_js().await;
    let dir = scratch_dir("child-env");
    let servers = format!(
        "[servers.minimal]\ncommand = \"node\"\nargs = [{js:?}, \"stdio\"]\nenv = {{ OWN_VAR = \"mine\" }}\n\n\
         [servers.inherits]\ncommand = \"node\"\nargs = [{js:?}, \"stdio\"]\nenv = {{ OWN_VAR = \"mine\" }}\n\
         inherit_env = true\n"
    );
    let mut gw = ServeProcess::start(&dir, "", &servers, &dir, &[(SECRET_VAR, "s3cret")]);
    gw.wait_tools(&["minimal__get-env", "inherits__get-env"]).await;
    let session = RawSession::open(&gw.url(), json!({})).await;

    let minimal = env_of(&session, "minimal").await;
    assert!(
        !minimal.contains_key(SECRET_VAR),
        "the secret leaked: {minimal:?}"
    );
    assert!(
        !minimal.contains_key("RUST_LOG"),
        "mcpmux's own variable leaked: {minimal:?}"
    );
    assert_eq!(minimal.get("OWN_VAR"), Some(&json!("mine")), "{minimal:?}");
    assert!(minimal.contains_key("PATH"), "{minimal:?}");

    let inherits = env_of(&session, "inherits").await;
    assert_eq!(inherits.get(SECRET_VAR), Some(&json!("s3cret")), "{inherits:?}");
    assert_eq!(inherits.get("OWN_VAR"), Some(&json!("mine")), "{inherits:?}");
    session.delete().await;
    gw.signal(libc::SIGTERM);
    assert!(
        gw.wait_exit(Duration::from_secs(30)).await.success(),
        "{}",
        gw.log()
    );
    let _ = fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relative_paths_follow_the_config_file_and_a_missing_cwd_is_named() {
    let _suite = crate::suite::enter(module_path!());
    let js = everything_js().await;
    let dir = scratch_dir("relative-paths");
    write_script(&dir, &js);
    // mcpmux runs somewhere else than the config file.
    let elsewhere = scratch_dir("relative-paths-elsewhere");
    let servers = "[servers.args]\ncommand = \"sh\"\nargs = [\"scripts/everything.sh\"]\n\n\
                   [servers.cwd]\ncommand = \"./everything.sh\"\ncwd = \"scripts\"\n\n\
                   [servers.gone]\ncommand = \"node\"\ncwd = \"no-such-dir\"\n";
    let mut gw = ServeProcess::start(&dir, "", servers, &elsewhere, &[]);
    gw.wait_tools(&["args__echo", "cwd__echo"]).await;

    let deadline = Instant::now() + ERROR_TIMEOUT;
    let gone = loop {
        let body = reqwest::get(format!("http://127.0.0.1:{}/status", gw.port))
            .await
            .expect("GET /status")
            .text()
            .await
            .expect("status body");
        let status: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        let gone = (status["upstreams"].as_array().into_iter().flatten())
            .find(|u| u["name"] == "gone")
            .cloned()
            .unwrap_or_else(|| panic!("no upstream 'gone' in {status}"));
        if gone["last_error"].is_string() || Instant::now() >= deadline {
            break gone;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let error = gone["last_error"].as_str().unwrap_or_default();
    let missing = dir.join("no-such-dir");
    assert!(
        error.contains(&format!("working directory {} does not exist", missing.display())),
        "{gone}"
    );
    gw.signal(libc::SIGTERM);
    assert!(
        gw.wait_exit(Duration::from_secs(30)).await.success(),
        "{}",
        gw.log()
    );
    let _ = fs::remove_dir_all(&dir);
    let _ = fs::remove_dir_all(&elsewhere);
}
