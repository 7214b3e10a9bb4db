//! The clock of a stdio server's opening: `handshake_timeout_secs` counts from the child's first
//! output on stdout, not from its spawn, so a first start that is still installing (`npx -y`, a
//! PyPI venv) is not killed as a failure; the wait for that first output is bounded too
//! ([`silence_bound`]), and said once at INFO when it outlasts the handshake timeout.
//!
//! An MCP server writes to stdout only to answer, so its first byte there means it runs and
//! reads its input: from then on the handshake is what it always was.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How many handshake timeouts a stdio child may stay silent on stdout after it is spawned
/// before it fails (30 s → 5 minutes: an `npx -y` or PyPI install on a slow machine).
pub const SILENCE_FACTOR: u32 = 10;

/// How long a stdio child may write nothing on stdout after its spawn.
pub fn silence_bound(handshake: Duration) -> Duration {
    handshake.saturating_mul(SILENCE_FACTOR)
}

/// The longest an opening can take at all: the silence, then the handshake.
pub fn opening_bound(handshake: Duration) -> Duration {
    silence_bound(handshake).saturating_add(handshake)
}

/// When a child first wrote on stdout (set once by its reader).
#[derive(Clone, Default)]
pub struct FirstOutput(Arc<Marked>);

#[derive(Default)]
struct Marked {
    at: OnceLock<Instant>,
    came: CancellationToken,
}

impl FirstOutput {
    /// Output came (the first call counts).
    pub fn mark(&self) {
        if self.0.at.set(Instant::now()).is_ok() {
            self.0.came.cancel();
        }
    }

    /// When output first came, if it did.
    pub fn at(&self) -> Option<Instant> {
        self.0.at.get().copied()
    }
}

/// Run `opening` within the server's `handshake` timeout: from the start for a transport without
/// a `first_output` (HTTP), else from the child's first output, which may take up to
/// [`silence_bound`] to come. `Err` says which limit ran out.
pub async fn bounded<F: Future>(
    name: &str,
    handshake: Duration,
    first_output: Option<FirstOutput>,
    opening: F,
) -> Result<F::Output, String> {
    let Some(first) = first_output else {
        let limit = tokio::time::timeout(handshake, opening).await;
        return limit.map_err(|_| super::opening::timed_out(handshake));
    };
    let start = Instant::now();
    let silence = silence_bound(handshake);
    tokio::pin!(opening);
    let mut noted = false;
    loop {
        if let Some(at) = first.at() {
            let limit = tokio::time::timeout_at(at + handshake, &mut opening).await;
            return limit.map_err(|_| {
                format!(
                    "no answer to the opening handshake within {} s of its first output \
                     (handshake_timeout_secs)",
                    handshake.as_secs()
                )
            });
        }
        tokio::select! {
            done = &mut opening => return Ok(done),
            _ = first.0.came.cancelled() => {}
            _ = tokio::time::sleep_until(start + handshake), if !noted => {
                noted = true;
                tracing::info!(
                    upstream = %name,
                    silent_secs = handshake.as_secs(),
                    waiting_up_to_secs = silence.as_secs(),
                    "still starting (installing?): nothing on stdout yet; handshake_timeout_secs \
                     counts from its first output, which may take up to {} s",
                    silence.as_secs()
                );
            }
            _ = tokio::time::sleep_until(start + silence) => {
                return Err(format!(
                    "wrote nothing on stdout within {} s of starting ({SILENCE_FACTOR} × \
                     handshake_timeout_secs): it did not start (for a first install that takes \
                     longer, raise handshake_timeout_secs)",
                    silence.as_secs()
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HANDSHAKE: Duration = Duration::from_secs(30);

    /// An opening that answers `after` its first output, which comes `output_at` after the start
    /// (never for `None`).
    async fn opening(output_at: Option<Duration>, after: Duration) -> Result<&'static str, String> {
        let first = FirstOutput::default();
        let server = first.clone();
        let answer = async move {
            match output_at {
                Some(at) => tokio::time::sleep(at).await,
                None => std::future::pending().await,
            }
            server.mark();
            tokio::time::sleep(after).await;
            "opened"
        };
        bounded("s", HANDSHAKE, Some(first), answer).await
    }

    /// `outcome` is a failure whose message says `want`.
    #[track_caller]
    fn assert_fails_saying(outcome: &Result<&str, String>, want: &str) {
        assert!(outcome.as_ref().is_err_and(|e| e.contains(want)), "{outcome:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn install_time_before_the_first_output_does_not_count_against_the_handshake() {
        let slow = opening(Some(Duration::from_secs(200)), Duration::from_secs(20)).await;
        assert_eq!(slow, Ok("opened"));
        // Output at once, then an answer slower than the handshake timeout: failed, as always.
        let stuck = opening(Some(Duration::ZERO), Duration::from_secs(31)).await;
        assert_fails_saying(&stuck, "within 30 s of its first output");
        let late = opening(Some(Duration::from_secs(100)), Duration::from_secs(31)).await;
        assert!(late.is_err(), "{late:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn silence_is_bounded() {
        let started = Instant::now();
        let silent = opening(None, Duration::ZERO).await;
        assert_eq!(started.elapsed(), silence_bound(HANDSHAKE));
        assert_fails_saying(&silent, "wrote nothing on stdout within 300 s");
        let just_in_time = opening(Some(Duration::from_secs(299)), Duration::from_secs(29)).await;
        assert_eq!(just_in_time, Ok("opened"));
        assert!(opening_bound(HANDSHAKE) >= Duration::from_secs(299 + 29));
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_first_output_signal_the_handshake_counts_from_the_start() {
        let http = bounded("h", HANDSHAKE, None, tokio::time::sleep(Duration::from_secs(31))).await;
        assert!(http.is_err_and(|e| e.contains("handshake_timeout_secs")));
        let quick = bounded("h", HANDSHAKE, None, async { 7 }).await;
        assert_eq!(quick, Ok(7));
    }
}
