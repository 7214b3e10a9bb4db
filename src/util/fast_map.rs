//! Hash maps on the request path whose keys mcpmux makes or bounds itself (the request ids it
//! assigns, the exposed names of a catalog, the session ids it issued, a session's bounded
//! in-flight calls): foldhash, seeded per map, instead of SipHash. SipHash of a sealed
//! session id alone cost a thousand instructions per request (docs/profiling.md).

/// A `HashMap` with foldhash; make one with `FastMap::default()`.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// The hasher of [`FastMap`], for maps of other kinds (a `DashMap`).
pub type FastState = foldhash::fast::RandomState;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_again_and_maps_are_seeded_apart() {
        let mut map: FastMap<String, usize> = FastMap::default();
        for i in 0..1000 {
            map.insert(format!("e__tool_{i}"), i);
        }
        assert_eq!(map.get("e__tool_417"), Some(&417));
        assert_eq!(map.get("e__tool_1000"), None);
        use std::hash::BuildHasher;
        let (a, b) = (FastState::default(), FastState::default());
        let differ = (0..8).any(|i| a.hash_one(i) != b.hash_one(i));
        assert!(differ, "two maps' seeds give the same hashes");
    }
}
