//! What of a session can be sealed into a token and opened again by any replica: the negotiated
//! version, the client's capabilities and info, and its log level. Everything else a session
//! has (its streams, in-flight calls, server-to-client requests, own connections) lives only in
//! the process that holds it.

use crate::protocol::ClientCaps;
use serde::{Deserialize, Serialize};

/// A session's movable state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionState {
    /// The negotiated protocol version (2026-07-28 for a modern request's throwaway session).
    pub protocol_version: String,
    pub caps: ClientCaps,
    /// The `clientInfo` the host sent, as it sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_info: Option<serde_json::Value>,
    /// The least severe log level the host wants (its rank in `protocol::logging::LOG_LEVELS`;
    /// one past the last: none at all); absent: every message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<usize>,
    /// The `[profiles.NAME]` whose endpoint opened the session (it is used there only); `None`:
    /// the main endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

impl SessionState {
    /// A fresh session's state.
    pub fn new(protocol_version: impl Into<String>, caps: ClientCaps) -> Self {
        SessionState {
            protocol_version: protocol_version.into(),
            caps,
            client_info: None,
            log_level: None,
            profile: None,
        }
    }

    /// Opened at the endpoint of profile `profile` (`None`: the main endpoint).
    pub fn in_profile(mut self, profile: Option<&str>) -> Self {
        self.profile = profile.map(str::to_string);
        self
    }

    /// With the `clientInfo` the host sent.
    pub fn with_client_info(mut self, client_info: Option<serde_json::Value>) -> Self {
        self.client_info = client_info;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_survives_a_round_trip_through_json() {
        let mut state = SessionState::new("2025-11-25", ClientCaps::ALL).with_client_info(Some(
            serde_json::json!({"name": "inspector", "version": "2.12.0"}),
        ));
        state.log_level = Some(3);
        let json = serde_json::to_string(&state).unwrap();
        assert_eq!(serde_json::from_str::<SessionState>(&json).unwrap(), state);
        let bare = serde_json::to_string(&SessionState::new("2025-06-18", ClientCaps::default())).unwrap();
        assert!(
            !bare.contains("client_info") && !bare.contains("log_level") && !bare.contains("profile"),
            "{bare}"
        );
    }
}
