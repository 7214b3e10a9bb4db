//! The registry of live host sessions: lookup by id, idle reaping, and the fan-out of what
//! upstream connections tell every host ([`HostEvent`]: list changes, resource updates, log
//! messages no call claims) to session-era GET streams and modern listen streams.

use super::ended::EndedIds;
use super::host::Session;
use super::listeners::Listeners;
use super::views::ProfileViews;
use crate::catalog::ListKind;
use crate::policy::Viewer;
use crate::protocol::Message;
use crate::upstream::host::{HostEvent, HostEvents};
use crate::util::fast_map::FastState;
use dashmap::DashMap;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// Live sessions by id, and the modern hosts' listen streams.
#[derive(Default)]
pub struct SessionRegistry {
    map: DashMap<String, Arc<Session>, FastState>,
    pub listeners: Listeners,
    /// Sessions taken over from another home that ended here: not taken over again.
    pub ended: EndedIds,
    /// What each profile sees, to tell its sessions only of changes to it.
    pub views: ProfileViews,
}

impl SessionRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn insert(&self, session: Arc<Session>) {
        self.map.insert(session.id.clone(), session);
    }

    /// Register a session taken over from another home, unless a concurrent request already
    /// did: the session registered under its id either way.
    pub fn adopt(&self, session: Arc<Session>) -> Arc<Session> {
        self.map
            .entry(session.id.clone())
            .or_insert(session)
            .value()
            .clone()
    }

    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.map.get(id).map(|s| s.value().clone())
    }

    /// End and forget a session.
    pub fn remove(&self, id: &str) -> Option<Arc<Session>> {
        let (_, session) = self.map.remove(id)?;
        if session.taken_over_from().is_some() {
            self.ended.record(id);
        }
        session.close();
        Some(session)
    }

    pub fn all(&self) -> Vec<Arc<Session>> {
        self.map.iter().map(|s| s.value().clone()).collect()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Queue a message on every session's GET stream: one shared string, and no lock of the
    /// registry held while pushing.
    pub fn broadcast(&self, json: &Arc<str>) {
        for session in self.all() {
            session.push_get(json.clone());
        }
    }

    /// End sessions idle longer than `limit`; returns how many.
    pub fn reap(&self, limit: Duration) -> usize {
        let idle: Vec<String> = (self.map.iter())
            .filter(|s| s.idle_for() > limit)
            .map(|s| s.id.clone())
            .collect();
        for id in &idle {
            tracing::info!(session = %crate::util::ids::session_digest(id), "reaping idle session");
            self.remove(id);
        }
        idle.len()
    }

    /// End every session (shutdown).
    pub fn close_all(&self) {
        let ids: Vec<String> = self.map.iter().map(|s| s.key().clone()).collect();
        for id in ids {
            self.remove(&id);
        }
    }

    /// Tell sessions and listeners once about each distinct list notification: those of the
    /// main endpoint whenever the list changed, those of a profile only when what the profile
    /// sees of it changed.
    fn lists_changed(&self, kinds: &[ListKind]) {
        self.tell_lists_changed(kinds, true);
    }

    /// The profiles in force changed (a reload): each profile's hosts hear of the lists whose
    /// view changed; the main endpoint's hear nothing (their catalog did not change).
    pub fn profiles_changed(&self) {
        self.tell_lists_changed(&ListKind::ALL, false);
    }

    /// Tell each session and listen stream of the lists `changed` names for it, from its
    /// endpoint (`None`: the main one) and principal (a reload that changed what hosts may see:
    /// each one's view is its own); one notification per list notification method. Returns the
    /// lists whose view changed for some host.
    pub fn tell_each(
        &self,
        mut changed: impl FnMut(Option<&str>, Option<&dyn Viewer>) -> Vec<ListKind>,
    ) -> Vec<ListKind> {
        let mut told: Vec<ListKind> = Vec::new();
        let mut count: HashMap<&'static str, usize> = HashMap::new();
        let jsons: Vec<(&'static str, Arc<str>)> = (ListKind::ALL.iter())
            .map(|k| k.list_changed_notification())
            .map(|m| (m, list_changed_json(m)))
            .collect();
        for session in self.all() {
            let kinds = changed(session.profile().map(|p| &**p), session.viewer().as_deref());
            let mut methods: Vec<&'static str> =
                kinds.iter().map(|k| k.list_changed_notification()).collect();
            methods.dedup();
            for method in methods {
                if let Some((_, json)) = jsons.iter().find(|(m, _)| *m == method) {
                    session.push_get(json.clone());
                    *count.entry(method).or_default() += 1;
                }
            }
            told.extend(kinds);
        }
        // Worked out before any is told: no lock of the streams is held meanwhile.
        let mut streams: Vec<(ListKind, HashSet<u64>)> = Vec::new();
        for (key, profile, viewer) in self.listeners.who() {
            let kinds = changed(profile.as_deref(), viewer.as_deref());
            for kind in &kinds {
                // Resources and templates share one notification: the first of them names it.
                let method = kind.list_changed_notification();
                match streams
                    .iter_mut()
                    .find(|(k, _)| k.list_changed_notification() == method)
                {
                    Some((_, keys)) => {
                        keys.insert(key);
                    }
                    None => streams.push((*kind, HashSet::from([key]))),
                }
            }
            told.extend(kinds);
        }
        for (kind, keys) in &streams {
            self.listeners.list_changed_to(*kind, keys);
            *count.entry(kind.list_changed_notification()).or_default() += keys.len();
        }
        for (method, n) in count {
            crate::telemetry::record::list_changed_sent(method, n);
        }
        let mut told: Vec<ListKind> = ListKind::ALL.into_iter().filter(|k| told.contains(k)).collect();
        told.dedup();
        told
    }

    /// [`SessionRegistry::lists_changed`]; the main endpoint's hosts are told only with `main`.
    fn tell_lists_changed(&self, kinds: &[ListKind], main: bool) {
        // Per notification: the profiles whose view changed (resources and templates share one).
        let mut told: Vec<(&'static str, ListKind, HashSet<String>)> = Vec::new();
        for kind in kinds {
            let method = kind.list_changed_notification();
            let profiles = self.views.changed(*kind);
            match told.iter_mut().find(|(m, _, _)| *m == method) {
                Some((_, _, seen)) => seen.extend(profiles),
                None => told.push((method, *kind, profiles)),
            }
        }
        for (method, kind, profiles) in told {
            let json = list_changed_json(method);
            let concerned = |profile: Option<&Arc<str>>| match profile {
                None => main,
                Some(p) => profiles.contains(&**p),
            };
            let told = std::cell::Cell::new(0);
            for session in self.all().into_iter().filter(|s| concerned(s.profile())) {
                session.push_get(json.clone());
                told.set(told.get() + 1);
            }
            self.listeners.list_changed(kind, |p| {
                concerned(p) && {
                    told.set(told.get() + 1);
                    true
                }
            });
            crate::telemetry::record::list_changed_sent(method, told.get());
        }
    }
}

/// The JSON of a `list_changed` notification `method` (no params), as every session is sent it.
fn list_changed_json(method: &str) -> Arc<str> {
    let note = Message::Notification {
        method: method.into(),
        params: None,
    };
    note.to_json().into()
}

impl HostEvents for SessionRegistry {
    fn emit(&self, event: HostEvent<'_>) {
        self.emit_to(event, None);
    }
}

impl SessionRegistry {
    /// Tell the hosts `event` concerns: every one, or those of principal `only`.
    fn emit_to(&self, event: HostEvent<'_>, only: Option<&str>) {
        let theirs = |viewer: Option<Arc<dyn Viewer>>| {
            only.is_none_or(|p| viewer.and_then(|v| v.grant_principal()).as_deref() == Some(p))
        };
        match event {
            HostEvent::ResourceUpdated {
                owner,
                uri,
                params,
                notification,
            } => {
                if owner.is_none() {
                    self.listeners.resource_updated_for(uri, params, only);
                }
                for session in self.all().into_iter().filter(|s| theirs(s.viewer())) {
                    let mine = owner.is_none_or(|key| key == crate::upstream::host::HostLink::key(&*session));
                    if mine && session.is_subscribed(uri) {
                        session.push_get(notification.clone());
                    }
                }
            }
            HostEvent::Log {
                upstream,
                level,
                notification,
            } => {
                for session in self.all().into_iter().filter(|s| theirs(s.viewer())) {
                    // A profile's sessions hear only of the profile's servers.
                    let concerned = session
                        .profile()
                        .is_none_or(|p| self.views.has_server(p, upstream));
                    if concerned && session.log_level().is_some() && session.wants_log(level) {
                        session.push_get(notification.clone());
                    }
                }
            }
            HostEvent::ListsChanged(kinds) => match only {
                None => self.lists_changed(kinds),
                Some(principal) => {
                    let of = |viewer: Option<&dyn Viewer>| viewer.and_then(|v| v.grant_principal());
                    self.tell_each(|_, viewer| match of(viewer).as_deref() == Some(principal) {
                        true => kinds.to_vec(),
                        false => Vec::new(),
                    });
                }
            },
            // Nested once at most: a personal event is never made personal again.
            HostEvent::Personal { principal, event } => match event {
                HostEvent::Personal { .. } => {}
                HostEvent::ResourceUpdated {
                    owner,
                    uri,
                    params,
                    notification,
                } => self.emit_to(
                    HostEvent::ResourceUpdated {
                        owner: *owner,
                        uri,
                        params,
                        notification: notification.clone(),
                    },
                    Some(principal),
                ),
                HostEvent::Log {
                    upstream,
                    level,
                    notification,
                } => self.emit_to(
                    HostEvent::Log {
                        upstream,
                        level: *level,
                        notification: notification.clone(),
                    },
                    Some(principal),
                ),
                HostEvent::ListsChanged(kinds) => {
                    self.emit_to(HostEvent::ListsChanged(kinds), Some(principal))
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ClientCaps;
    use crate::upstream::ties::HostTies;

    #[test]
    fn reaping_ends_idle_sessions_only() {
        let reg = SessionRegistry::new();
        let ties = Arc::new(HostTies::new());
        let idle = Session::new(
            "idle".into(),
            "2025-11-25".into(),
            ClientCaps::default(),
            ties.clone(),
        );
        let busy = Session::new("busy".into(), "2025-11-25".into(), ClientCaps::default(), ties);
        let _stream = busy.open_get_stream();
        reg.insert(idle.clone());
        reg.insert(busy);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(reg.reap(Duration::from_millis(10)), 1);
        assert!(reg.get("idle").is_none());
        assert!(idle.closed.is_cancelled());
        assert!(reg.get("busy").is_some());
    }

    #[test]
    fn a_taken_over_session_is_adopted_once_and_remembered_when_it_ends() {
        let reg = SessionRegistry::new();
        let ties = Arc::new(HostTies::new());
        let open = |id: &str| {
            Session::new(
                id.into(),
                "2025-11-25".into(),
                ClientCaps::default(),
                ties.clone(),
            )
        };
        let moved = open("moved");
        moved.mark_taken_over("http://10.0.0.1:8080".into());
        assert!(Arc::ptr_eq(&reg.adopt(moved.clone()), &moved));
        // A concurrent takeover of the same id gets the session already registered.
        assert!(Arc::ptr_eq(&reg.adopt(open("moved")), &moved));
        reg.insert(open("here"));
        let idle = open("idle");
        idle.mark_taken_over("http://10.0.0.2:8080".into());
        reg.insert(idle);
        reg.remove("moved");
        reg.remove("here");
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(reg.reap(Duration::from_millis(10)), 1);
        // Ended here after a takeover: remembered; opened here: its boot id already says so.
        assert!(reg.ended.contains("moved") && reg.ended.contains("idle"));
        assert!(!reg.ended.contains("here"));
        assert!(moved.closed.is_cancelled());
    }

    /// A principal named as its upstream grants are.
    struct Member(&'static str);

    impl Viewer for Member {
        fn facts(&self) -> crate::policy::PrincipalFacts<'_> {
            crate::policy::PrincipalFacts::new(self.0, [], [])
        }

        fn grant_principal(&self) -> Option<String> {
            Some(format!("key:{}", self.0))
        }
    }

    #[test]
    fn what_a_principals_own_connection_says_reaches_only_that_principals_sessions() {
        let reg = SessionRegistry::new();
        let ties = Arc::new(HostTies::new());
        let open = |id: &str, who: Option<&'static str>| {
            let session = Session::new(
                id.into(),
                "2025-11-25".into(),
                ClientCaps::default(),
                ties.clone(),
            );
            if let Some(who) = who {
                session.note_viewer(Arc::new(Member(who)));
            }
            session.set_log_level(0);
            let stream = session.open_get_stream();
            reg.insert(session);
            stream
        };
        let (mut alice, mut bob, mut nobody) = (
            open("a", Some("alice")).unwrap(),
            open("b", Some("bob")).unwrap(),
            open("n", None).unwrap(),
        );
        reg.emit(HostEvent::Personal {
            principal: "key:alice",
            event: &HostEvent::ListsChanged(&[ListKind::Tools]),
        });
        let upstream = crate::config::UpstreamId::new("up");
        reg.emit(HostEvent::Personal {
            principal: "key:bob",
            event: &HostEvent::Log {
                upstream: &upstream,
                level: Some("error"),
                notification: Arc::from("{\"method\":\"notifications/message\"}"),
            },
        });
        let told = alice.try_recv().map(|m| m.to_string()).unwrap_or_default();
        assert!(told.contains("notifications/tools/list_changed"), "{told}");
        assert!(alice.try_recv().is_err(), "alice heard bob's log");
        let heard = bob.try_recv().map(|m| m.to_string()).unwrap_or_default();
        assert!(heard.contains("notifications/message"), "{heard}");
        assert!(bob.try_recv().is_err() && nobody.try_recv().is_err());
        reg.emit(HostEvent::ListsChanged(&[ListKind::Tools]));
        for stream in [&mut alice, &mut bob, &mut nobody] {
            assert!(
                stream.try_recv().is_ok(),
                "a change everyone sees reaches everyone"
            );
        }
    }

    #[test]
    fn a_resource_update_from_a_principals_own_connection_reaches_only_its_listen_streams() {
        use super::super::listeners::{Grant, Listener};
        let reg = SessionRegistry::new();
        let uri = "mcpmux://up/notes/1";
        let listen = |who: &'static str| {
            let (queue, rx) = tokio::sync::mpsc::channel(4);
            let grant = Grant {
                tools: false,
                prompts: false,
                resources: false,
                uris: vec![uri.to_string()],
            };
            let viewer: Arc<dyn Viewer> = Arc::new(Member(who));
            let listener = Listener {
                subscription: crate::protocol::RequestId::from_raw(&crate::protocol::message::raw(
                    "1".into(),
                ))
                .unwrap(),
                grant,
                queue,
                profile: None,
                viewer: Some(viewer),
            };
            reg.listeners.insert(listener);
            rx
        };
        let (mut alice, mut bob) = (listen("alice"), listen("bob"));
        let params = crate::protocol::RawObject::parse(&format!(r#"{{"uri":"{uri}"}}"#)).unwrap();
        reg.emit(HostEvent::Personal {
            principal: "key:alice",
            event: &HostEvent::ResourceUpdated {
                owner: None,
                uri,
                params: &params,
                notification: Arc::from("{}"),
            },
        });
        let heard = alice.try_recv().map(|m| m.to_string()).unwrap_or_default();
        assert!(heard.contains("notifications/resources/updated"), "{heard}");
        assert!(bob.try_recv().is_err(), "bob heard alice's resource update");
    }
}
