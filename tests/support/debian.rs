//! Debian packages a suite drives for real (load balancers, Prometheus, chromium), installed by
//! `scripts/install-debian.sh` once per process under the peers' lock.

use super::{repo_root, under_file_lock};
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// Install Debian packages once per process (`scripts/install-debian.sh`, under the peers' lock),
/// each given as `PACKAGE=COMMAND[,COMMAND]`; panics with the script's message where that is
/// impossible (not root, no apt-get).
pub fn packages(specs: &'static [&'static str]) {
    static DONE: Mutex<Vec<&'static [&'static str]>> = Mutex::new(Vec::new());
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    if done.contains(&specs) {
        return;
    }
    let root = repo_root();
    let script = root.join("scripts").join("install-debian.sh");
    under_file_lock(&root.join("target").join("peers.lock"), || {
        let out = Command::new("bash")
            .arg(&script)
            .args(specs)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
        assert!(
            out.status.success(),
            "{} {specs:?} failed ({}):\n{}{}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
    });
    done.push(specs);
}
