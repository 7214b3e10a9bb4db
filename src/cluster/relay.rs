//! A home replica's answer to a forwarded request, relayed as this replica's own: its body streams
//! through while this replica runs and counts as a call in flight (a stop waits for it). When the
//! home dies midway through the SSE stream of a call (`kill -9`), the host is told the call
//! failed (a JSON-RPC error for its id, as the stream's last event) instead of a connection cut
//! mid-stream: a host that resumes a cut stream would ask a live replica for a stream that died
//! with the home, and wait for an answer that never comes.

use crate::core::hub::Hub;
use crate::error::codes;
use crate::protocol::message::error_reply;
use crate::protocol::sse::event_bytes;
use crate::protocol::{parse_body, Body as Parsed, Message, RequestId};
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http::{header, Method};
use tokio_util::sync::CancellationToken;

/// What a host whose call died with its home replica is told.
pub const HOME_DIED: &str = "the replica running this call stopped answering midway (it is gone); \
     the call may or may not have completed";

/// The id of the one request a forwarded POST body carries (none for a notification, a
/// response, a batch, or a body that does not parse).
pub fn call_id(method: &Method, body: &[u8]) -> Option<RequestId> {
    if *method != Method::POST {
        return None;
    }
    match parse_body(std::str::from_utf8(body).ok()?) {
        Ok(Parsed::Single(Message::Request { id, .. })) => Some(id),
        _ => None,
    }
}

/// The home's `answer` as this replica's (see the module doc); `call` is the id of the request
/// it answers, when the request was one call. A GET stream ends when this replica starts
/// stopping (the host reopens it on another), anything else when the drain is over.
pub fn relayed(hub: &Hub, method: &Method, call: Option<RequestId>, answer: Response) -> Response {
    let stop = match *method {
        Method::GET => hub.shutdown.clone(),
        _ => hub.drain_expired.clone(),
    };
    let in_flight = (hub.calls.token(), hub.relays.token());
    let (head, body) = answer.into_parts();
    let sse = (head.headers.get(header::CONTENT_TYPE))
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
    let call = call.filter(|_| sse);
    let frames = frames(body.into_data_stream(), stop, call).map(move |chunk| {
        let _in_flight = &in_flight;
        chunk
    });
    Response::from_parts(head, Body::from_stream(frames))
}

/// The chunks of the home's body until it ends or `stop`; if it breaks midway and `call` names
/// the SSE stream's call, one last event answers the call with an error instead of the break.
fn frames<S>(
    mut data: S,
    stop: CancellationToken,
    call: Option<RequestId>,
) -> impl Stream<Item = Result<Bytes, axum::Error>> + Send + 'static
where
    S: Stream<Item = Result<Bytes, axum::Error>> + Send + Unpin + 'static,
{
    async_stream::stream! {
        let mut at_boundary = true;
        loop {
            tokio::select! {
                chunk = data.next() => match chunk {
                    Some(Ok(chunk)) => {
                        if !chunk.is_empty() {
                            at_boundary = chunk.ends_with(b"\n\n") || chunk.ends_with(b"\r\n\r\n");
                        }
                        yield Ok(chunk);
                    }
                    Some(Err(err)) => {
                        match &call {
                            Some(id) => {
                                tracing::info!(call = %id, %err, "the home replica broke off a call's stream; the host is told the call failed");
                                yield Ok(home_died(id.clone(), at_boundary));
                            }
                            None => yield Err(err),
                        }
                        break;
                    }
                    None => break,
                },
                _ = stop.cancelled() => break,
            }
        }
    }
}

/// The SSE event answering call `id` with [`HOME_DIED`] (after a blank line when the home broke
/// off inside an event, so this one stands on its own).
fn home_died(id: RequestId, at_boundary: bool) -> Bytes {
    let json = error_reply(id, codes::UPSTREAM_UNAVAILABLE, HOME_DIED, None).to_json();
    let event = event_bytes(None, None, &json);
    match at_boundary {
        true => event,
        false => [&b"\n\n"[..], &event].concat().into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::stream;

    fn broken_after(
        chunks: &[&'static str],
    ) -> impl Stream<Item = Result<Bytes, axum::Error>> + Send + Unpin {
        let mut items: Vec<Result<Bytes, axum::Error>> = chunks
            .iter()
            .map(|c| Ok(Bytes::from_static(c.as_bytes())))
            .collect();
        items.push(Err(axum::Error::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        ))));
        stream::iter(items)
    }

    async fn collect(s: impl Stream<Item = Result<Bytes, axum::Error>>) -> (String, bool) {
        let items: Vec<_> = s.collect().await;
        let broke = items.iter().any(Result::is_err);
        let text = items
            .into_iter()
            .filter_map(Result::ok)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .collect();
        (text, broke)
    }

    #[tokio::test]
    async fn a_call_stream_broken_by_its_home_ends_with_an_error_for_the_call() {
        let priming = "id: 1-0\nretry: 1000\ndata: \n\n";
        let id = RequestId::number(7);
        let relayed = frames(broken_after(&[priming]), CancellationToken::new(), Some(id));
        let (text, broke) = collect(relayed).await;
        assert!(!broke, "the host's stream was cut: {text}");
        let last = text.trim_end().rsplit("\n\n").next().unwrap_or_default();
        let json: serde_json::Value = serde_json::from_str(last.trim_start_matches("data: ")).unwrap();
        assert_eq!(json["id"], 7, "{text}");
        assert_eq!(json["error"]["code"], codes::UPSTREAM_UNAVAILABLE, "{text}");
        assert!(text.starts_with(priming), "{text}");
    }

    #[tokio::test]
    async fn an_event_cut_midway_is_closed_before_the_error() {
        let id = RequestId::number(8);
        let relayed = frames(
            broken_after(&["data: {\"jsonrpc\""]),
            CancellationToken::new(),
            Some(id),
        );
        let (text, _) = collect(relayed).await;
        assert!(text.contains("\"jsonrpc\"\n\ndata: {"), "{text:?}");
    }

    #[tokio::test]
    async fn without_a_call_a_break_stays_a_break_and_a_clean_end_adds_nothing() {
        let (_, broke) = collect(frames(
            broken_after(&["data: x\n\n"]),
            CancellationToken::new(),
            None,
        ))
        .await;
        assert!(broke);
        let whole = stream::iter(vec![Ok(Bytes::from_static(b"data: x\n\n"))]);
        let (text, broke) = collect(frames(
            whole,
            CancellationToken::new(),
            Some(RequestId::number(1)),
        ))
        .await;
        assert_eq!((text.as_str(), broke), ("data: x\n\n", false));
    }

    #[test]
    fn only_a_post_of_one_request_names_a_call() {
        let request = br#"{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{}}"#;
        assert_eq!(
            call_id(&Method::POST, request).map(|id| id.as_json().to_string()),
            Some("\"a-1\"".to_string())
        );
        assert!(call_id(&Method::GET, request).is_none());
        let note = br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#;
        assert!(call_id(&Method::POST, note).is_none());
        assert!(call_id(&Method::POST, b"[").is_none());
    }
}
