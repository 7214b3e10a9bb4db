//! MCP protocol revisions mcpmux understands, and how it negotiates them.

/// Session-era revisions mcpmux serves and speaks, newest first.
pub const SESSION_ERA_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];

/// The revision mcpmux prefers when it opens a session with an upstream.
pub const LATEST_SESSION_ERA: &str = "2025-11-25";

/// The revision assumed when an HTTP request carries no `MCP-Protocol-Version` header.
pub const DEFAULT_NEGOTIATED: &str = "2025-03-26";

/// Revisions an upstream may answer `initialize` with and still be served by mcpmux.
pub const UPSTREAM_ACCEPTED_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Whether `version` is a session-era revision mcpmux serves to hosts.
pub fn is_supported(version: &str) -> bool {
    SESSION_ERA_VERSIONS.contains(&version)
}

/// Pick the version to answer a host's `initialize` with: echo it when supported, else the newest.
pub fn negotiate(requested: &str) -> &'static str {
    SESSION_ERA_VERSIONS
        .iter()
        .copied()
        .find(|v| *v == requested)
        .unwrap_or(LATEST_SESSION_ERA)
}

/// Whether batches (JSON arrays) are allowed for a negotiated version (only 2025-03-26).
pub fn allows_batches(version: &str) -> bool {
    version == "2025-03-26" || version == "2024-11-05"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_echoes_known_and_falls_back_to_newest() {
        assert_eq!(negotiate("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate("1999-01-01"), LATEST_SESSION_ERA);
        assert!(is_supported("2025-03-26"));
        assert!(!is_supported("2024-11-05"));
        assert!(allows_batches("2025-03-26"));
        assert!(!allows_batches("2025-11-25"));
    }
}
