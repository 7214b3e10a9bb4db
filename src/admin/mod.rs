//! The operator endpoints (`/status`, `/healthz`, `/readyz`), on a router of their own: served
//! on the main listener, or only on `gateway.admin_listen` when it is set (never behind `[auth]`:
//! that listener belongs on a private address; a non-loopback one is warned about). `/metrics`
//! and the `/admin` page are served beside them behind the operator rule of [`access`] (with
//! `[auth]` and no `admin_listen`: a principal `[[policy]]` allows `mcpmux:admin`), and so are
//! `GET /pins` and `POST /pins/approve` (pinned tool definitions that drifted).

pub mod access;
pub mod feed;
pub mod grants;
pub mod metrics;
pub mod page;
pub mod pins;
pub mod reload;
pub mod sign_in;
pub mod status;

pub use status::router;
