//! Host sessions: one session's state ([`host`]), the registry of live sessions, the resumable
//! streams of forwarded calls, the sealed ids a session hands its host, and the modern hosts'
//! listen streams. This is the host side as upstream connections see it, through the traits
//! `upstream` owns.

pub mod ended;
pub mod host;
pub mod host_tokens;
pub mod listeners;
pub mod registry;
pub mod sealed_id;
pub mod state;
pub mod streams;
pub mod views;

pub use host::Session;
pub use host_tokens::HostTokens;
pub use registry::SessionRegistry;
pub use sealed_id::{SessionClaims, SessionIds};
pub use state::SessionState;
