//! The process tree on Windows: the child and everything it starts run in a job object that
//! Windows ends whole when its last handle closes ([`KillOnCloseJob`]), so nothing outlives
//! mcpmux even when mcpmux itself is killed. The child is created suspended and resumed once it
//! is in the job, so nothing it starts escapes. It gets no share of mcpmux's console
//! (`CREATE_NO_WINDOW`): a Ctrl-C there reaches mcpmux only, which then stops its servers in
//! order, and a mcpmux without a console opens no console window per server. The staged stop:
//! close stdin, wait, terminate the job (whatever is left of the tree).
//!
//! process-wrap's own `JobObject` is not used: its wrappers cannot see each other while the
//! command spawns (watchexec/process-wrap#35), so it never sets kill-on-close and drops the
//! creation flags. The wrapper here needs no other.

use super::windows_job::{resume_threads, KillOnCloseJob};
use process_wrap::tokio::{TokioChildWrapper, TokioCommandWrap, TokioCommandWrapper};
use std::io;
use std::time::Duration;
use tokio::process::{Child, Command};
use windows_sys::Win32::System::Threading::{CREATE_NO_WINDOW, CREATE_SUSPENDED};

/// How long a child may take to exit after stdin closes, and to be reaped once its job is ended.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Start the command's child in a kill-on-close job of its own.
pub(in crate::upstream) fn contain(cmd: &mut TokioCommandWrap) {
    cmd.wrap(InKillOnCloseJob);
}

/// A spawned child's job (the child wrapper holds the job's handle).
#[derive(Debug, Clone, Copy)]
pub(in crate::upstream) struct ProcessTree;

impl ProcessTree {
    /// The job `child` runs in.
    pub fn of(_child: &dyn TokioChildWrapper) -> ProcessTree {
        ProcessTree
    }

    /// Once the child's stdin is closed: wait for it to exit, then end its job, which ends the
    /// child if it is still running and anything it started that is.
    pub async fn stop(self, name: &str, child: &mut Box<dyn TokioChildWrapper>) {
        let exited = tokio::time::timeout(EXIT_GRACE, Box::into_pin(child.wait())).await;
        match exited {
            Ok(_) => tracing::info!(upstream = %name, "stdio upstream exited after stdin closed"),
            Err(_) => tracing::warn!(
                upstream = %name,
                grace_secs = EXIT_GRACE.as_secs(),
                "stdio upstream did not exit after stdin closed; terminating its job"
            ),
        }
        if let Err(err) = child.start_kill() {
            tracing::warn!(upstream = %name, %err, "terminating the job of the stdio upstream failed");
        }
        if exited.is_err() {
            let _ = tokio::time::timeout(EXIT_GRACE, Box::into_pin(child.wait())).await;
            tracing::info!(upstream = %name, "stdio upstream stopped");
        }
    }
}

/// The command wrapper: created suspended and without a console share, put in a new
/// kill-on-close job, then resumed. A child that cannot be put in its job is killed (tokio's
/// kill-on-drop) and the spawn fails.
#[derive(Debug)]
struct InKillOnCloseJob;

impl TokioCommandWrapper for InKillOnCloseJob {
    fn pre_spawn(&mut self, command: &mut Command, _core: &TokioCommandWrap) -> io::Result<()> {
        command
            .creation_flags(CREATE_SUSPENDED | CREATE_NO_WINDOW)
            .kill_on_drop(true);
        Ok(())
    }

    fn wrap_child(
        &mut self,
        child: Box<dyn TokioChildWrapper>,
        _core: &TokioCommandWrap,
    ) -> io::Result<Box<dyn TokioChildWrapper>> {
        let (Some(process), Some(pid)) = (child.inner().raw_handle(), child.id()) else {
            return Err(io::Error::other("the child ended before it started"));
        };
        let job = KillOnCloseJob::new()?;
        job.assign(process)?;
        resume_threads(pid)?;
        Ok(Box::new(JobChild { inner: child, job }))
    }
}

/// A child with its job: killing it terminates the job, dropping it closes the job (which ends
/// whatever is left in it).
#[derive(Debug)]
struct JobChild {
    inner: Box<dyn TokioChildWrapper>,
    job: KillOnCloseJob,
}

impl TokioChildWrapper for JobChild {
    fn inner(&self) -> &Child {
        self.inner.inner()
    }

    fn inner_mut(&mut self) -> &mut Child {
        self.inner.inner_mut()
    }

    /// The bare child, without its job: the job closes here, which ends the child's tree.
    fn into_inner(self: Box<Self>) -> Child {
        self.inner.into_inner()
    }

    fn start_kill(&mut self) -> io::Result<()> {
        self.job.terminate()
    }
}
