//! Upstream MCP servers: one actor task per connection (stdio child, Streamable HTTP or legacy
//! HTTP+SSE client) that owns its pending map, a supervisor per configured server, and the pool
//! of them all. Hosts are seen only through [`host::HostLink`] and [`host::HostEvents`], traits
//! this module owns; nothing here names a host-side type.

#[cfg(test)]
mod actor_tests;
mod attribution;
mod call;
pub mod call_channel;
pub mod child_env;
mod coalesce;
mod connection;
mod facts;
mod handle;
mod handshake;
mod health;
pub mod host;
mod http;
mod http_clients;
mod http_endpoint;
mod http_post;
mod http_reply;
mod http_sse;
mod inbound;
mod legacy_link;
mod legacy_sse;
mod listen;
mod opening;
pub mod personal;
mod personal_upstream;
pub mod pool;
mod process_tree;
pub mod reconcile;
pub mod server_requests;
pub mod sign_in_wait;
mod startup;
pub mod state;
mod stdio;
pub mod supervisor;
pub mod ties;
pub mod tunables;

pub use call::{CallEvent, CallFailure, CallOrigin, CallParams, Command, OutboundCall};
pub use connection::{spawn_connection, ConnectionContext, ConnectionEvent};
pub use facts::{Learned, ServerFacts, Status};
pub use handle::UpstreamHandle;
pub use pool::{UpstreamSlot, Upstreams};

use crate::protocol::message::parse_message;
use crate::protocol::Message;

/// Capacity of a connection's command queue: beyond it, calls fail fast as overloaded.
pub const COMMAND_QUEUE: usize = 1024;
/// Capacity of one call's event queue (notifications and server requests riding its stream).
pub const CALL_EVENT_QUEUE: usize = 64;

/// Parse one frame received from an upstream.
pub(crate) fn parse_frame(name: &str, text: &str) -> Option<Message> {
    match parse_message(text) {
        Ok(msg) => Some(msg),
        Err(err) => {
            let preview: String = text.chars().take(200).collect();
            tracing::warn!(upstream = %name, %err, line = %preview, "skipping a frame that is not a JSON-RPC message");
            None
        }
    }
}
