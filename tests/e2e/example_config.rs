//! `config.example.toml` runs as-is, as the README says, from any working directory: the real
//! binary started from elsewhere serves all four real servers; relative paths follow the file,
//! and the filesystem server's tools reach only the folder made for them.

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
    drop(gateway);
}

/// The copy of the example goes away however the test ends.
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}
