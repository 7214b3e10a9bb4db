//! Outbound identity: how mcpmux signs in to the upstream servers behind it. Per upstream one
//! provider (static headers, the MCP OAuth client flow, token exchange, client credentials, or
//! the host's own token when explicitly forwarded) answers, for a principal, the header of the
//! next request or "sign-in needed"; grants live sealed in the vault. `upstream/` asks for a
//! header and never knows which provider answered.

pub mod grant;
pub mod oauth;
pub mod vault;
