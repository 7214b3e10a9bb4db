//! Unit tests of the pipeline: a hub with one configured upstream that is never started, its
//! catalog filled by hand, and requests served in both eras.

use super::{dispatch, request, Outcome};
use crate::catalog::ListKind;
use crate::config::Config;
use crate::core::context::RequestCtx;
use crate::core::hub::Hub;
use crate::protocol::message::{parse_message, raw};
use crate::protocol::{ClientCaps, Message, RawObject, RequestId};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

fn hub() -> Arc<Hub> {
    let config = Config::from_toml_str("[servers.t]\ncommand = \"unused\"\n", "t.toml", &|_| None).unwrap();
    let (hub, _inputs) = Hub::new(Arc::new(config), CancellationToken::new(), None);
    let tools = ["echo", "add"].map(|name| {
        RawObject::parse(&format!(
            r#"{{"name":"{name}","inputSchema":{{"type":"object"}}}}"#
        ))
        .unwrap()
    });
    hub.catalog.replace(&"t".into(), ListKind::Tools, tools.into());
    let resource = RawObject::parse(r#"{"uri":"file:///a","name":"a"}"#).unwrap();
    hub.catalog
        .replace(&"t".into(), ListKind::Resources, vec![resource]);
    hub
}

fn session_ctx(hub: &Hub) -> RequestCtx {
    RequestCtx::on(hub.new_session("s".into(), "2025-11-25".into(), ClientCaps::ALL))
}

fn params(json: &str) -> RawObject {
    RawObject::parse(json).unwrap()
}

/// The reply's JSON, for requests mcpmux answers itself.
async fn reply(hub: &Arc<Hub>, ctx: &RequestCtx, method: &str, json: &str) -> serde_json::Value {
    match request(hub, ctx, RequestId::number(1), method.into(), params(json)).await {
        Outcome::Reply(msg) => serde_json::from_str(&msg.to_json()).unwrap(),
        Outcome::Accepted => panic!("{method}: accepted"),
        Outcome::Forward(_) => panic!("{method}: forwarded"),
        Outcome::Denied { refusal, .. } | Outcome::Refused(refusal) => panic!("{method}: refused: {refusal}"),
    }
}

#[tokio::test]
async fn lists_come_from_the_catalog_in_the_request_era() {
    let hub = hub();
    let legacy = reply(&hub, &session_ctx(&hub), "tools/list", "{}").await;
    let names: Vec<&str> = (legacy["result"]["tools"].as_array().unwrap().iter())
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["t__add", "t__echo"]);
    assert!(legacy["result"].get("resultType").is_none());
    let modern = reply(&hub, &RequestCtx::modern(), "tools/list", "{}").await;
    assert_eq!(modern["result"]["tools"], legacy["result"]["tools"]);
    assert_eq!(modern["result"]["resultType"], "complete");
    assert!(modern["result"]["ttlMs"].is_u64());
    let bad = reply(
        &hub,
        &RequestCtx::modern(),
        "tools/list",
        r#"{"cursor":"forged"}"#,
    )
    .await;
    assert_eq!(bad["error"]["code"], -32602);
}

#[tokio::test]
async fn names_and_uris_resolve_through_the_catalog_only() {
    let hub = hub();
    let ctx = session_ctx(&hub);
    let unknown = reply(&hub, &ctx, "tools/call", r#"{"name":"echo"}"#).await;
    assert_eq!(
        unknown["error"]["code"], -32602,
        "an upstream's own name is not exposed"
    );
    let missing = reply(&hub, &ctx, "tools/call", "{}").await;
    assert_eq!(missing["error"]["message"], "params.name is required");
    let down = reply(&hub, &ctx, "tools/call", r#"{"name":"t__echo"}"#).await;
    assert_eq!(down["error"]["code"], -32000, "the upstream is not connected");
    assert_eq!(down["error"]["data"]["upstream"], "t");
    let resource = reply(&hub, &ctx, "resources/read", r#"{"uri":"mcpmux://other/x"}"#).await;
    assert_eq!(resource["error"]["code"], -32002);
    assert_eq!(resource["error"]["data"]["uri"], "mcpmux://other/x");
}

#[tokio::test]
async fn mcpmux_answers_what_it_owns() {
    let hub = hub();
    let ctx = session_ctx(&hub);
    assert_eq!(
        reply(&hub, &ctx, "ping", "{}").await["result"],
        serde_json::json!({})
    );
    assert_eq!(
        reply(&hub, &ctx, "initialize", "{}").await["error"]["code"],
        -32600
    );
    assert_eq!(
        reply(&hub, &ctx, "nope/nothing", "{}").await["error"]["code"],
        -32601
    );
    let level = reply(&hub, &ctx, "logging/setLevel", r#"{"level":"loud"}"#).await;
    assert_eq!(level["error"]["code"], -32602);
    let level = reply(&hub, &ctx, "logging/setLevel", r#"{"level":"warning"}"#).await;
    assert_eq!(level["result"], serde_json::json!({}));
    assert_eq!(ctx.session.as_ref().unwrap().log_level_name(), Some("warning"));
}

#[tokio::test]
async fn a_modern_reply_is_shaped_and_a_call_without_a_session_is_refused() {
    let hub = hub();
    let modern = RequestCtx::modern();
    let refused = reply(&hub, &modern, "tools/call", r#"{"name":"t__echo"}"#).await;
    assert_eq!(refused["error"]["code"], -32603);
    let discover = reply(&hub, &modern, "server/discover", "{}").await;
    assert!(discover["result"]["supportedVersions"].is_array());
    assert_eq!(discover["result"]["capabilities"]["tools"]["listChanged"], true);
}

#[tokio::test]
async fn messages_that_need_no_answer_are_accepted() {
    let hub = hub();
    let ctx = session_ctx(&hub);
    let bad_params = parse_message(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":[1]}"#).unwrap();
    let Outcome::Reply(msg) = dispatch(&hub, &ctx, bad_params).await else {
        panic!("a reply")
    };
    assert!(msg.to_json().contains("params must be an object"));
    let cancel =
        parse_message(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}"#)
            .unwrap();
    assert!(matches!(dispatch(&hub, &ctx, cancel).await, Outcome::Accepted));
}

#[tokio::test]
async fn a_replaced_config_holds_for_the_next_request() {
    let hub = hub();
    let ctx = session_ctx(&hub);
    let whole = reply(&hub, &ctx, "tools/list", "{}").await;
    assert!(whole["result"].get("nextCursor").is_none());
    let text = "[gateway]\npage_size = 1\n[servers.t]\ncommand = \"unused\"\n";
    hub.replace_config(Arc::new(
        Config::from_toml_str(text, "t.toml", &|_| None).unwrap(),
    ));
    let paged = reply(&hub, &ctx, "tools/list", "{}").await;
    assert_eq!(paged["result"]["tools"].as_array().unwrap().len(), 1);
    assert!(paged["result"]["nextCursor"].is_string());
}

#[tokio::test]
async fn params_of_the_wrong_shape_are_refused_before_any_upstream() {
    let hub = hub();
    for ctx in [session_ctx(&hub), RequestCtx::modern()] {
        for args in [r#""x""#, "[1,2]", "7"] {
            let json = format!(r#"{{"name":"t__echo","arguments":{args}}}"#);
            let refused = reply(&hub, &ctx, "tools/call", &json).await;
            assert_eq!(refused["error"]["code"], -32602, "{refused}");
            assert_eq!(refused["error"]["message"], "params.arguments must be an object");
        }
        let uri = reply(&hub, &ctx, "resources/read", r#"{"uri":{"a":1}}"#).await;
        assert_eq!(uri["error"]["message"], "params.uri must be a string");
    }
}

#[tokio::test]
async fn a_name_of_a_server_that_is_down_says_so_and_why() {
    let hub = hub();
    let ctx = session_ctx(&hub);
    // `t` never started: its tools are out of the catalog, yet the name is plainly its.
    let starting = reply(&hub, &ctx, "tools/call", r#"{"name":"t__gone"}"#).await;
    assert_eq!(starting["error"]["code"], -32000, "{starting}");
    assert_eq!(starting["error"]["data"]["upstream"], "t");
    let message = starting["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("starting") && message.contains("t__gone"),
        "{message}"
    );
    let slot = hub.upstreams.get(&"t".into()).unwrap();
    slot.state
        .failed("exited with status 1: no such table", std::time::Instant::now());
    let prompt = reply(&hub, &ctx, "prompts/get", r#"{"name":"t__p"}"#).await;
    let message = prompt["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("restarting") && message.contains("no such table"),
        "{message}"
    );
    let read = reply(&hub, &ctx, "resources/read", r#"{"uri":"mcpmux://t/file:///a"}"#).await;
    let message = read["error"]["message"].as_str().unwrap();
    assert_eq!(read["error"]["code"], -32000, "{read}");
    assert!(
        message.contains("no such table") && message.contains("once it is ready"),
        "{message}"
    );
    // A name with no configured namespace is still unknown.
    let unknown = reply(&hub, &ctx, "tools/call", r#"{"name":"zz__x"}"#).await;
    assert_eq!(unknown["error"]["code"], -32602);
    slot.state.ready();
    let ready = reply(&hub, &ctx, "tools/call", r#"{"name":"t__gone"}"#).await;
    assert_eq!(ready["error"]["message"], "Unknown tool: t__gone");
}

/// A host's answer under an id mcpmux sealed for its session reaches the request; under any
/// other id (a number, forged, another session's) it is refused (HTTP 400) and reaches nothing.
#[tokio::test]
async fn answers_to_server_requests_need_an_id_sealed_for_the_session() {
    use crate::protocol::ResponsePayload;
    use crate::upstream::server_requests::AnswerTo;
    let hub = hub();
    let ctx = session_ctx(&hub);
    let other = RequestCtx::on(hub.new_session("s2".into(), "2025-11-25".into(), ClientCaps::ALL));
    let session = ctx.session.clone().unwrap();
    let ask = |session: &Arc<crate::session::Session>| {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (_, json) = session
            .address_server_request(AnswerTo::Local(tx), "roots/list".into(), None)
            .unwrap();
        let Ok(Message::Request { id, .. }) = parse_message(&json) else {
            panic!("a request: {json}")
        };
        (id, rx)
    };
    let answer = |id: Option<RequestId>| Message::Response {
        id,
        payload: ResponsePayload::Result(raw("{\"roots\":[]}".into())),
    };
    let (id, mut rx) = ask(&session);
    assert!(id.as_string().is_some(), "a string id: {id}");
    let (others_id, _other_rx) = ask(other.session.as_ref().unwrap());
    let forged = {
        let mut text = id.as_string().unwrap();
        let last = if text.ends_with('A') { "B" } else { "A" };
        text.replace_range(text.len() - 1.., last);
        RequestId::string(&text)
    };
    for bad in [RequestId::number(1), forged, others_id, RequestId::string("1-1")] {
        match dispatch(&hub, &ctx, answer(Some(bad.clone()))).await {
            Outcome::Refused(refusal) => assert_eq!(refusal.status(), http::StatusCode::BAD_REQUEST),
            _ => panic!("{bad} was not refused"),
        }
    }
    assert!(rx.try_recv().is_err(), "nothing reached the request");
    assert!(matches!(
        dispatch(&hub, &ctx, answer(None)).await,
        Outcome::Accepted
    ));
    assert!(matches!(
        dispatch(&hub, &ctx, answer(Some(id.clone()))).await,
        Outcome::Accepted
    ));
    assert!(matches!(rx.try_recv(), Ok(ResponsePayload::Result(_))));
    // Answered: the same id again opens, but nothing waits for it any more.
    assert!(matches!(
        dispatch(&hub, &ctx, answer(Some(id))).await,
        Outcome::Accepted
    ));
}
