//! The host-facing side: the Streamable HTTP endpoint, sessions and their streams, routing.

pub mod forward;
pub mod http;
pub mod origin;
pub mod registry;
pub mod resume;
pub mod router;
pub mod session;

pub use registry::SessionRegistry;
