//! The latest failed host requests, kept for the admin page: a bounded ring, newest last, each
//! with its time, method, exposed name (only when the catalog has it), upstream and `error.type`;
//! never an argument, a token or a session id.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::time::SystemTime;

/// How many failures are kept.
pub const KEPT: usize = 50;

/// One failed host request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailedRequest {
    pub at: SystemTime,
    pub method: &'static str,
    /// The tool or prompt, when the catalog has it.
    pub name: Option<String>,
    pub upstream: Option<String>,
    /// Its `error.type`: the JSON-RPC code, `tool_error` or `timeout`.
    pub error: String,
}

/// The ring of the latest failures.
#[derive(Debug, Default)]
pub struct RecentErrors {
    ring: Mutex<VecDeque<FailedRequest>>,
}

impl RecentErrors {
    pub fn note(&self, failure: FailedRequest) {
        let mut ring = self.ring.lock();
        if ring.len() == KEPT {
            ring.pop_front();
        }
        ring.push_back(failure);
    }

    /// The failures kept, oldest first.
    pub fn all(&self) -> Vec<FailedRequest> {
        self.ring.lock().iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_the_latest() {
        let recent = RecentErrors::default();
        for i in 0..KEPT + 5 {
            recent.note(FailedRequest {
                at: SystemTime::now(),
                method: "tools/call",
                name: None,
                upstream: None,
                error: format!("{i}"),
            });
        }
        let all = recent.all();
        assert_eq!(all.len(), KEPT);
        assert_eq!(all[0].error, "5");
        assert_eq!(all[KEPT - 1].error, format!("{}", KEPT + 4));
    }
}
