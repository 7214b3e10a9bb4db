//! Cross-cutting HTTP concerns as tower layers, applied around the host faces and the operator
//! endpoints by the composition root: the Host/Origin check ([`access`]), request tracing
//! ([`trace`]). Handlers behind them deal with MCP alone.

pub mod access;
pub mod origin;
pub mod trace;
