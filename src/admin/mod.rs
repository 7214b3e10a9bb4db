//! The operator endpoints (`/status`, `/healthz`, `/readyz`, the `/admin` page), on a router of
//! their own: served on the main listener, or only on `gateway.admin_listen` when it is set (never
//! behind `[auth]`: that listener belongs on a private address; a non-loopback one is warned about).

pub mod feed;
pub mod page;
pub mod reload;
pub mod status;

pub use status::router;
