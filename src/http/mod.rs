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

// The session and protocol-version headers as names: a lookup by `&str` parses and checks the
// name at every request.
const SESSION_HEADER: http::HeaderName = http::HeaderName::from_static(crate::protocol::HEADER_SESSION_ID);
const VERSION_HEADER: http::HeaderName =
    http::HeaderName::from_static(crate::protocol::modern::HEADER_PROTOCOL_VERSION);

/// A request without a session that speaks a revision after the session era (a modern
/// client's): it has no standalone stream or session to end (GET and DELETE are 405 for it).
fn modern_only(headers: &http::HeaderMap) -> bool {
    !headers.contains_key(&SESSION_HEADER)
        && headers
            .get(&VERSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| !crate::protocol::version::is_supported(v.trim()))
}

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
