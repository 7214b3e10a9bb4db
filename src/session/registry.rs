//! The registry of live host sessions: lookup by id, broadcast, idle reaping.

use super::host::Session;
use super::listeners::Listeners;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Live sessions by id, and the modern hosts' listen streams.
#[derive(Default)]
pub struct SessionRegistry {
    map: Mutex<HashMap<String, Arc<Session>>>,
    pub listeners: Listeners,
}

impl SessionRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.map.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn insert(&self, session: Arc<Session>) {
        self.lock().insert(session.id.clone(), session);
    }

    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.lock().get(id).cloned()
    }

    /// End and forget a session.
    pub fn remove(&self, id: &str) -> Option<Arc<Session>> {
        let session = self.lock().remove(id)?;
        session.close();
        Some(session)
    }

    pub fn all(&self) -> Vec<Arc<Session>> {
        self.lock().values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Queue a message on every session's GET stream: one shared string, and the registry's
    /// lock held only to take the list of sessions, not while pushing.
    pub fn broadcast(&self, json: &Arc<str>) {
        for session in self.all() {
            session.push_get(json.clone());
        }
    }

    /// End sessions idle longer than `limit`; returns how many.
    pub fn reap(&self, limit: Duration) -> usize {
        let idle: Vec<String> = self
            .lock()
            .values()
            .filter(|s| s.idle_for() > limit)
            .map(|s| s.id.clone())
            .collect();
        for id in &idle {
            tracing::info!(session = %id, "reaping idle session");
            self.remove(id);
        }
        idle.len()
    }

    /// End every session (shutdown).
    pub fn close_all(&self) {
        let all: Vec<Arc<Session>> = self.lock().drain().map(|(_, s)| s).collect();
        for s in all {
            s.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::host::ClientCaps;

    #[test]
    fn reaping_ends_idle_sessions_only() {
        let reg = SessionRegistry::new();
        let idle = Session::new("idle".into(), "2025-11-25".into(), ClientCaps::default());
        let busy = Session::new("busy".into(), "2025-11-25".into(), ClientCaps::default());
        let _stream = busy.open_get_stream();
        reg.insert(idle.clone());
        reg.insert(busy);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(reg.reap(Duration::from_millis(10)), 1);
        assert!(reg.get("idle").is_none());
        assert!(idle.closed.is_cancelled());
        assert!(reg.get("busy").is_some());
    }
}
