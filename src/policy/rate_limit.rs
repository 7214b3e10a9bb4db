//! The token buckets behind `rate_limit = "N/period"` of `[[policy]]` rules: one bucket per
//! principal per rule, with room for N requests, refilled evenly over the period. Pure state with
//! the clock passed in; the request pipeline asks it (core/rate_limit.rs).
//!
//! A bucket is one instant, the moment it is full again (the GCRA form of a token bucket), kept
//! in exact integer arithmetic (nanoseconds times N), so "3/min" lets exactly three requests
//! through at once and one more every 20 s. A full bucket is the same as no bucket, so full ones
//! are dropped (every [`SWEEP_EVERY`], and before a new principal would pass the cap): memory
//! stays bounded by the principals active within one period, at most [`MAX_PRINCIPALS`].

use crate::config::RateLimit;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The most principals with a bucket that is not full; beyond it a new principal is refused
/// until buckets refill (see [`Refusal::Full`]).
pub const MAX_PRINCIPALS: usize = 100_000;
/// How often full buckets are dropped while the map is below the cap.
pub const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// A request refused by a rule's limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Over `limit` of rule `rule` (of the limits that refused, the one with the longest wait).
    Limited {
        rule: usize,
        limit: RateLimit,
        /// Until one token is back in every bucket the request needs.
        retry_after: Duration,
    },
    /// [`MAX_PRINCIPALS`] principals have buckets that are not full: no room for another one
    /// until one of them is full again, `retry_after` from now.
    Full { retry_after: Duration },
}

/// One rule's bucket for one principal.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    rule: usize,
    limit: RateLimit,
    /// When the bucket is full again, in nanoseconds since the limiter's origin times N.
    full_at: u128,
}

#[derive(Debug, Default)]
struct Buckets {
    by_principal: HashMap<String, Vec<Bucket>>,
    /// The next routine sweep (origin-relative nanoseconds, unscaled).
    next_sweep: u128,
    /// No sweep can free anything before this (set when a sweep at the cap freed nothing).
    nothing_full_before: u128,
}

/// Every principal's buckets.
#[derive(Debug)]
pub struct RateLimiter {
    origin: Instant,
    buckets: Mutex<Buckets>,
    cap: usize,
}

impl Default for RateLimiter {
    fn default() -> Self {
        RateLimiter::new(MAX_PRINCIPALS)
    }
}

/// `limit`'s period and count in the bucket arithmetic: the period in nanoseconds, N.
fn terms(limit: RateLimit) -> (u128, u128) {
    (limit.per.duration().as_nanos(), u128::from(limit.requests.get()))
}

impl Bucket {
    fn new(rule: usize, limit: RateLimit) -> Bucket {
        Bucket {
            rule,
            limit,
            full_at: 0,
        }
    }

    /// How long until this bucket holds a token at `now` (zero: it holds one now). A token is
    /// there when the bucket is at most N-1 tokens short, each token being period/N.
    fn wait(&self, now: u128) -> Duration {
        let (period, n) = terms(self.limit);
        let now_scaled = now * n;
        let short = self.full_at.saturating_sub(now_scaled);
        let allowed = period * (n - 1);
        let over = short.saturating_sub(allowed);
        // `over` is in nanoseconds times N: round up to whole nanoseconds.
        nanos(over.div_ceil(n))
    }

    fn take(&mut self, now: u128) {
        let (period, n) = terms(self.limit);
        self.full_at = self.full_at.max(now * n) + period;
    }

    fn is_full(&self, now: u128) -> bool {
        self.full_at <= now * u128::from(self.limit.requests.get())
    }

    /// Nanoseconds (unscaled, origin-relative) at which it is full.
    fn full_time(&self) -> u128 {
        self.full_at.div_ceil(u128::from(self.limit.requests.get()))
    }
}

fn nanos(n: u128) -> Duration {
    let secs = u64::try_from(n / 1_000_000_000).unwrap_or(u64::MAX);
    // The remainder is below 10^9: it fits.
    Duration::new(secs, (n % 1_000_000_000) as u32)
}

impl RateLimiter {
    /// A limiter holding buckets for at most `cap` principals.
    pub fn new(cap: usize) -> RateLimiter {
        RateLimiter {
            origin: Instant::now(),
            buckets: Mutex::new(Buckets::default()),
            cap: cap.max(1),
        }
    }

    fn since_origin(&self, now: Instant) -> u128 {
        now.saturating_duration_since(self.origin).as_nanos()
    }

    /// Take one token from each of `limits` (rule index and limit) for principal `owner` at
    /// `now`, only if every one of them has one; otherwise take none and say how long to wait.
    pub fn admit(&self, owner: &str, limits: &[(usize, RateLimit)], now: Instant) -> Result<(), Refusal> {
        if limits.is_empty() {
            return Ok(());
        }
        let now = self.since_origin(now);
        let mut state = self.buckets.lock();
        if now >= state.next_sweep {
            state.sweep(now);
            state.next_sweep = now + SWEEP_EVERY.as_nanos();
        }
        if !state.by_principal.contains_key(owner) && state.by_principal.len() >= self.cap {
            if now >= state.nothing_full_before {
                state.sweep(now);
            }
            if state.by_principal.len() >= self.cap {
                let soonest = state.soonest_full().unwrap_or(now);
                state.nothing_full_before = soonest;
                return Err(Refusal::Full {
                    retry_after: nanos(soonest.saturating_sub(now)).max(Duration::from_nanos(1)),
                });
            }
        }
        let buckets = state.by_principal.entry(owner.to_string()).or_default();
        // A rule whose limit is not the bucket's any more starts afresh.
        buckets.retain(|b| {
            limits
                .iter()
                .all(|(rule, limit)| b.rule != *rule || b.limit == *limit)
        });
        for &(rule, limit) in limits {
            if !buckets.iter().any(|b| b.rule == rule) {
                buckets.push(Bucket::new(rule, limit));
            }
        }
        let needed = || {
            buckets
                .iter()
                .filter(|b| limits.iter().any(|(rule, _)| *rule == b.rule))
        };
        let longest = needed()
            .map(|b| (b.wait(now), b))
            .filter(|(wait, _)| !wait.is_zero())
            .max_by_key(|(wait, _)| *wait);
        if let Some((retry_after, bucket)) = longest {
            return Err(Refusal::Limited {
                rule: bucket.rule,
                limit: bucket.limit,
                retry_after,
            });
        }
        for bucket in buckets.iter_mut() {
            if limits.iter().any(|(rule, _)| *rule == bucket.rule) {
                bucket.take(now);
            }
        }
        Ok(())
    }

    /// Keep only the buckets of rules whose limit is still `limit_of(rule)` (the policy was
    /// replaced: a rule whose limit changed, or that is gone, starts afresh).
    pub fn retain_rules(&self, limit_of: impl Fn(usize) -> Option<RateLimit>) {
        let mut state = self.buckets.lock();
        state.by_principal.retain(|_, buckets| {
            buckets.retain(|b| limit_of(b.rule) == Some(b.limit));
            !buckets.is_empty()
        });
    }

    /// How many principals have buckets.
    pub fn principals(&self) -> usize {
        self.buckets.lock().by_principal.len()
    }
}

impl Buckets {
    /// Drop every full bucket (the same as none) and every principal left without one.
    fn sweep(&mut self, now: u128) {
        self.by_principal.retain(|_, buckets| {
            buckets.retain(|b| !b.is_full(now));
            !buckets.is_empty()
        });
    }

    /// When the first principal's buckets are all full again.
    fn soonest_full(&self) -> Option<u128> {
        (self.by_principal.values())
            .map(|buckets| buckets.iter().map(Bucket::full_time).max().unwrap_or(0))
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RatePeriod;
    use std::num::NonZeroU32;

    fn limit(text: &str) -> RateLimit {
        RateLimit::parse(text).expect("a rate limit")
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// How many requests pass at `at` in a row.
    fn burst(limiter: &RateLimiter, owner: &str, limits: &[(usize, RateLimit)], at: Instant) -> usize {
        (0..1000)
            .take_while(|_| limiter.admit(owner, limits, at).is_ok())
            .count()
    }

    #[test]
    fn a_full_bucket_lets_its_count_through_then_one_per_interval() {
        let limiter = RateLimiter::default();
        let t0 = Instant::now();
        let rules = [(0, limit("3/min"))];
        assert_eq!(burst(&limiter, "a", &rules, t0), 3);
        let refused = limiter.admit("a", &rules, t0).expect_err("over");
        assert_eq!(
            refused,
            Refusal::Limited {
                rule: 0,
                limit: limit("3/min"),
                retry_after: secs(20)
            }
        );
        // 19.9 s later still nothing; at 20 s exactly one token.
        let early = t0 + Duration::from_millis(19_900);
        match limiter.admit("a", &rules, early) {
            Err(Refusal::Limited { retry_after, .. }) => assert_eq!(retry_after, Duration::from_millis(100)),
            other => panic!("{other:?}"),
        }
        assert_eq!(burst(&limiter, "a", &rules, t0 + secs(20)), 1);
        // A whole period idle refills to the count, never beyond it.
        assert_eq!(burst(&limiter, "a", &rules, t0 + secs(3600)), 3);
    }

    #[test]
    fn counts_that_do_not_divide_the_period_are_exact() {
        let limiter = RateLimiter::default();
        let t0 = Instant::now();
        for (i, text) in ["7/min", "1/hour", "1000/sec", "4294967295/hour"]
            .into_iter()
            .enumerate()
        {
            let rules = [(i, limit(text))];
            let owner = format!("p{i}");
            let n = limit(text).requests.get() as usize;
            if n <= 1000 {
                assert_eq!(burst(&limiter, &owner, &rules, t0), n, "{text}");
            }
        }
        // 7/min: a token every 60/7 s = 8.571428572 s (rounded up to the nanosecond).
        let seven = [(0, limit("7/min"))];
        match limiter.admit("p0", &seven, t0) {
            Err(Refusal::Limited { retry_after, .. }) => {
                assert_eq!(retry_after, Duration::from_nanos(8_571_428_572))
            }
            other => panic!("{other:?}"),
        }
        assert!(limiter
            .admit("p0", &seven, t0 + Duration::from_nanos(8_571_428_571))
            .is_err());
        assert!(limiter
            .admit("p0", &seven, t0 + Duration::from_nanos(8_571_428_572))
            .is_ok());
    }

    #[test]
    fn principals_and_rules_have_buckets_of_their_own() {
        let limiter = RateLimiter::default();
        let t0 = Instant::now();
        let one = [(0, limit("1/min"))];
        assert!(limiter.admit("a", &one, t0).is_ok());
        assert!(limiter.admit("a", &one, t0).is_err());
        assert!(
            limiter.admit("b", &one, t0).is_ok(),
            "another principal is not affected"
        );
        assert!(
            limiter.admit("a", &[(1, limit("1/min"))], t0).is_ok(),
            "another rule's bucket"
        );
        assert!(limiter.admit("a", &[], t0).is_ok(), "no limit applies");
    }

    #[test]
    fn several_limits_take_a_token_from_each_only_when_all_have_one() {
        let limiter = RateLimiter::default();
        let t0 = Instant::now();
        let both = [(0, limit("2/min")), (3, limit("5/hour"))];
        assert_eq!(burst(&limiter, "a", &both, t0), 2);
        // Refused by the 2/min rule: the 5/hour bucket kept its three tokens.
        match limiter.admit("a", &both, t0) {
            Err(Refusal::Limited {
                rule, retry_after, ..
            }) => assert_eq!((rule, retry_after), (0, secs(30))),
            other => panic!("{other:?}"),
        }
        assert_eq!(burst(&limiter, "a", &[(3, limit("5/hour"))], t0), 3);
        // Now both are empty: the longest wait (12 min for 5/hour) is the one given.
        match limiter.admit("a", &both, t0 + secs(60)) {
            Err(Refusal::Limited {
                rule, retry_after, ..
            }) => assert_eq!((rule, retry_after), (3, secs(12 * 60 - 60))),
            other => panic!("{other:?}"),
        }
        // The 2/min bucket was not drained by that refusal either.
        assert_eq!(burst(&limiter, "a", &[(0, limit("2/min"))], t0 + secs(60)), 2);
    }

    #[test]
    fn a_changed_limit_starts_afresh_and_the_others_keep_their_state() {
        let limiter = RateLimiter::default();
        let t0 = Instant::now();
        let rules = [(0, limit("1/min")), (1, limit("1/hour"))];
        assert!(limiter.admit("a", &rules, t0).is_ok());
        // The policy is replaced: rule 0 now says 2/min, rule 1 is unchanged.
        let new = [limit("2/min"), limit("1/hour")];
        limiter.retain_rules(|rule| new.get(rule).copied());
        assert_eq!(burst(&limiter, "a", &[(0, new[0])], t0), 2, "reset");
        assert!(limiter.admit("a", &[(1, new[1])], t0).is_err(), "kept");
        // A rule gone from the policy takes its buckets with it.
        limiter.retain_rules(|_| None);
        assert_eq!(limiter.principals(), 0);
        // A limit that differs from the bucket's at admission also starts afresh.
        assert!(limiter.admit("a", &[(0, limit("1/min"))], t0).is_ok());
        assert!(limiter.admit("a", &[(0, limit("1/sec"))], t0).is_ok());
    }

    #[test]
    fn memory_is_bounded_full_buckets_are_dropped_and_a_full_map_refuses_newcomers() {
        let limiter = RateLimiter::new(2);
        let t0 = Instant::now();
        let rules = [(0, limit("1/min"))];
        assert!(limiter.admit("a", &rules, t0).is_ok());
        assert!(limiter.admit("b", &rules, t0 + secs(30)).is_ok());
        // Both buckets are in use: a third principal waits until the first is full again.
        match limiter.admit("c", &rules, t0 + secs(40)) {
            Err(Refusal::Full { retry_after }) => assert_eq!(retry_after, secs(20)),
            other => panic!("{other:?}"),
        }
        // Principals already known still get their answer.
        assert!(limiter.admit("a", &rules, t0 + secs(40)).is_err());
        // Once a's bucket is full it is dropped and c takes its place.
        assert!(limiter.admit("c", &rules, t0 + secs(60)).is_ok());
        assert_eq!(limiter.principals(), 2);
        // Idle full buckets go at the routine sweep.
        let idle = t0 + secs(60) + SWEEP_EVERY + secs(60);
        assert!(limiter.admit("d", &[], idle).is_ok());
        assert!(limiter.admit("d", &rules, idle).is_ok());
        assert_eq!(limiter.principals(), 1, "only d's bucket is not full");
    }

    #[test]
    fn the_largest_count_and_period_do_not_overflow() {
        let limiter = RateLimiter::default();
        let huge = RateLimit {
            requests: NonZeroU32::MAX,
            per: RatePeriod::Hour,
        };
        let t0 = Instant::now();
        let far = t0 + Duration::from_secs(100 * 365 * 24 * 3600);
        assert!(limiter.admit("a", &[(0, huge)], far).is_ok());
    }
}
