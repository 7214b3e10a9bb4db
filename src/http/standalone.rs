//! The session-era GET: a `Last-Event-ID` opened for the session (`session::host_tokens`) and
//! what it gets, and the standalone stream's events. Every standalone event has a sealed id
//! carrying the session's resource subscriptions and log level as they are when it is sent; a
//! host of 2025-11-25 or later also gets a priming event (an id and empty data) when the stream
//! opens and whenever either changes, so its last event id is always current. A replica that
//! took the session over restores both from it (`core::restore`).
//!
//! What a `Last-Event-ID` gets: an event of a call stream kept here resumes that stream; an
//! event of a call stream another process kept (the session's earlier home) answers that call's
//! request with an error (`resume::lost`: the stream cannot be resumed here); any other id, or
//! one that does not open (forged, altered, cut, sealed under a key this gateway
//! does not hold, or for another session), is treated as unknown: the GET is answered as one
//! without it, with the standalone stream (409 when it is already open), nothing replayed and
//! nothing restored. A standalone event's id of a session taken over here restores the session's
//! subscriptions and log level before the stream opens (once).

use super::resume::may_poll;
use crate::protocol::sse::event_bytes;
use crate::session::host_tokens::EventPosition;
use crate::session::Session;
use bytes::Bytes;
use futures_util::stream::{BoxStream, StreamExt};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Where the host's `Last-Event-ID` points; `None` when it sent none or it does not open here.
pub fn position(session: &Session, last_event_id: Option<&str>) -> Option<EventPosition> {
    let token = last_event_id?;
    match session.open_event_id(token) {
        Ok(position) => Some(position),
        Err(why) => {
            tracing::debug!(session = %session.log_id(), %why, "Last-Event-ID refused: answered as unknown");
            None
        }
    }
}

/// The standalone stream's events: each queued message with a fresh sealed id, and a priming
/// event at the start and after each change of the subscriptions or log level (for hosts that
/// understand them); until the queue closes, the session ends or mcpmux stops.
pub fn events(
    mut queue: mpsc::Receiver<Arc<str>>,
    session: Arc<Session>,
    shutdown: CancellationToken,
) -> BoxStream<'static, Bytes> {
    let primes = may_poll(&session.protocol_version);
    let events = async_stream::stream! {
        if primes {
            yield event_bytes(Some(&session.standalone_event_id()), None, "");
        }
        loop {
            tokio::select! {
                msg = queue.recv() => match msg {
                    Some(json) => yield event_bytes(Some(&session.standalone_event_id()), None, &json),
                    None => break,
                },
                _ = session.claims_changed.notified(), if primes => {
                    yield event_bytes(Some(&session.standalone_event_id()), None, "");
                }
                _ = session.closed.cancelled() => break,
                _ = shutdown.cancelled() => break,
            }
        }
    };
    events.boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::sse::{SseDecoder, SseEvent};
    use crate::protocol::ClientCaps;
    use crate::session::host_tokens::StandaloneClaims;
    use crate::upstream::ties::HostTies;

    fn session(version: &str) -> Arc<Session> {
        Session::new(
            "s".into(),
            version.into(),
            ClientCaps::ALL,
            Arc::new(HostTies::new()),
        )
    }

    async fn next(events: &mut BoxStream<'static, Bytes>) -> SseEvent {
        let bytes = tokio::time::timeout(std::time::Duration::from_secs(5), events.next())
            .await
            .expect("an event in time")
            .expect("the stream goes on");
        let mut out = Vec::new();
        SseDecoder::new(1 << 16).push(&bytes, &mut out).unwrap();
        out.pop().expect("one event")
    }

    fn claims(session: &Session, event: &SseEvent) -> StandaloneClaims {
        match position(session, event.id.as_deref()) {
            Some(EventPosition::Standalone(claims)) => claims,
            other => panic!("not a standalone event id: {other:?}"),
        }
    }

    #[tokio::test]
    async fn every_event_id_carries_the_current_subscriptions_and_level() {
        let s = session("2025-11-25");
        let queue = s.open_get_stream().unwrap();
        let mut events = events(queue, s.clone(), CancellationToken::new());
        let primed = next(&mut events).await;
        assert!(primed.data.is_empty());
        assert_eq!(claims(&s, &primed), StandaloneClaims::default());
        s.subscribe("test://a");
        s.set_log_level(3);
        let changed = next(&mut events).await;
        assert!(changed.data.is_empty(), "a priming-style event on a change");
        assert!(s.push_get("{\"jsonrpc\":\"2.0\",\"method\":\"x\"}".into()));
        let mut message = next(&mut events).await;
        if message.data.is_empty() {
            // The second change's own priming event came first.
            message = next(&mut events).await;
        }
        assert!(message.data.contains("\"x\""));
        let carried = claims(&s, &message);
        assert_eq!(carried.subscriptions, vec!["test://a".to_string()]);
        assert_eq!(carried.log_level, Some(3));
        assert_ne!(primed.id, message.id);
        // Another session's stream id does not open here.
        let other = session("2025-11-25");
        assert!(position(&other, message.id.as_deref()).is_none());
    }

    #[tokio::test]
    async fn older_hosts_get_ids_on_messages_only() {
        let s = session("2025-06-18");
        let queue = s.open_get_stream().unwrap();
        let mut events = events(queue, s.clone(), CancellationToken::new());
        s.subscribe("test://a");
        assert!(s.push_get("{\"jsonrpc\":\"2.0\",\"method\":\"x\"}".into()));
        let first = next(&mut events).await;
        assert!(first.data.contains("\"x\""), "no priming event: {first:?}");
        assert_eq!(claims(&s, &first).subscriptions, vec!["test://a".to_string()]);
    }
}
