//! What mcpmux reports of one configured upstream (`/status`, `mcpmux status`): its phase, how
//! often it was restarted and why it last failed (marked as past once it is ready again); and
//! crash-loop detection: too many failures in a short window put it in the `crash-loop` phase,
//! where restarts wait the longest backoff.

pub use crate::status_doc::Phase;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime};

/// Failures within [`CRASH_LOOP_WINDOW`] that make a crash loop.
pub const CRASH_LOOP_FAILURES: usize = 5;
pub const CRASH_LOOP_WINDOW: Duration = Duration::from_secs(120);
/// What a failure the upstream has recovered from is prefixed with in the report.
pub const PAST_ERROR: &str = "past (ready again): ";
/// How many of its latest failures an upstream keeps, with their times (the admin page's recent
/// errors).
pub const FAILURE_HISTORY: usize = 10;

/// A copy of the state for reporting.
#[derive(Clone, Debug)]
pub struct StateReport {
    pub phase: Phase,
    pub restarts: u64,
    /// Why it last failed; prefixed with [`PAST_ERROR`] once it was ready again since.
    pub last_error: Option<String>,
    /// Seconds since the phase began.
    pub for_secs: u64,
}

#[derive(Debug)]
struct Inner {
    phase: Phase,
    since: Instant,
    restarts: u64,
    last_error: Option<String>,
    /// The upstream was ready again after `last_error`.
    recovered: bool,
    failures: VecDeque<Instant>,
    /// The latest failures, oldest first, at most [`FAILURE_HISTORY`].
    history: VecDeque<(SystemTime, String)>,
}

#[derive(Debug)]
pub struct UpstreamState {
    inner: Mutex<Inner>,
}

impl Default for UpstreamState {
    fn default() -> Self {
        UpstreamState {
            inner: Mutex::new(Inner {
                phase: Phase::Starting,
                since: Instant::now(),
                restarts: 0,
                last_error: None,
                recovered: false,
                failures: VecDeque::new(),
                history: VecDeque::new(),
            }),
        }
    }
}

impl UpstreamState {
    fn enter(inner: &mut Inner, phase: Phase, now: Instant) {
        if inner.phase != phase {
            inner.phase = phase;
            inner.since = now;
        }
    }

    /// A start attempt begins (the first, or a restart).
    pub fn starting(&self) {
        let mut inner = self.inner.lock();
        if inner.phase != Phase::Starting {
            inner.restarts += 1;
        }
        Self::enter(&mut inner, Phase::Starting, Instant::now());
    }

    pub fn ready(&self) {
        let mut inner = self.inner.lock();
        inner.recovered = true;
        Self::enter(&mut inner, Phase::Ready, Instant::now());
    }

    /// Waiting for a person to sign in (an `oauth` upstream without a grant).
    pub fn needs_authorization(&self) {
        Self::enter(&mut self.inner.lock(), Phase::NeedsAuthorization, Instant::now());
    }

    pub fn stopped(&self) {
        Self::enter(&mut self.inner.lock(), Phase::Stopped, Instant::now());
    }

    /// The upstream failed to start or its connection ended; returns the phase it is now in
    /// (`crash-loop` once [`CRASH_LOOP_FAILURES`] failures fall within [`CRASH_LOOP_WINDOW`]).
    pub fn failed(&self, reason: &str, now: Instant) -> Phase {
        let mut inner = self.inner.lock();
        inner.last_error = Some(reason.to_string());
        inner.recovered = false;
        if inner.history.len() == FAILURE_HISTORY {
            inner.history.pop_front();
        }
        inner.history.push_back((SystemTime::now(), reason.to_string()));
        inner.failures.push_back(now);
        while inner
            .failures
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) > CRASH_LOOP_WINDOW)
        {
            inner.failures.pop_front();
        }
        let phase = if inner.failures.len() >= CRASH_LOOP_FAILURES {
            Phase::CrashLoop
        } else {
            Phase::Restarting
        };
        Self::enter(&mut inner, phase, now);
        phase
    }

    /// Its latest failures with their times, oldest first.
    pub fn failure_history(&self) -> Vec<(SystemTime, String)> {
        self.inner.lock().history.iter().cloned().collect()
    }

    pub fn report(&self) -> StateReport {
        let inner = self.inner.lock();
        StateReport {
            phase: inner.phase,
            restarts: inner.restarts,
            last_error: (inner.last_error.as_ref()).map(|e| match inner.recovered {
                true => format!("{PAST_ERROR}{e}"),
                false => e.clone(),
            }),
            for_secs: inner.since.elapsed().as_secs(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_failures_are_kept_with_their_times_and_bounded() {
        let state = UpstreamState::default();
        assert!(state.failure_history().is_empty());
        let before = SystemTime::now();
        for i in 0..FAILURE_HISTORY + 3 {
            state.failed(&format!("exit {i}"), Instant::now());
        }
        let history = state.failure_history();
        assert_eq!(history.len(), FAILURE_HISTORY);
        assert_eq!(history[0].1, "exit 3", "the oldest ones went first");
        assert_eq!(
            history[FAILURE_HISTORY - 1].1,
            format!("exit {}", FAILURE_HISTORY + 2)
        );
        assert!(history.iter().all(|(at, _)| *at >= before));
    }

    #[test]
    fn five_failures_in_two_minutes_are_a_crash_loop() {
        let state = UpstreamState::default();
        let t0 = Instant::now();
        for i in 0..4 {
            state.starting();
            assert_eq!(
                state.failed("exit 1", t0 + Duration::from_secs(i * 10)),
                Phase::Restarting
            );
        }
        state.starting();
        assert_eq!(
            state.failed("exit 1", t0 + Duration::from_secs(40)),
            Phase::CrashLoop
        );
        let report = state.report();
        assert_eq!(report.phase, Phase::CrashLoop);
        assert_eq!(report.last_error.as_deref(), Some("exit 1"));
        assert_eq!(report.restarts, 4);
    }

    #[test]
    fn failures_spread_out_are_not_a_crash_loop() {
        let state = UpstreamState::default();
        let t0 = Instant::now();
        for i in 0..10 {
            let at = t0 + Duration::from_secs(i * 60);
            assert_eq!(state.failed("exit 1", at), Phase::Restarting);
        }
        state.ready();
        assert_eq!(state.report().phase, Phase::Ready);
    }

    #[test]
    fn a_failure_is_current_until_the_upstream_is_ready_again() {
        let state = UpstreamState::default();
        assert_eq!(state.report().last_error, None);
        state.failed("connection refused", Instant::now());
        assert_eq!(state.report().last_error.as_deref(), Some("connection refused"));
        state.starting();
        assert_eq!(state.report().last_error.as_deref(), Some("connection refused"));
        state.ready();
        assert_eq!(
            state.report().last_error.as_deref(),
            Some("past (ready again): connection refused")
        );
        state.failed("exit 1", Instant::now());
        assert_eq!(state.report().last_error.as_deref(), Some("exit 1"));
    }
}
