//! Sealing: what mcpmux hands a host and must get back unchanged (list cursors, `requestState`,
//! session ids, SSE event ids, server-to-client request ids) is encrypted and authenticated with
//! the cluster key, so any replica holding the key can open it and nothing else can forge it.
//! Pure: no I/O but the system random generator for nonces and fresh keys.
//!
//! [`ClusterKey`] is one `[cluster]` key (base64 of 32 bytes); [`Sealer`] seals with the current
//! key and opens with it or a previous one; [`Purpose`] keeps one kind of token from being opened
//! as another.

mod key;
mod sealer;

pub use key::{ClusterKey, KeyError};
pub use sealer::{Purpose, SealError, Sealer};
