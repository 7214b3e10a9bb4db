use super::*;

#[test]
fn accept_header_parsing() {
    let mut h = HeaderMap::new();
    h.insert(
        header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream;q=0.9"),
    );
    assert!(accepts(&h, "application/json") && accepts(&h, "text/event-stream"));
    assert!(accepts_json_and_sse(&h));
    h.insert(
        header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    assert!(accepts_json_and_sse(&h));
    h.append(header::ACCEPT, HeaderValue::from_static("text/plain"));
    assert!(accepts_json_and_sse(&h));
    h.insert(header::ACCEPT, HeaderValue::from_static("text/event-stream"));
    assert!(!accepts_json_and_sse(&h));
    h.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    assert!(!accepts(&h, "text/event-stream"));
    h.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
    assert!(accepts(&h, "text/event-stream"));
}

#[test]
fn session_ids_are_long_visible_ascii_and_distinct() {
    let a = new_session_id();
    assert_eq!(a.len(), 64);
    assert!(a.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    assert_ne!(a, new_session_id());
}

#[test]
fn sse_frames_never_split_json() {
    let frame = sse_frame("{\"a\":\r\n 1}");
    assert_eq!(&frame[..], b"data: {\"a\":   1}\n\n");
}

#[tokio::test(start_paused = true)]
async fn idle_streams_get_a_keepalive_and_end_with_their_frames() {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(4);
    let frames = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (b, rx)) });
    let mut stream = with_keepalive(frames.boxed());
    tx.send(Bytes::from_static(b"data: 1\n\n")).await.unwrap();
    assert_eq!(stream.next().await.unwrap(), Bytes::from_static(b"data: 1\n\n"));
    // Nothing for a while: the paused clock runs to the keepalive.
    assert_eq!(
        stream.next().await.unwrap(),
        Bytes::from_static(b": keepalive\n\n")
    );
    drop(tx);
    assert!(stream.next().await.is_none());
}
