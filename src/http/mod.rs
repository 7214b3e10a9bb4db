//! The host-facing HTTP faces: the Streamable HTTP endpoint (session era and 2026-07-28), its
//! resumable SSE replies, modern listen streams, the legacy HTTP+SSE endpoints, access checks and
//! the operator endpoints.

pub mod legacy_sse;
pub mod listen;
pub mod modern;
pub mod origin;
pub mod resume;
pub mod status;
pub mod streamable;

pub use streamable::router;
