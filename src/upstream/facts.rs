//! What a connection knows about its server once opened ([`ServerFacts`]), its lifecycle as
//! others see it ([`Status`]), and what connections learned about their server that outlives
//! each of them ([`Learned`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What a connection reports about the server once initialized.
#[derive(Debug, Clone)]
pub struct ServerFacts {
    pub protocol_version: String,
    pub capabilities: serde_json::Value,
    pub instructions: Option<String>,
    pub server_info: serde_json::Value,
}

impl ServerFacts {
    /// Whether the server declared a capability key (e.g. `"prompts"`).
    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.get(capability).is_some_and(|v| !v.is_null())
    }

    /// Whether the server speaks 2026-07-28.
    pub fn is_modern(&self) -> bool {
        self.protocol_version == crate::protocol::modern::MODERN_VERSION
    }

    /// Whether the server announces changes of a list (`listChanged: true`).
    pub fn announces_changes(&self, kind: crate::catalog::ListKind) -> bool {
        self.capabilities
            .pointer(&format!("/{}/listChanged", kind.capability()))
            .and_then(serde_json::Value::as_bool)
            == Some(true)
    }
}

/// The connection's lifecycle as others see it.
#[derive(Debug, Clone)]
pub enum Status {
    Starting,
    Ready(Arc<ServerFacts>),
    Down(String),
}

/// What connections learned about their server, kept by its slot across restarts.
#[derive(Debug, Default)]
pub struct Learned {
    /// The server exited on the `server/discover` probe (Python `mcp` 1.2 to 1.9.0 over stdio):
    /// it is opened with `initialize` alone from then on.
    probe_kills: AtomicBool,
    /// The latest connection speaks legacy HTTP+SSE (configured, or fallen back to).
    legacy_sse: AtomicBool,
}

impl Learned {
    pub fn probe_kills(&self) -> bool {
        self.probe_kills.load(Ordering::Relaxed)
    }

    pub fn set_probe_kills(&self) {
        self.probe_kills.store(true, Ordering::Relaxed);
    }

    pub fn legacy_sse(&self) -> bool {
        self.legacy_sse.load(Ordering::Relaxed)
    }

    pub fn set_legacy_sse(&self, legacy: bool) {
        self.legacy_sse.store(legacy, Ordering::Relaxed);
    }
}
