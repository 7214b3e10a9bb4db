//! The host-facing side: the Streamable HTTP endpoint (and the legacy HTTP+SSE endpoints),
//! sessions and their streams, routing.

pub mod forward;
pub mod http;
pub mod input_bridge;
pub mod input_required;
pub mod legacy_sse;
pub mod listen;
pub mod origin;
pub mod registry;
pub mod request_state;
pub mod resume;
pub mod router;
pub mod session;
pub mod stateless;
pub mod status;

pub use registry::SessionRegistry;
