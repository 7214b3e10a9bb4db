//! One suite at a time: a test holds its suite's turn for as long as it runs; tests of the same
//! suite share the turn, a test of another suite waits until the last of them has ended.

use std::sync::{Condvar, Mutex, MutexGuard};

/// The suite whose tests are running (by module path) and how many of them are.
struct Turn {
    suite: Option<&'static str>,
    running: usize,
}

static TURN: Mutex<Turn> = Mutex::new(Turn {
    suite: None,
    running: 0,
});
static ENDED: Condvar = Condvar::new();

/// Held by a running test; dropping it (also when the test panics) ends the test's share.
pub struct SuiteTurn;

/// Wait until no other suite's test is running, then run as one of `suite`'s tests.
pub fn enter(suite: &'static str) -> SuiteTurn {
    let mut turn = lock();
    while turn.suite.is_some_and(|running| running != suite) {
        turn = ENDED.wait(turn).unwrap_or_else(|e| e.into_inner());
    }
    turn.suite = Some(suite);
    turn.running += 1;
    SuiteTurn
}

impl Drop for SuiteTurn {
    fn drop(&mut self) {
        let mut turn = lock();
        turn.running -= 1;
        if turn.running == 0 {
            turn.suite = None;
            ENDED.notify_all();
        }
    }
}

/// The turn, even if a test panicked while holding the lock (it never does anything that can).
fn lock() -> MutexGuard<'static, Turn> {
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}
