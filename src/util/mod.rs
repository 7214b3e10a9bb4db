//! Small helpers with no knowledge of MCP, shared by every part of the gateway: the backoff of
//! reconnect and restart loops, and random hex ids.

pub mod backoff;
pub mod ids;

pub use backoff::Backoff;
