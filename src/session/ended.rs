//! Sessions taken over from another home and then ended here (DELETE, idle reaping): their
//! sealed ids would open again, so this process remembers them and refuses to take them over a
//! second time. A session whose home is this process needs no such memory (its boot id says so).
//! Bounded: a keyed 64-bit digest per id, kept for [`KEEP_FOR`], at most [`MAX_ENDED`].

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::time::{Duration, Instant};

/// How long an ended session's id stays refused here.
pub const KEEP_FOR: Duration = Duration::from_secs(24 * 60 * 60);
/// The most ended ids remembered; the oldest go first.
pub const MAX_ENDED: usize = 100_000;

/// Digests of the ids of taken-over sessions that ended here.
#[derive(Default)]
pub struct EndedIds {
    /// Random keys per process: the digests say nothing about the ids.
    hasher: std::collections::hash_map::RandomState,
    inner: Mutex<Ended>,
}

#[derive(Default)]
struct Ended {
    when: HashMap<u64, Instant>,
    order: VecDeque<(u64, Instant)>,
}

impl EndedIds {
    /// Remember that the session `id` ended here.
    pub fn record(&self, id: &str) {
        let digest = self.hasher.hash_one(id);
        let now = Instant::now();
        let mut ended = self.inner.lock();
        ended.prune(now);
        while ended.order.len() >= MAX_ENDED {
            ended.pop_oldest();
        }
        ended.when.insert(digest, now);
        ended.order.push_back((digest, now));
    }

    /// Whether the session `id` ended here (and must stay gone).
    pub fn contains(&self, id: &str) -> bool {
        let digest = self.hasher.hash_one(id);
        let ended = self.inner.lock();
        ended.when.get(&digest).is_some_and(|at| at.elapsed() < KEEP_FOR)
    }

    /// How many ids are remembered.
    pub fn len(&self) -> usize {
        self.inner.lock().when.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Ended {
    fn prune(&mut self, now: Instant) {
        while self
            .order
            .front()
            .is_some_and(|(_, at)| now.duration_since(*at) >= KEEP_FOR)
        {
            self.pop_oldest();
        }
    }

    fn pop_oldest(&mut self) {
        if let Some((digest, at)) = self.order.pop_front() {
            // Recorded again later: that newer entry stays.
            if self.when.get(&digest) == Some(&at) {
                self.when.remove(&digest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_what_ended_and_nothing_else() {
        let ended = EndedIds::default();
        assert!(!ended.contains("a"));
        ended.record("a");
        ended.record("a");
        assert!(ended.contains("a") && !ended.contains("b"));
        assert_eq!(ended.len(), 1);
    }

    #[test]
    fn is_bounded() {
        let ended = EndedIds::default();
        for i in 0..MAX_ENDED + 10 {
            ended.record(&i.to_string());
        }
        assert_eq!(ended.len(), MAX_ENDED);
        assert!(!ended.contains("0") && ended.contains(&(MAX_ENDED + 9).to_string()));
    }
}
