//! The Win32 calls behind a stdio server's job on Windows: a job object that ends every process
//! in it when its last handle closes (`JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`), and resuming a
//! child that was created suspended so that it is in the job before it can start anything.

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle, RawHandle};
use windows_sys::Win32::Foundation::{HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, Thread32First, Thread32Next, TH32CS_SNAPTHREAD, THREADENTRY32,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JobObjectExtendedLimitInformation, SetInformationJobObject,
    TerminateJobObject, JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
};
use windows_sys::Win32::System::Threading::{OpenThread, ResumeThread, THREAD_SUSPEND_RESUME};

/// The exit code of the processes a terminated job ends.
const TERMINATED_EXIT_CODE: u32 = 1;

/// A job whose processes all end when it is dropped (its only handle closes), or at once by
/// [`KillOnCloseJob::terminate`].
#[derive(Debug)]
pub(super) struct KillOnCloseJob {
    handle: OwnedHandle,
}

impl KillOnCloseJob {
    pub fn new() -> io::Result<KillOnCloseJob> {
        // SAFETY: no attributes and no name: a new anonymous job, not inheritable; null on failure.
        let raw = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if raw.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a handle just opened here and owned by nothing else.
        let handle = unsafe { OwnedHandle::from_raw_handle(raw as RawHandle) };
        let job = KillOnCloseJob { handle };
        // SAFETY: a plain C struct of integers, for which all zeroes is "no limit".
        let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        let size = std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32;
        // SAFETY: the job handle is open; `limits` is the struct this class reads, `size` long.
        let set = unsafe {
            SetInformationJobObject(
                job.raw(),
                JobObjectExtendedLimitInformation,
                (&limits as *const JOBOBJECT_EXTENDED_LIMIT_INFORMATION).cast(),
                size,
            )
        };
        match set {
            0 => Err(io::Error::last_os_error()),
            _ => Ok(job),
        }
    }

    /// Put the process behind `process` (a handle of the caller's) in the job.
    pub fn assign(&self, process: RawHandle) -> io::Result<()> {
        // SAFETY: both handles are open for the length of the call.
        match unsafe { AssignProcessToJobObject(self.raw(), process as HANDLE) } {
            0 => Err(io::Error::last_os_error()),
            _ => Ok(()),
        }
    }

    /// End every process in the job now (an empty job is fine).
    pub fn terminate(&self) -> io::Result<()> {
        // SAFETY: the job handle is open.
        match unsafe { TerminateJobObject(self.raw(), TERMINATED_EXIT_CODE) } {
            0 => Err(io::Error::last_os_error()),
            _ => Ok(()),
        }
    }

    fn raw(&self) -> HANDLE {
        self.handle.as_raw_handle() as HANDLE
    }
}

/// Resume every thread of the process `pid` (one created suspended has just its first one).
pub(super) fn resume_threads(pid: u32) -> io::Result<()> {
    // SAFETY: a snapshot of every thread of the system; INVALID_HANDLE_VALUE on failure.
    let raw = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    if raw == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a handle just opened here and owned by nothing else.
    let snapshot = unsafe { OwnedHandle::from_raw_handle(raw as RawHandle) };
    // SAFETY: a plain C struct of integers; dwSize is set before it is read.
    let mut entry: THREADENTRY32 = unsafe { std::mem::zeroed() };
    entry.dwSize = std::mem::size_of::<THREADENTRY32>() as u32;
    let mut resumed = 0;
    // SAFETY: the snapshot is open and `entry` says its own size.
    let mut more = unsafe { Thread32First(snapshot.as_raw_handle() as HANDLE, &mut entry) } != 0;
    while more {
        if entry.th32OwnerProcessID == pid {
            resume_thread(entry.th32ThreadID)?;
            resumed += 1;
        }
        // SAFETY: as for Thread32First.
        more = unsafe { Thread32Next(snapshot.as_raw_handle() as HANDLE, &mut entry) } != 0;
    }
    match resumed {
        0 => Err(io::Error::other(format!("no thread of process {pid} to resume"))),
        _ => Ok(()),
    }
}

fn resume_thread(thread_id: u32) -> io::Result<()> {
    // SAFETY: opens the thread for suspend/resume only, not inheritable; null on failure.
    let raw = unsafe { OpenThread(THREAD_SUSPEND_RESUME, 0, thread_id) };
    if raw.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a handle just opened here and owned by nothing else.
    let thread = unsafe { OwnedHandle::from_raw_handle(raw as RawHandle) };
    // SAFETY: the thread handle is open with THREAD_SUSPEND_RESUME.
    match unsafe { ResumeThread(thread.as_raw_handle() as HANDLE) } {
        u32::MAX => Err(io::Error::last_os_error()),
        _ => Ok(()),
    }
}
