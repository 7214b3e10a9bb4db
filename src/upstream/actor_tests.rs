//! Unit tests of the connection actor, with the test playing the server over an in-memory
//! transport: replies, cancellation, server-to-client routing, progress under back-pressure and
//! a lost connection.

use super::call_channel::{call_channel, CallEvents};
use super::connection::{Actor, ConnectionContext, Inbound, Transport};
use super::host::{HostKey, HostLink, NoHosts, TestHost};
use super::ties::HostTies;
use super::{
    CallEvent, CallOrigin, CallParams, OutboundCall, Status, UpstreamHandle, CALL_EVENT_QUEUE, COMMAND_QUEUE,
};
use crate::catalog::Naming;
use crate::config::{Config, UpstreamId};
use crate::protocol::message::{parse_message, raw};
use crate::protocol::{Message, RequestId};
use crate::util::fast_map::FastMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

fn host(key: HostKey) -> Arc<dyn HostLink> {
    TestHost::link(key)
}

/// A connection whose server is the test.
struct Harness {
    handle: UpstreamHandle,
    ties: Arc<HostTies>,
    to_server: mpsc::UnboundedReceiver<String>,
    from_server: mpsc::Sender<Inbound>,
}

impl Harness {
    async fn start() -> Harness {
        let toml = "[servers.t]\ncommand = \"unused\"\nera = \"session\"\nhealth_check_interval_secs = 0\n";
        let config = Config::from_toml_str(toml, "test.toml", &|_| None).unwrap();
        let ties = Arc::new(HostTies::new());
        let (events, _) = mpsc::channel(8);
        let ctx = ConnectionContext {
            server: Arc::new(config.servers[0].clone()),
            tunables: crate::upstream::tunables::live(&config.servers[0]),
            id: UpstreamId::new("t"),
            naming: Naming::new("t", "__"),
            hosts: Arc::new(NoHosts),
            ties: ties.clone(),
            events,
            owner: None,
            learned: Arc::default(),
            bearer: None,
        };
        let (commands_tx, commands) = mpsc::channel(COMMAND_QUEUE);
        let (status, status_rx) = watch::channel(Status::Starting);
        let stop = CancellationToken::new();
        let handle = UpstreamHandle::new(
            "t".into(),
            UpstreamId::new("t"),
            commands_tx,
            status_rx,
            stop.clone(),
        );
        let actor = Actor {
            ctx,
            handle: handle.clone(),
            pending: FastMap::default(),
            status,
            modern: false,
        };
        let (server_tx, to_server) = mpsc::unbounded_channel();
        let (from_server, inbound) = mpsc::channel(64);
        tokio::spawn(actor.serve(Transport::Memory(server_tx), inbound, commands, stop));
        let mut harness = Harness {
            handle,
            ties,
            to_server,
            from_server,
        };
        let init = harness.read().await;
        let id = init["id"].clone();
        harness
            .reply(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"t","version":"1"}}}}}}"#
            ))
            .await;
        assert_eq!(harness.read().await["method"], "notifications/initialized");
        harness.handle.wait_ready(Duration::from_secs(5)).await.unwrap();
        harness
    }

    /// The next frame the actor sent the server.
    async fn read(&mut self) -> serde_json::Value {
        let frame = tokio::time::timeout(Duration::from_secs(5), self.to_server.recv())
            .await
            .expect("the actor sends a frame")
            .expect("the actor is running");
        serde_json::from_str(&frame).unwrap()
    }

    /// The server sends `json`.
    async fn reply(&self, json: &str) {
        let msg = parse_message(json).unwrap();
        self.from_server
            .send(Inbound::Message { msg, via: None })
            .await
            .unwrap();
    }

    /// A host call; returns its upstream id and its events.
    fn call(&self, host: &Arc<dyn HostLink>, method: &str) -> (u64, CallEvents) {
        let (sink, events) = call_channel(CALL_EVENT_QUEUE);
        let upstream_id = self.handle.next_id();
        let call = OutboundCall {
            upstream_id,
            method: method.into(),
            params: Some(CallParams::Raw(raw(format!(
                r#"{{"_meta":{{"progressToken":{upstream_id}}}}}"#
            )))),
            param_headers: Vec::new(),
            origin: CallOrigin::Host {
                host: host.clone(),
                sink,
            },
            span: tracing::Span::none(),
            trace_headers: Vec::new(),
            target: None,
        };
        self.handle.send_call(call).unwrap();
        (upstream_id, events)
    }
}

async fn next(events: &mut CallEvents) -> CallEvent {
    tokio::time::timeout(Duration::from_secs(5), events.recv())
        .await
        .expect("an event in time")
        .expect("the call is open")
}

#[tokio::test]
async fn a_reply_reaches_the_call_that_sent_the_request() {
    let mut h = Harness::start().await;
    let (id, mut events) = h.call(&host(1), "tools/call");
    let sent = h.read().await;
    assert_eq!(
        (sent["id"].as_u64(), sent["method"].as_str()),
        (Some(id), Some("tools/call"))
    );
    h.reply(&format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[]}}}}"#
    ))
    .await;
    assert!(matches!(
        next(&mut events).await,
        CallEvent::Response(Message::Response { .. })
    ));
}

#[tokio::test]
async fn a_cancelled_call_is_cancelled_upstream_and_its_late_reply_dropped() {
    let mut h = Harness::start().await;
    let (id, mut events) = h.call(&host(1), "tools/call");
    h.read().await;
    h.handle.cancel(id, "the host cancelled");
    let cancel = h.read().await;
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert_eq!(cancel["params"]["requestId"].as_u64(), Some(id));
    h.reply(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#))
        .await;
    // The actor forgot the call: its sink is gone, and no response ever arrives.
    assert!(tokio::time::timeout(Duration::from_secs(5), events.recv())
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn a_server_request_goes_to_the_oldest_call_and_its_answer_comes_back() {
    let mut h = Harness::start().await;
    let (a, b) = (host(1), host(2));
    let (_, mut a_events) = h.call(&a, "tools/call");
    tokio::time::sleep(Duration::from_millis(5)).await;
    let (_, b_events) = h.call(&b, "tools/call");
    h.read().await;
    h.read().await;
    h.reply(r#"{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"maxTokens":1}}"#)
        .await;
    let CallEvent::ServerRequest(json) = next(&mut a_events).await else {
        panic!("the oldest call's host gets the request")
    };
    let Ok(Message::Request { id, .. }) = parse_message(&json) else {
        panic!("a request")
    };
    let downstream = id.as_u64().unwrap();
    assert_eq!(h.ties.routes.waiting_for(a.key()), 1);
    let answer = crate::protocol::ResponsePayload::Result(raw(r#"{"role":"assistant"}"#.into()));
    assert!(
        !h.ties.routes.answer(b.key(), downstream, answer),
        "only its host may answer"
    );
    let answer = crate::protocol::ResponsePayload::Result(raw(r#"{"role":"assistant"}"#.into()));
    assert!(h.ties.routes.answer(a.key(), downstream, answer));
    let back = h.read().await;
    assert_eq!(
        (back["id"].as_str(), back["result"]["role"].as_str()),
        (Some("s1"), Some("assistant"))
    );
    // The upstream asks again, then withdraws: the host hears of it under its own id.
    h.reply(r#"{"jsonrpc":"2.0","id":"s2","method":"roots/list"}"#)
        .await;
    let CallEvent::ServerRequest(json) = next(&mut a_events).await else {
        panic!("the second request")
    };
    let Ok(Message::Request { id: second, .. }) = parse_message(&json) else {
        panic!("a request")
    };
    h.reply(
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s2","reason":"late"}}"#,
    )
    .await;
    let CallEvent::Notification(cancel) = next(&mut a_events).await else {
        panic!("the host is told")
    };
    assert!(cancel
        .to_json()
        .contains(&format!(r#""requestId":{}"#, second.as_json())));
    assert_eq!(h.ties.routes.waiting_for(a.key()), 0);
    assert!(b_events.superseded_progress() == 0);
}

#[tokio::test]
async fn progress_a_host_does_not_read_keeps_the_newest_and_the_reply_still_arrives() {
    let mut h = Harness::start().await;
    let (id, mut events) = h.call(&host(1), "tools/call");
    h.read().await;
    let total = CALL_EVENT_QUEUE + 20;
    for n in 1..=total {
        h.reply(&format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{id},"progress":{n}}}}}"#
        ))
        .await;
    }
    h.reply(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#))
        .await;
    // A ping round trip: once it is answered, the actor has handled everything sent before it.
    h.reply(r#"{"jsonrpc":"2.0","id":"sync","method":"ping"}"#).await;
    assert_eq!(h.read().await["id"], "sync");
    let mut last_progress = 0;
    loop {
        match next(&mut events).await {
            CallEvent::Notification(msg) => {
                let value: serde_json::Value = serde_json::from_str(&msg.to_json()).unwrap();
                last_progress = value["params"]["progress"].as_u64().unwrap();
            }
            CallEvent::Response(_) => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        last_progress, total as u64,
        "the newest progress is never dropped"
    );
    assert!(events.superseded_progress() > 0);
}

#[tokio::test]
async fn a_lost_connection_fails_every_call_and_forgets_its_routes() {
    let mut h = Harness::start().await;
    let a = host(1);
    let (_, mut events) = h.call(&a, "tools/call");
    h.read().await;
    h.reply(r#"{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{"message":"?"}}"#)
        .await;
    assert!(matches!(next(&mut events).await, CallEvent::ServerRequest(_)));
    h.from_server
        .send(Inbound::Closed("the server went away".into()))
        .await
        .unwrap();
    assert!(matches!(next(&mut events).await, CallEvent::Failed(_)));
    tokio::time::timeout(Duration::from_secs(5), h.handle.closed())
        .await
        .unwrap();
    assert!(h.handle.is_down());
    assert_eq!(h.ties.routes.waiting_for(a.key()), 0);
    let late = RequestId::number(7);
    assert!(h.ties.routes.withdraw(&h.handle, &late).is_none());
}
