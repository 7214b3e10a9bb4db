//! The operator endpoints (`/status`, `/healthz`, `/readyz`), on a router of their own: served
//! on the main listener, or only on `gateway.admin_listen` when it is set (never behind `[auth]`:
//! that listener belongs on a private address; a non-loopback one is warned about).

pub mod reload;
pub mod status;

pub use status::router;
