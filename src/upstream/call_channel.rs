//! The channel from a connection actor to one host call: bounded for what may be shed
//! (notifications, server requests, pauses), with a slot for the call's outcome that is never
//! lost and a slot that keeps the newest progress when the queue is full. The actor never waits
//! on it and never spawns to deliver.

use super::CallEvent;
use crate::error::UpstreamError;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// Why an intermediate event was not queued; the event comes back.
#[derive(Debug)]
pub enum Refused {
    /// The queue holds its capacity of events the host has not read yet.
    Full(CallEvent),
    /// The host call is gone.
    Closed(CallEvent),
}

struct State {
    queue: VecDeque<CallEvent>,
    /// The newest progress that did not fit in the queue (older ones it replaced are dropped:
    /// each progress notification supersedes the one before).
    progress: Option<CallEvent>,
    /// The response or failure: delivered after everything queued before it.
    outcome: Option<CallEvent>,
    /// Progress notifications replaced before the host read them.
    superseded: u64,
    receiver_gone: bool,
}

struct Shared {
    state: Mutex<State>,
    capacity: usize,
    senders: AtomicUsize,
    ready: Notify,
}

/// The actor's end: cloneable, never blocks.
pub struct CallSink {
    shared: Arc<Shared>,
}

/// The host call's end.
pub struct CallEvents {
    shared: Arc<Shared>,
}

/// A channel queueing at most `capacity` intermediate events.
pub fn call_channel(capacity: usize) -> (CallSink, CallEvents) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            progress: None,
            outcome: None,
            superseded: 0,
            receiver_gone: false,
        }),
        capacity: capacity.max(1),
        senders: AtomicUsize::new(1),
        ready: Notify::new(),
    });
    (
        CallSink {
            shared: shared.clone(),
        },
        CallEvents { shared },
    )
}

impl Clone for CallSink {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::Relaxed);
        CallSink {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for CallSink {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.ready.notify_one();
        }
    }
}

impl CallSink {
    /// Queue a notification, server request or pause; refused when the queue is full or the
    /// host call is gone.
    pub fn try_send(&self, event: CallEvent) -> Result<(), Refused> {
        let mut state = self.shared.state.lock();
        if state.receiver_gone {
            return Err(Refused::Closed(event));
        }
        if state.queue.len() >= self.shared.capacity {
            return Err(Refused::Full(event));
        }
        state.queue.push_back(event);
        drop(state);
        self.shared.ready.notify_one();
        Ok(())
    }

    /// Queue a progress notification; when the queue is full it waits in the progress slot,
    /// replacing an older one there. False when the host call is gone.
    pub fn send_progress(&self, event: CallEvent) -> bool {
        let mut state = self.shared.state.lock();
        if state.receiver_gone {
            return false;
        }
        if state.queue.len() < self.shared.capacity && state.progress.is_none() {
            state.queue.push_back(event);
        } else if state.progress.replace(event).is_some() {
            state.superseded += 1;
        }
        drop(state);
        self.shared.ready.notify_one();
        true
    }

    /// Deliver the call's outcome (its response or failure). Only the first one counts. False
    /// when the host call is gone.
    pub fn finish(&self, event: CallEvent) -> bool {
        let mut state = self.shared.state.lock();
        if state.receiver_gone {
            return false;
        }
        if state.outcome.is_none() {
            state.outcome = Some(event);
        }
        drop(state);
        self.shared.ready.notify_one();
        true
    }

    /// Whether the host call stopped listening.
    pub fn is_closed(&self) -> bool {
        self.shared.state.lock().receiver_gone
    }
}

impl CallEvents {
    /// The next event in order: queued events, then the waiting progress, then the outcome.
    /// `None` once every sink is gone and nothing is left.
    pub async fn recv(&mut self) -> Option<CallEvent> {
        loop {
            let ready = self.shared.ready.notified();
            if let Some(event) = self.try_recv() {
                return Some(event);
            }
            if self.shared.senders.load(Ordering::Acquire) == 0 {
                // A last event may have been queued just before the last sink went away.
                return self.try_recv();
            }
            ready.await;
        }
    }

    fn try_recv(&self) -> Option<CallEvent> {
        let mut state = self.shared.state.lock();
        if let Some(event) = state.queue.pop_front() {
            return Some(event);
        }
        if let Some(event) = state.progress.take() {
            return Some(event);
        }
        state.outcome.take()
    }

    /// Wait for the call's first event; when it is the call's failure and `take` wants it, take
    /// it (the call is over); anything else stays queued, in order, for [`CallEvents::recv`].
    pub async fn take_first_failure(
        &mut self,
        take: impl Fn(&UpstreamError) -> bool,
    ) -> Option<UpstreamError> {
        loop {
            let ready = self.shared.ready.notified();
            {
                let mut state = self.shared.state.lock();
                if !state.queue.is_empty() || state.progress.is_some() {
                    return None;
                }
                match state.outcome.take() {
                    Some(CallEvent::Failed(err)) if take(&err) => return Some(err),
                    Some(other) => {
                        state.outcome = Some(other);
                        return None;
                    }
                    None => {}
                }
            }
            if self.shared.senders.load(Ordering::Acquire) == 0 {
                return None;
            }
            ready.await;
        }
    }

    /// How many progress notifications were replaced by newer ones before the host read them.
    pub fn superseded_progress(&self) -> u64 {
        self.shared.state.lock().superseded
    }
}

impl Drop for CallEvents {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock();
        state.receiver_gone = true;
        state.queue.clear();
        state.progress = None;
        state.outcome = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::message::parse_message;

    fn note(text: &str) -> CallEvent {
        let json = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progress":{text}}}}}"#
        );
        CallEvent::Notification(parse_message(&json).unwrap())
    }

    fn progress_of(event: CallEvent) -> String {
        match event {
            CallEvent::Notification(msg) => msg.to_json(),
            other => format!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn the_outcome_is_never_lost_behind_a_full_queue() {
        let (sink, mut events) = call_channel(2);
        sink.try_send(note("1")).unwrap();
        sink.try_send(note("2")).unwrap();
        assert!(matches!(sink.try_send(note("3")), Err(Refused::Full(_))));
        let failure = crate::error::UpstreamError::Closed {
            name: "u".into(),
            reason: "r".into(),
        };
        assert!(sink.finish(CallEvent::Failed(failure)));
        drop(sink);
        assert!(progress_of(events.recv().await.unwrap()).contains("\"progress\":1"));
        assert!(progress_of(events.recv().await.unwrap()).contains("\"progress\":2"));
        assert!(matches!(events.recv().await, Some(CallEvent::Failed(_))));
        assert!(events.recv().await.is_none());
    }

    #[tokio::test]
    async fn progress_past_the_queue_keeps_the_newest() {
        let (sink, mut events) = call_channel(1);
        assert!(sink.send_progress(note("1")));
        assert!(sink.send_progress(note("2")));
        assert!(sink.send_progress(note("3")));
        assert_eq!(events.superseded_progress(), 1);
        assert!(progress_of(events.recv().await.unwrap()).contains("\"progress\":1"));
        assert!(progress_of(events.recv().await.unwrap()).contains("\"progress\":3"));
        // With room again, progress queues in order behind nothing.
        assert!(sink.send_progress(note("4")));
        assert!(progress_of(events.recv().await.unwrap()).contains("\"progress\":4"));
    }

    #[tokio::test]
    async fn a_waiting_receiver_wakes_for_events_and_for_the_last_sink() {
        let (sink, mut events) = call_channel(4);
        let other = sink.clone();
        let reader = tokio::spawn(async move {
            let first = events.recv().await.is_some();
            let end = events.recv().await.is_none();
            (first, end)
        });
        tokio::task::yield_now().await;
        sink.try_send(note("1")).unwrap();
        drop(sink);
        tokio::task::yield_now().await;
        drop(other);
        assert_eq!(reader.await.unwrap(), (true, true));
    }

    #[test]
    fn a_gone_receiver_refuses_everything() {
        let (sink, events) = call_channel(4);
        drop(events);
        assert!(sink.is_closed());
        assert!(matches!(sink.try_send(note("1")), Err(Refused::Closed(_))));
        assert!(!sink.send_progress(note("2")));
        assert!(!sink.finish(note("3")));
    }
}
