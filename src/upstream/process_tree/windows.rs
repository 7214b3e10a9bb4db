//! The process tree on Windows: the child and everything it starts run in a job object that
//! Windows ends whole when its last handle closes (`JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`), so
//! nothing outlives mcpmux even when mcpmux itself is killed. The child gets no share of
//! mcpmux's console (`CREATE_NO_WINDOW`): a Ctrl-C there reaches mcpmux only, which then stops
//! its servers in order, and a mcpmux run without a console opens no console window per server.
//! The staged stop: close stdin, wait, terminate the job (whatever is left of the tree).

use process_wrap::tokio::{CreationFlags, JobObject, KillOnDrop, TokioChildWrapper, TokioCommandWrap};
use std::time::Duration;
use windows::Win32::System::Threading::CREATE_NO_WINDOW;

/// How long a child may take to exit after stdin closes, and to be reaped once its job is ended.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Start the command's child in a job object of its own (suspended until it is in the job, so
/// nothing it starts escapes), ended whole when mcpmux lets go of it.
pub(in crate::upstream) fn contain(cmd: &mut TokioCommandWrap) {
    // `CreationFlags` before `JobObject`: the job's wrapper adds its own flag to these.
    cmd.wrap(CreationFlags(CREATE_NO_WINDOW))
        .wrap(JobObject)
        .wrap(KillOnDrop);
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
        // TerminateJobObject: an empty job is fine, a job with processes left ends now.
        if let Err(err) = child.start_kill() {
            tracing::warn!(upstream = %name, %err, "terminating the job of the stdio upstream failed");
        }
        if exited.is_err() {
            let _ = tokio::time::timeout(EXIT_GRACE, Box::into_pin(child.wait())).await;
            tracing::info!(upstream = %name, "stdio upstream stopped");
        }
    }
}
