//! A stdio server's process tree: what it starts (`npx` → `node`) is held with it, so stopping the
//! server stops all of it, and no part of it is left behind when mcpmux ends. [`contain`] sets a
//! command up before it is spawned; [`ProcessTree::stop`] is the staged stop once its stdin is
//! closed. Unix holds the tree in a process group, Windows in a job object.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(super) use unix::{contain, ProcessTree};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
mod windows_job;
#[cfg(windows)]
pub(super) use windows::{contain, ProcessTree};
