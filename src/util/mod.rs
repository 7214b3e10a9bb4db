//! Small helpers with no knowledge of MCP, shared by every part of the gateway: the backoff of
//! reconnect and restart loops, the hash maps of the request path, globs over exposed names, the lean HTTP client and the HTTP/1.1 pools of plain-HTTP origins, random hex ids,
//! scope hierarchies, the CLI's `--url` of a running gateway, URLs whose password is never shown, and host text clipped for error messages.
//! Where Unix and Windows differ: which system's rules apply (`platform`), files only their owner
//! reads (`private_files`), and what tells a file's versions apart (`file_stamp`).

pub mod backoff;
pub mod fast_map;
pub mod file_stamp;
pub mod glob;
pub mod http1_pool;
pub mod http_client;
pub mod ids;
pub mod operator_url;
pub mod platform;
pub mod private_files;
pub mod scope;
pub mod secret_url;
pub mod text;

pub use backoff::Backoff;
