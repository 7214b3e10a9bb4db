//! The latest validated bearer token each principal presented to the gateway, for the upstreams
//! that exchange it (`token_exchange`) or send it on (`forward`). Memory only, never logged,
//! bounded: past [`MAX_PRINCIPALS`] the principal heard from longest ago is forgotten, and an
//! expired token is dropped when met. Principals are the readable names of grant keys (`&str`:
//! this layer knows nothing of `auth`).

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The most principals whose token is kept.
pub const MAX_PRINCIPALS: usize = 10_000;

/// One principal's latest inbound token (a secret: `Debug` shows no token).
#[derive(Clone, PartialEq, Eq)]
pub struct Inbound {
    pub token: Arc<str>,
    /// Unix seconds, when the token said.
    pub expires_at: Option<u64>,
}

impl Inbound {
    fn expired(&self, now: u64) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }
}

impl std::fmt::Debug for Inbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbound")
            .field("token", &"[redacted]")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// The tokens, and in which order they were noted (oldest first).
#[derive(Default)]
struct Tokens {
    by_principal: HashMap<String, (Inbound, u64)>,
    by_age: BTreeMap<u64, String>,
    next: u64,
}

/// The latest inbound token per principal.
pub struct InboundTokens {
    tokens: Mutex<Tokens>,
    capacity: usize,
}

impl Default for InboundTokens {
    fn default() -> Self {
        InboundTokens::with_capacity(MAX_PRINCIPALS)
    }
}

impl InboundTokens {
    pub fn with_capacity(capacity: usize) -> InboundTokens {
        InboundTokens {
            tokens: Mutex::default(),
            capacity: capacity.max(1),
        }
    }

    /// `principal` presented `token` (validated; `expires_at` in unix seconds) at `now`.
    pub fn note(&self, principal: &str, token: &str, expires_at: Option<u64>, now: u64) {
        let inbound = Inbound {
            token: Arc::from(token),
            expires_at,
        };
        if inbound.expired(now) {
            return;
        }
        let mut tokens = self.tokens.lock();
        let tokens = &mut *tokens;
        if let Some((held, age)) = tokens.by_principal.get_mut(principal) {
            // Known: its latest token, marked recent (an active principal is not the one
            // evicted).
            tokens.by_age.remove(age);
            *age = tokens.next;
            tokens.by_age.insert(tokens.next, principal.to_string());
            tokens.next += 1;
            *held = inbound;
            return;
        }
        if tokens.by_principal.len() >= self.capacity {
            tokens.drop_expired(now);
        }
        while tokens.by_principal.len() >= self.capacity {
            let Some((_, oldest)) = tokens.by_age.pop_first() else {
                break;
            };
            tokens.by_principal.remove(&oldest);
        }
        tokens
            .by_principal
            .insert(principal.to_string(), (inbound, tokens.next));
        tokens.by_age.insert(tokens.next, principal.to_string());
        tokens.next += 1;
    }

    /// `principal`'s latest token while it has not expired at `now`.
    pub fn latest(&self, principal: &str, now: u64) -> Option<Inbound> {
        let mut tokens = self.tokens.lock();
        let (inbound, age) = tokens.by_principal.get(principal)?;
        if !inbound.expired(now) {
            return Some(inbound.clone());
        }
        let age = *age;
        tokens.by_age.remove(&age);
        tokens.by_principal.remove(principal);
        None
    }

    /// How many principals have a token kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.tokens.lock().by_principal.len()
    }
}

impl Tokens {
    fn drop_expired(&mut self, now: u64) {
        let expired: Vec<(String, u64)> = (self.by_principal.iter())
            .filter(|(_, (inbound, _))| inbound.expired(now))
            .map(|(principal, (_, age))| (principal.clone(), *age))
            .collect();
        for (principal, age) in expired {
            self.by_principal.remove(&principal);
            self.by_age.remove(&age);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_token_of_each_principal_is_kept_until_it_expires() {
        let tokens = InboundTokens::default();
        tokens.note("alice@idp", "a-1", Some(1_000), 100);
        tokens.note("bob@idp", "b-1", None, 100);
        tokens.note("alice@idp", "a-2", Some(2_000), 200);
        let alice = tokens.latest("alice@idp", 300).expect("alice's token");
        assert_eq!((&*alice.token, alice.expires_at), ("a-2", Some(2_000)));
        assert_eq!(
            tokens.latest("bob@idp", u64::MAX).map(|b| b.token),
            Some("b-1".into())
        );
        // Expired: gone, and forgotten.
        assert!(tokens.latest("alice@idp", 2_000).is_none());
        assert_eq!(tokens.len(), 1);
        // An already expired token is not kept at all.
        tokens.note("carol@idp", "c-1", Some(50), 100);
        assert!(tokens.latest("carol@idp", 0).is_none());
        assert!(!format!("{alice:?}").contains("a-2"));
    }

    #[test]
    fn past_the_bound_the_principal_heard_from_longest_ago_is_forgotten() {
        let tokens = InboundTokens::with_capacity(3);
        tokens.note("p1", "t1", None, 10);
        tokens.note("p2", "t2", None, 10);
        tokens.note("p3", "t3", None, 10);
        // p1 presents its token again: now p2 is the oldest.
        tokens.note("p1", "t1", None, 11);
        tokens.note("p4", "t4", None, 12);
        assert_eq!(tokens.len(), 3);
        assert!(tokens.latest("p2", 12).is_none(), "the oldest is evicted");
        for p in ["p1", "p3", "p4"] {
            assert!(tokens.latest(p, 12).is_some(), "{p} is kept");
        }
        // An expired one goes first, before the oldest live one.
        tokens.note("p5", "t5", Some(20), 13); // evicts p3, the oldest now
        tokens.note("p1", "t1", None, 14);
        tokens.note("p6", "t6", None, 30); // p5 has expired: it makes room, not p4
        assert_eq!(tokens.len(), 3);
        assert!(tokens.latest("p3", 30).is_none());
        for p in ["p4", "p1", "p6"] {
            assert!(tokens.latest(p, 30).is_some(), "{p} is kept");
        }
    }

    #[test]
    fn ten_thousand_principals_are_the_default_bound() {
        let tokens = InboundTokens::default();
        for i in 0..=MAX_PRINCIPALS {
            tokens.note(&format!("p{i}"), "t", None, 1);
        }
        assert_eq!(tokens.len(), MAX_PRINCIPALS);
        assert!(tokens.latest("p0", 1).is_none());
        assert!(tokens.latest(&format!("p{MAX_PRINCIPALS}"), 1).is_some());
    }
}
