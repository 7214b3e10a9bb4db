//! How long each of an upstream's lists may be reused, as a modern (2026-07-28) upstream said
//! with `ttlMs`/`cacheScope` when mcpmux last fetched it; the lifetime left shrinks with age.

use super::ListKind;
use crate::protocol::modern_result::CacheHint;
use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// An expired list is fetched again at most this often, however many hosts ask.
const MIN_REFETCH_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy)]
struct Observed {
    hint: CacheHint,
    fetched: Instant,
}

/// The cache hints one upstream gave its lists.
#[derive(Debug, Default)]
pub struct ListFreshness {
    lists: Mutex<[Option<Observed>; 4]>,
}

impl ListFreshness {
    /// Remember the hint of a list just fetched (`None`: the upstream gave none).
    pub fn record(&self, kind: ListKind, hint: Option<CacheHint>, fetched: Instant) {
        self.lists.lock()[kind as usize] = hint.map(|hint| Observed { hint, fetched });
    }

    /// Forget every hint (the upstream went away).
    pub fn clear(&self) {
        *self.lists.lock() = [None; 4];
    }

    /// The upstream's hint for a list as of `now`: its lifetime less the list's age.
    pub fn remaining(&self, kind: ListKind, now: Instant) -> Option<CacheHint> {
        let observed = self.lists.lock()[kind as usize]?;
        let age = now.saturating_duration_since(observed.fetched).as_millis();
        let age = u64::try_from(age).unwrap_or(u64::MAX);
        Some(CacheHint {
            ttl_ms: observed.hint.ttl_ms.saturating_sub(age),
            private: observed.hint.private,
        })
    }

    /// Whether the list outlived the upstream's hint and was not fetched in the last moment:
    /// mcpmux should fetch it again.
    pub fn is_stale(&self, kind: ListKind, now: Instant) -> bool {
        let Some(observed) = self.lists.lock()[kind as usize] else {
            return false;
        };
        let age = now.saturating_duration_since(observed.fetched);
        age >= MIN_REFETCH_EVERY && age.as_millis() >= u128::from(observed.hint.ttl_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lifetime_left_shrinks_with_age_and_the_scope_is_kept() {
        let freshness = ListFreshness::default();
        let fetched = Instant::now();
        let hint = CacheHint {
            ttl_ms: 5_000,
            private: true,
        };
        freshness.record(ListKind::Tools, Some(hint), fetched);
        let later = fetched + Duration::from_millis(1_500);
        let left = freshness.remaining(ListKind::Tools, later);
        assert_eq!(left.map(|h| (h.ttl_ms, h.private)), Some((3_500, true)));
        assert!(!freshness.is_stale(ListKind::Tools, later));
        let expired = fetched + Duration::from_secs(6);
        assert_eq!(
            freshness.remaining(ListKind::Tools, expired).map(|h| h.ttl_ms),
            Some(0)
        );
        assert!(freshness.is_stale(ListKind::Tools, expired));
        assert!(freshness.remaining(ListKind::Prompts, later).is_none());
        freshness.clear();
        assert!(freshness.remaining(ListKind::Tools, later).is_none());
    }

    #[test]
    fn a_list_not_to_be_reused_is_refetched_at_most_once_a_second() {
        let freshness = ListFreshness::default();
        let fetched = Instant::now();
        freshness.record(ListKind::Resources, Some(CacheHint::NONE), fetched);
        assert!(!freshness.is_stale(ListKind::Resources, fetched + Duration::from_millis(200)));
        assert!(freshness.is_stale(ListKind::Resources, fetched + Duration::from_secs(1)));
    }
}
