//! Exponential backoff with jitter for every reconnect and restart loop: the step starts at a
//! minimum, doubles after each attempt up to a maximum, and each wait adds a random extra so
//! connections that failed together do not retry in lockstep.

use std::time::Duration;

/// The largest extra wait, as a fraction of the current step (1/`JITTER_DIVISOR`).
const JITTER_DIVISOR: u32 = 4;

/// The delays of one retry loop. [`Backoff::next_delay`] gives the wait before the next attempt:
/// the current step plus a random extra of up to a quarter of it (and at most the cap set with
/// [`Backoff::with_jitter_cap`]); the step then doubles, never beyond the maximum. The extra is
/// added, never taken off, so no wait is shorter than its step.
#[derive(Clone, Debug)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    step: Duration,
    jitter_cap: Option<Duration>,
}

impl Backoff {
    /// Steps from `min` doubling to `max` (a `max` below `min` counts as `min`).
    pub fn new(min: Duration, max: Duration) -> Self {
        Backoff {
            min,
            max: max.max(min),
            step: min,
            jitter_cap: None,
        }
    }

    /// No extra wait longer than `cap`, however long the step.
    pub fn with_jitter_cap(mut self, cap: Duration) -> Self {
        self.jitter_cap = Some(cap);
        self
    }

    /// The step the next delay is based on (without its jitter).
    pub fn step(&self) -> Duration {
        self.step
    }

    /// The wait before the next attempt; the step then grows.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.step + self.jitter();
        self.step = self.step.saturating_mul(2).min(self.max);
        delay
    }

    /// Start over from the minimum (after a success, or a connection that stayed up long).
    pub fn reset(&mut self) {
        self.step = self.min;
    }

    /// Go straight to the maximum (a crash loop).
    pub fn jump_to_max(&mut self) {
        self.step = self.max;
    }

    /// The largest extra wait for the current step.
    fn max_jitter(&self) -> Duration {
        let extra = self.step / JITTER_DIVISOR;
        match self.jitter_cap {
            Some(cap) => extra.min(cap),
            None => extra,
        }
    }

    fn jitter(&self) -> Duration {
        let bound = u64::try_from(self.max_jitter().as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rand::random_range(0..=bound))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn doubles_from_min_up_to_max() {
        let mut backoff = Backoff::new(SECOND, 30 * SECOND);
        let steps: Vec<u64> = (0..8)
            .map(|_| {
                let step = backoff.step();
                backoff.next_delay();
                step.as_secs()
            })
            .collect();
        assert_eq!(steps, [1, 2, 4, 8, 16, 30, 30, 30]);
    }

    #[test]
    fn reset_starts_over_and_jump_goes_to_max() {
        let mut backoff = Backoff::new(Duration::from_millis(250), 8 * SECOND);
        for _ in 0..3 {
            backoff.next_delay();
        }
        assert_eq!(backoff.step(), 2 * SECOND);
        backoff.reset();
        assert_eq!(backoff.step(), Duration::from_millis(250));
        backoff.jump_to_max();
        assert_eq!(backoff.step(), 8 * SECOND);
        backoff.next_delay();
        assert_eq!(backoff.step(), 8 * SECOND, "the maximum is kept");
    }

    #[test]
    fn jitter_stays_within_a_quarter_of_the_step_and_varies() {
        let mut delays = Vec::new();
        for _ in 0..200 {
            let mut backoff = Backoff::new(4 * SECOND, 60 * SECOND);
            let delay = backoff.next_delay();
            assert!(
                delay >= 4 * SECOND && delay <= 5 * SECOND,
                "{delay:?} outside [4 s, 5 s]"
            );
            delays.push(delay);
        }
        delays.sort();
        delays.dedup();
        assert!(delays.len() > 100, "jitter barely varies: {delays:?}");
    }

    #[test]
    fn jitter_respects_its_cap() {
        let mut backoff = Backoff::new(SECOND, 30 * SECOND).with_jitter_cap(Duration::from_millis(250));
        backoff.jump_to_max();
        for _ in 0..200 {
            let delay = backoff.next_delay();
            assert!(
                delay >= 30 * SECOND && delay <= 30 * SECOND + Duration::from_millis(250),
                "{delay:?}"
            );
        }
    }

    #[test]
    fn a_max_below_the_min_counts_as_the_min() {
        let mut backoff = Backoff::new(2 * SECOND, SECOND);
        backoff.next_delay();
        assert_eq!(backoff.step(), 2 * SECOND);
    }
}
