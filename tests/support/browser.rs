//! A real browser for the admin page test: Debian's chromium (`scripts/install-debian.sh`,
//! installed once per process under the peers' lock) driven by `tests/clients/admin_page.mjs`
//! (npm `playwright-core`), one command per line.

use super::{peers, repo_root};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// No single browser step may take longer (a guard against hangs, not a performance check).
const STEP_LIMIT: Duration = Duration::from_secs(60);

/// Install chromium (once per process).
pub fn chromium() {
    super::debian::packages(&["chromium=chromium"]);
}

/// The page open in the browser.
pub struct AdminPage {
    child: Child,
    input: ChildStdin,
    output: Lines<BufReader<ChildStdout>>,
}

impl AdminPage {
    /// Open `url` (the admin page) in a new headless chromium.
    pub fn open(url: &str) -> AdminPage {
        chromium();
        let p = peers();
        let mut child = Command::new("node")
            .arg(repo_root().join("tests/clients/admin_page.mjs"))
            .arg(url)
            .env("MCPMUX_PLAYWRIGHT", &p.playwright_core_pkg)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs the browser driver");
        let input = child.stdin.take().expect("stdin");
        let output = BufReader::new(child.stdout.take().expect("stdout")).lines();
        AdminPage { child, input, output }
    }

    /// Run one command (see the driver's header); panics with the driver's answer when it fails.
    pub async fn run(&mut self, command: &str) {
        let step = async {
            self.input.write_all(format!("{command}\n").as_bytes()).await?;
            self.input.flush().await?;
            self.output.next_line().await
        };
        let answer = match tokio::time::timeout(STEP_LIMIT, step).await {
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None)) => "the driver ended".to_string(),
            Ok(Err(err)) => format!("the driver's pipes: {err}"),
            Err(_) => format!("no answer within {STEP_LIMIT:?}"),
        };
        let verb = command.split_whitespace().next().unwrap_or_default();
        assert_eq!(answer, format!("ok {verb}"), "browser step {command:?}");
    }

    /// Close the browser.
    pub async fn close(mut self) {
        let _ = self.input.write_all(b"quit\n").await;
        drop(self.input);
        let _ = tokio::time::timeout(STEP_LIMIT, self.child.wait()).await;
    }
}
