//! Small helpers with no knowledge of MCP, shared by every part of the gateway: the backoff of
//! reconnect and restart loops, globs over exposed names, random hex ids, and host text clipped
//! for error messages.

pub mod backoff;
pub mod glob;
pub mod ids;
pub mod text;

pub use backoff::Backoff;
