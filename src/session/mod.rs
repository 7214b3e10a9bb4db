//! Host sessions: one session's state ([`host`]), the registry of live sessions, the resumable
//! streams of forwarded calls, and the modern hosts' listen streams. This is the host side as
//! upstream connections see it, through the traits `upstream` owns.

pub mod ended;
pub mod host;
pub mod listeners;
pub mod registry;
pub mod sealed_id;
pub mod state;
pub mod streams;
pub mod views;

pub use host::Session;
pub use registry::SessionRegistry;
pub use sealed_id::{SessionClaims, SessionIds};
pub use state::SessionState;
