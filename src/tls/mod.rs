//! TLS, both ways (toward upstreams: `client`): certificates, keys and CA bundles read from PEM files with problems that
//! name the file and the reason (`files`), the listeners' server configuration
//! (`server`) kept current as cert-manager rotates its files (`reloading`), the name a
//! client certificate gives its holder (`identity`), and how the operator commands trust the
//! certificate of their own configuration file (`pinned`). No I/O beyond reading those files.

pub mod client;
pub mod files;
pub mod identity;
pub mod pinned;
pub mod reloading;
pub mod server;

pub use files::{FileProblem, FileRole};
pub use reloading::ServerTls;
pub use server::{ServerFiles, ServerOptions};

#[cfg(test)]
pub(crate) mod test_certs;
#[cfg(test)]
mod tests;
