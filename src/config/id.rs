//! An upstream's identity: its name in the configuration (the key of `[servers.NAME]`). It
//! survives a reload, so slots, catalog items, per-session connections and supervisors are keyed
//! by it, never by a position in the file. Its hash is computed once, so looking an upstream up
//! by id on every call costs a few instructions ([`IdMap`]).

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;

/// The id of a configured upstream (cheap to clone, hash and compare).
#[derive(Clone)]
pub struct UpstreamId {
    name: Arc<str>,
    hash: u64,
}

impl UpstreamId {
    pub fn new(name: &str) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        name.hash(&mut hasher);
        UpstreamId {
            name: name.into(),
            hash: hasher.finish(),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.name
    }
}

impl PartialEq for UpstreamId {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && (Arc::ptr_eq(&self.name, &other.name) || self.name == other.name)
    }
}

impl Eq for UpstreamId {}

impl Hash for UpstreamId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl PartialOrd for UpstreamId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for UpstreamId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.name.cmp(&other.name)
    }
}

impl fmt::Display for UpstreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl fmt::Debug for UpstreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.name, f)
    }
}

impl From<&str> for UpstreamId {
    fn from(name: &str) -> Self {
        UpstreamId::new(name)
    }
}

/// Hashes an [`UpstreamId`] by the hash it carries.
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only ids are hashed here, through `write_u64`; fold anything else in all the same.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A map keyed by upstream id.
pub type IdMap<V> = HashMap<UpstreamId, V, BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_their_names() {
        let a = UpstreamId::new("docs");
        assert_eq!(a, UpstreamId::from("docs"));
        assert_ne!(a, UpstreamId::new("doc"));
        let mut map: IdMap<u8> = IdMap::default();
        map.insert(a.clone(), 1);
        assert_eq!(map.get(&UpstreamId::new("docs")), Some(&1));
        assert_eq!(map.get(&UpstreamId::new("other")), None);
        assert_eq!(a.to_string(), "docs");
    }
}
