use super::*;
use axum::extract::{ConnectInfo, State};
use http_body_util::BodyExt;
use std::collections::HashSet;
use std::net::SocketAddr;

type Peers = Arc<Mutex<HashSet<SocketAddr>>>;

const SECOND: Duration = Duration::from_secs(1);

async fn record(
    State(peers): State<Peers>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    body: String,
) -> String {
    peers.lock().insert(peer);
    format!("echo {body}")
}

/// An HTTP server answering every request with its body, recording each client connection.
async fn server() -> (SocketAddr, Peers) {
    let peers = Peers::default();
    let app = axum::Router::new()
        .route("/mcp", axum::routing::post(record))
        .with_state(peers.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await
    });
    (addr, peers)
}

fn post(addr: SocketAddr, body: &'static str) -> http::Request<Full<Bytes>> {
    let mut req = http::Request::new(Full::new(Bytes::from_static(body.as_bytes())));
    *req.method_mut() = http::Method::POST;
    *req.uri_mut() = http::Uri::from_static("/mcp");
    let host = http::HeaderValue::from_str(&addr.to_string()).expect("host");
    req.headers_mut().insert(http::header::HOST, host);
    req
}

async fn text(resp: http::Response<PooledBody>) -> String {
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    String::from_utf8_lossy(&body).into_owned()
}

fn pool_of(addr: SocketAddr) -> Arc<Http1Pool> {
    Http1Pool::of(
        &addr.ip().to_string(),
        addr.port(),
        SECOND,
        Duration::from_secs(60),
    )
}

#[tokio::test]
async fn requests_one_after_another_share_one_connection() {
    let (addr, peers) = server().await;
    let pool = pool_of(addr);
    for body in ["a", "b", "c"] {
        let resp = pool.send(post(addr, body)).await.expect("response");
        assert_eq!(text(resp).await, format!("echo {body}"));
    }
    assert_eq!(peers.lock().len(), 1);
    assert_eq!(pool.idle.lock().len(), 1, "the connection is idle again");
}

#[tokio::test]
async fn a_body_not_yet_read_keeps_its_connection_and_the_next_request_opens_another() {
    let (addr, peers) = server().await;
    let pool = pool_of(addr);
    let unread = pool.send(post(addr, "first")).await.expect("response");
    let resp = pool.send(post(addr, "second")).await.expect("response");
    assert_eq!(text(resp).await, "echo second");
    assert_eq!(peers.lock().len(), 2);
    assert_eq!(text(unread).await, "echo first");
    assert_eq!(pool.idle.lock().len(), 2);
    // Dropped unread, a body takes its connection with it.
    let dropped = pool.send(post(addr, "third")).await.expect("response");
    drop(dropped);
    assert_eq!(pool.idle.lock().len(), 1);
}

#[tokio::test]
async fn the_pool_of_an_origin_is_shared_and_other_origins_have_their_own() {
    let (a, _) = server().await;
    let (b, _) = server().await;
    assert!(Arc::ptr_eq(&pool_of(a), &pool_of(a)));
    assert!(!Arc::ptr_eq(&pool_of(a), &pool_of(b)));
}

#[tokio::test]
async fn a_connection_the_server_closed_is_not_used_again() {
    // One request per connection: the server closes each after answering.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let service = hyper::service::service_fn(|_req: http::Request<Incoming>| async {
                Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(Bytes::from_static(b"once"))))
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            tokio::spawn(conn);
        }
    });
    let pool = pool_of(addr);
    for _ in 0..3 {
        let resp = pool.send(post(addr, "x")).await.expect("response");
        assert_eq!(text(resp).await, "once");
        // Let the client see the close before the next request.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[tokio::test]
async fn idle_connections_past_their_time_are_closed_not_reused() {
    let (addr, peers) = server().await;
    let pool = Http1Pool::of(
        &addr.ip().to_string(),
        addr.port(),
        SECOND,
        Duration::from_millis(30),
    );
    let resp = pool.send(post(addr, "a")).await.expect("response");
    assert_eq!(text(resp).await, "echo a");
    tokio::time::sleep(Duration::from_millis(60)).await;
    let resp = pool.send(post(addr, "b")).await.expect("response");
    assert_eq!(text(resp).await, "echo b");
    assert_eq!(peers.lock().len(), 2);
}

#[tokio::test]
async fn nothing_listening_is_a_refused_connection_with_its_cause() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let Err(err) = pool_of(addr).send(post(addr, "x")).await else {
        panic!("nothing listens at {addr}");
    };
    let chain = super::super::http_client::error_chain(&err);
    assert!(chain.starts_with("cannot connect: "), "{chain}");
    let PoolError::Connect(io) = err else {
        panic!("{chain}");
    };
    assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused);
}
