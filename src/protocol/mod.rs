//! The pure MCP/JSON-RPC codec: parse frames into a thin envelope, edit single fields, serialise.
//! No I/O and no async here; this is the fuzz and benchmark target.

pub mod client_caps;
pub mod codes;
pub mod framing;
pub mod logging;
pub mod message;
pub mod modern;
pub mod modern_params;
pub mod modern_result;
pub mod raw_object;
pub mod sse;
pub mod version;

pub use client_caps::ClientCaps;
pub use message::{parse_body, Body, Message, ParseError, RequestId, ResponsePayload};
pub use raw_object::RawObject;

/// The header of the session era's session id (`Mcp-Session-Id`), on both faces.
pub const HEADER_SESSION_ID: &str = "mcp-session-id";
