//! An upstream's identity: its name in the configuration (the key of `[servers.NAME]`). It
//! survives a reload, so slots, catalog items, per-session connections and supervisors are keyed
//! by it, never by a position in the file.

use std::fmt;
use std::sync::Arc;

/// The id of a configured upstream (cheap to clone and compare).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UpstreamId(Arc<str>);

impl UpstreamId {
    pub fn new(name: &str) -> Self {
        UpstreamId(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for UpstreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for UpstreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<&str> for UpstreamId {
    fn from(name: &str) -> Self {
        UpstreamId::new(name)
    }
}
