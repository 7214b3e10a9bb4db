//! Cross-cutting HTTP concerns as tower layers, applied around the host faces and the operator
//! endpoints by the composition root: the Host/Origin check ([`access`]), request tracing
//! ([`trace`]), `Connection: close` once a stop began ([`closing`]); and the peer address each
//! connection's requests are served with ([`peer`]). Handlers behind them deal with MCP alone.

pub mod access;
pub mod closing;
pub mod origin;
pub mod peer;
pub mod trace;
