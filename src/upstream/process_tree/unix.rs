//! The process tree on Unix: the child leads a process group of its own (so a terminal's Ctrl-C
//! reaches mcpmux, which stops the child in order), and the staged stop signals the whole group:
//! close stdin, wait, SIGTERM, wait, SIGKILL.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use process_wrap::tokio::{KillOnDrop, ProcessGroup, TokioChildWrapper, TokioCommandWrap};
use std::time::Duration;

/// How long a child may take to exit after stdin closes, and after SIGTERM.
const EXIT_GRACE: Duration = Duration::from_secs(2);
const TERM_GRACE: Duration = Duration::from_secs(3);

/// Make the command's child the leader of a new process group, killed when dropped.
pub(in crate::upstream) fn contain(cmd: &mut TokioCommandWrap) {
    cmd.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
}

/// A spawned child's process group (its id is the child's).
#[derive(Debug, Clone, Copy)]
pub(in crate::upstream) struct ProcessTree {
    pgid: Option<Pid>,
}

impl ProcessTree {
    /// The group `child` leads.
    pub fn of(child: &dyn TokioChildWrapper) -> ProcessTree {
        let pgid = child.id().and_then(|p| i32::try_from(p).ok()).map(Pid::from_raw);
        ProcessTree { pgid }
    }

    /// Once the child's stdin is closed: wait, SIGTERM the group, wait, SIGKILL the group.
    pub async fn stop(self, name: &str, child: &mut Box<dyn TokioChildWrapper>) {
        let exited = tokio::time::timeout(EXIT_GRACE, Box::into_pin(child.wait())).await;
        let Some(pgid) = self.pgid else { return };
        if exited.is_ok() && !group_alive(pgid) {
            tracing::info!(upstream = %name, "stdio upstream exited after stdin closed");
            return;
        }
        signal_group(pgid, Signal::SIGTERM);
        let deadline = tokio::time::Instant::now() + TERM_GRACE;
        while group_alive(pgid) && tokio::time::Instant::now() < deadline {
            let _ = child.try_wait();
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        if group_alive(pgid) {
            tracing::warn!(upstream = %name, "process group ignored SIGTERM; sending SIGKILL");
            signal_group(pgid, Signal::SIGKILL);
        }
        let _ = tokio::time::timeout(EXIT_GRACE, Box::into_pin(child.wait())).await;
        tracing::info!(upstream = %name, "stdio upstream stopped");
    }
}

/// Signal every process of the group; a group already gone (`ESRCH`) is fine.
fn signal_group(pgid: Pid, signal: Signal) {
    let _ = killpg(pgid, signal);
}

/// Whether any process of the group is left (signal 0 only checks).
fn group_alive(pgid: Pid) -> bool {
    killpg(pgid, None).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    fn spawn_sh(script: &str) -> (Box<dyn TokioChildWrapper>, Pid) {
        let mut cmd = TokioCommandWrap::with_new("sh", |c| {
            c.args(["-c", script]).stdin(Stdio::piped());
        });
        contain(&mut cmd);
        let child = cmd.spawn().expect("sh starts");
        let pgid = ProcessTree::of(&*child).pgid.expect("a process group");
        (child, pgid)
    }

    #[tokio::test]
    async fn the_group_is_probed_and_signalled() {
        let (mut child, pgid) = spawn_sh("exec sleep 30");
        assert!(group_alive(pgid));
        signal_group(pgid, Signal::SIGTERM);
        let status = Box::into_pin(child.wait()).await.expect("wait");
        assert!(!status.success(), "{status}");
        assert!(!group_alive(pgid));
        signal_group(pgid, Signal::SIGKILL); // an absent group is fine
    }

    #[tokio::test]
    async fn stop_kills_a_group_that_ignores_sigterm() {
        // The ignored SIGTERM survives `exec`: only SIGKILL ends this child.
        let (mut child, pgid) = spawn_sh("trap '' TERM; exec sleep 30");
        child.stdin().take();
        let started = std::time::Instant::now();
        ProcessTree::of(&*child).stop("t", &mut child).await;
        assert!(
            started.elapsed() >= EXIT_GRACE + TERM_GRACE,
            "{:?}",
            started.elapsed()
        );
        assert!(!group_alive(pgid));
    }
}
