//! Every input kept under `tests/fuzz-regressions/<target>/` (crash and hang inputs the fuzz
//! targets found, plus hand-picked tricky seeds) goes through the same checks as the fuzz
//! target of that name: the checks live in `fuzz/src/` and are compiled here too, so the stable
//! `cargo test` keeps every fixed crash fixed without needing nightly or cargo-fuzz.
//! See docs/fuzzing.md.

#[path = "../fuzz/src/lib.rs"]
mod fuzz_checks;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

/// Far above what any stored input needs now; `seed-template-many-variables.txt` would never
/// finish under the old backtracking template matcher (4 variables, 400 characters: 13 s).
const PER_INPUT: Duration = Duration::from_secs(10);

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz-regressions")
        .join(target);
    let mut out: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("directory entry").path();
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, bytes)
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no stored inputs in {}", dir.display());
    out
}

/// Run `check` on every stored input of `target`, then report every input that failed. Each
/// input runs on its own thread so that one that hangs fails the test instead of stalling it.
fn replay(target: &str, check: fn(&[u8])) {
    let mut failed = Vec::new();
    for (path, bytes) in inputs(target) {
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let (done, outcome) = mpsc::channel();
        std::thread::spawn(move || {
            let result = catch_unwind(AssertUnwindSafe(|| check(&bytes)));
            let _ = done.send(result.is_ok());
        });
        match outcome.recv_timeout(PER_INPUT) {
            Ok(true) => {}
            Ok(false) | Err(RecvTimeoutError::Disconnected) => failed.push(format!("{name}: panicked")),
            Err(RecvTimeoutError::Timeout) => {
                failed.push(format!("{name}: still running after {PER_INPUT:?}"))
            }
        }
    }
    assert!(failed.is_empty(), "{target}: {failed:#?}");
}

#[test]
fn message_inputs() {
    replay("message", fuzz_checks::message::check_message);
}

#[test]
fn sse_inputs() {
    replay("sse", fuzz_checks::sse::check_sse);
}

#[test]
fn config_inputs() {
    replay("config", fuzz_checks::config::check_config);
}
