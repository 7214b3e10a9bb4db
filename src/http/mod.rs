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

/// The profile a request to the main endpoints (Streamable HTTP and legacy) is served as: the
/// first whose `match` holds for its headers or principal (`core::profile_choice`).
fn matched_profile(
    hub: &crate::core::hub::Hub,
    headers: &axum::http::HeaderMap,
    who: Option<&crate::auth::Principal>,
) -> Option<std::sync::Arc<str>> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    crate::core::profile_choice::matched(&hub.config(), header, who)
}
