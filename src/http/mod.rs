//! The host-facing HTTP faces: the Streamable HTTP endpoint (session era and 2026-07-28), its
//! resumable SSE replies, modern listen streams and the legacy HTTP+SSE endpoints.

pub mod legacy_sse;
pub mod listen;
pub mod modern;
pub mod oauth_callback;
pub mod resume;
pub mod standalone;
pub mod streamable;

pub use streamable::router;

/// Why a new session, stream or call is refused once a stop began (in-flight calls drain).
const SHUTTING_DOWN: &str = "mcpmux is shutting down";
