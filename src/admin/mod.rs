//! The operator endpoints (`/status`, `/healthz`, `/readyz`), on a router of their own so they
//! can move to a listener of their own.

pub mod status;

pub use status::router;
