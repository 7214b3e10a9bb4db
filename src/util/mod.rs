//! Small helpers with no knowledge of MCP, shared by every part of the gateway: the backoff of
//! reconnect and restart loops.

pub mod backoff;

pub use backoff::Backoff;
