//! Unit tests of a profile's view through the pipeline: a hub with two configured upstreams that
//! are never started, their catalog filled by hand, requests to a profile's endpoint (both eras).

use super::{request, Outcome};
use crate::catalog::ListKind;
use crate::config::Config;
use crate::core::context::RequestCtx;
use crate::core::hub::Hub;
use crate::protocol::{ClientCaps, RawObject, RequestId};
use crate::session::SessionState;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const CONFIG: &str = r#"
[gateway]
page_size = 1
[servers.t]
command = "unused"
[servers.u]
command = "unused"
[profiles.review]
path = "/mcp/review"
servers = ["t"]
tools = { exclude = ["t__add"] }
"#;

fn hub() -> Arc<Hub> {
    let config = Config::from_toml_str(CONFIG, "t.toml", &|_| None).unwrap();
    let (hub, _inputs) = Hub::new(Arc::new(config), CancellationToken::new(), None);
    let tools = |names: &[&str]| {
        (names.iter())
            .map(|name| RawObject::parse(&format!(r#"{{"name":"{name}"}}"#)).unwrap())
            .collect::<Vec<_>>()
    };
    hub.catalog
        .replace(&"t".into(), ListKind::Tools, tools(&["echo", "add", "sum"]));
    hub.catalog
        .replace(&"u".into(), ListKind::Tools, tools(&["echo"]));
    let resource = |uri: &str| RawObject::parse(&format!(r#"{{"uri":"{uri}","name":"r"}}"#)).unwrap();
    hub.catalog
        .replace(&"t".into(), ListKind::Resources, vec![resource("file:///t")]);
    hub.catalog
        .replace(&"u".into(), ListKind::Resources, vec![resource("file:///u")]);
    hub
}

fn profile_session(hub: &Hub) -> RequestCtx {
    let state = SessionState::new("2025-11-25", ClientCaps::ALL).in_profile(Some("review"));
    RequestCtx::on(hub.open_session("p".into(), state))
}

async fn reply(hub: &Arc<Hub>, ctx: &RequestCtx, method: &str, json: &str) -> serde_json::Value {
    let params = RawObject::parse(json).unwrap();
    match request(hub, ctx, RequestId::number(1), method.into(), params).await {
        Outcome::Reply(msg) => serde_json::from_str(&msg.to_json()).unwrap(),
        _ => panic!("{method}: not a reply"),
    }
}

/// Every tool name of a list, walking its pages; the cursors seen.
async fn walk(hub: &Arc<Hub>, ctx: &RequestCtx) -> (Vec<String>, Vec<String>) {
    let (mut names, mut cursors) = (Vec::new(), Vec::new());
    let mut params = "{}".to_string();
    loop {
        let page = reply(hub, ctx, "tools/list", &params).await;
        for tool in page["result"]["tools"].as_array().unwrap() {
            names.push(tool["name"].as_str().unwrap().to_string());
        }
        let Some(next) = page["result"]["nextCursor"].as_str() else {
            return (names, cursors);
        };
        cursors.push(next.to_string());
        params = serde_json::json!({ "cursor": next }).to_string();
    }
}

#[tokio::test]
async fn a_profile_lists_and_calls_only_its_view() {
    let hub = hub();
    let main = RequestCtx::on(hub.new_session("m".into(), "2025-11-25".into(), ClientCaps::ALL));
    let (all, main_cursors) = walk(&hub, &main).await;
    assert_eq!(all, ["t__add", "t__echo", "t__sum", "u__echo"]);
    for ctx in [
        profile_session(&hub),
        RequestCtx::modern().at(Some("review".into())),
    ] {
        let (seen, cursors) = walk(&hub, &ctx).await;
        assert_eq!(seen, ["t__echo", "t__sum"]);
        // The main endpoint's cursor pages no profile's list, and a profile's no main list.
        let foreign = serde_json::json!({ "cursor": main_cursors[0] }).to_string();
        assert_eq!(
            reply(&hub, &ctx, "tools/list", &foreign).await["error"]["code"],
            -32602
        );
        let theirs = serde_json::json!({ "cursor": cursors[0] }).to_string();
        assert_eq!(
            reply(&hub, &main, "tools/list", &theirs).await["error"]["code"],
            -32602
        );
        let resources = reply(&hub, &ctx, "resources/list", "{}").await;
        assert_eq!(resources["result"]["resources"][0]["uri"], "mcpmux://t/file:///t");
        assert!(resources["result"].get("nextCursor").is_none());
    }
    let ctx = profile_session(&hub);
    // Outside the view: the same answer as any unknown name (not "the upstream is down").
    for name in ["t__add", "u__echo", "nothing"] {
        let call = reply(&hub, &ctx, "tools/call", &format!(r#"{{"name":"{name}"}}"#)).await;
        assert_eq!(call["error"]["code"], -32602, "{name}: {call}");
        assert_eq!(
            call["error"]["message"],
            format!("Unknown tool: {name}"),
            "{name}"
        );
    }
    // In the view, the call goes on to the upstream (not connected here).
    let call = reply(&hub, &ctx, "tools/call", r#"{"name":"t__echo"}"#).await;
    assert_eq!(call["error"]["code"], -32000, "{call}");
    // The main endpoint still reaches everything.
    let call = reply(&hub, &main, "tools/call", r#"{"name":"u__echo"}"#).await;
    assert_eq!(call["error"]["code"], -32000, "{call}");
    let read = reply(&hub, &ctx, "resources/read", r#"{"uri":"mcpmux://u/file:///u"}"#).await;
    assert_eq!(read["error"]["code"], -32002, "{read}");
    let read = reply(&hub, &ctx, "resources/read", r#"{"uri":"file:///u"}"#).await;
    assert_eq!(read["error"]["code"], -32002, "{read}");
}

#[tokio::test]
async fn a_profile_that_a_reload_removed_sees_nothing() {
    let hub = hub();
    let ctx = profile_session(&hub);
    let mut config = Config::clone(&hub.config());
    config.profiles.clear();
    hub.replace_config(Arc::new(config));
    let (seen, _) = walk(&hub, &ctx).await;
    assert!(seen.is_empty());
    let call = reply(&hub, &ctx, "tools/call", r#"{"name":"t__echo"}"#).await;
    assert_eq!(call["error"]["code"], -32602);
}

#[tokio::test]
async fn a_profiles_sessions_and_listen_streams_hear_only_of_changes_to_its_view() {
    use crate::session::listeners::{Grant, Listener};
    use crate::upstream::host::{HostEvent, HostEvents};
    let hub = hub();
    // The lists the hub was filled with, announced (to no one yet).
    hub.sessions.emit(HostEvent::ListsChanged(&ListKind::ALL));
    let state = |profile| SessionState::new("2025-11-25", ClientCaps::ALL).in_profile(profile);
    let main = hub.open_session("m".into(), state(None));
    let mine = hub.open_session("p".into(), state(Some("review")));
    hub.sessions.insert(main.clone());
    hub.sessions.insert(mine.clone());
    let (mut main_rx, mut mine_rx) = (main.open_get_stream().unwrap(), mine.open_get_stream().unwrap());
    let listener = |profile: Option<&str>| {
        let (queue, rx) = tokio::sync::mpsc::channel(4);
        let grant = Grant {
            tools: true,
            ..Grant::default()
        };
        let profile = profile.map(Arc::from);
        let subscription = RequestId::number(1);
        (hub.sessions.listeners).insert(Listener {
            subscription,
            grant,
            queue,
            profile,
            viewer: None,
        });
        rx
    };
    let (mut main_listen, mut mine_listen) = (listener(None), listener(Some("review")));
    let tools = |names: &[&str]| {
        (names.iter())
            .map(|name| RawObject::parse(&format!(r#"{{"name":"{name}"}}"#)).unwrap())
            .collect::<Vec<_>>()
    };
    // A server outside the profile changes: the main endpoint's hosts only.
    hub.catalog
        .replace(&"u".into(), ListKind::Tools, tools(&["echo", "new"]));
    hub.sessions.emit(HostEvent::ListsChanged(&[ListKind::Tools]));
    assert!(main_rx.try_recv().unwrap().contains("tools/list_changed"));
    assert!(main_listen.try_recv().unwrap().contains("tools/list_changed"));
    assert!(mine_rx.try_recv().is_err() && mine_listen.try_recv().is_err());
    // A tool the profile's globs leave out: still nothing for it.
    hub.catalog
        .replace(&"t".into(), ListKind::Tools, tools(&["echo", "sum"]));
    hub.sessions.emit(HostEvent::ListsChanged(&[ListKind::Tools]));
    assert!(main_rx.try_recv().is_ok() && main_listen.try_recv().is_ok());
    assert!(mine_rx.try_recv().is_err() && mine_listen.try_recv().is_err());
    // One inside its view: everyone, once.
    hub.catalog
        .replace(&"t".into(), ListKind::Tools, tools(&["echo"]));
    hub.sessions.emit(HostEvent::ListsChanged(&[ListKind::Tools]));
    for rx in [&mut main_rx, &mut mine_rx, &mut main_listen, &mut mine_listen] {
        assert!(rx.try_recv().unwrap().contains("tools/list_changed"));
        assert!(rx.try_recv().is_err());
    }
    // A reload that widens the profile: its hosts hear of it, the main endpoint's do not.
    let mut config = Config::clone(&hub.config());
    config.profiles[0].servers = None;
    hub.replace_config(Arc::new(config));
    hub.sessions.profiles_changed();
    assert!(mine_rx.try_recv().unwrap().contains("tools/list_changed"));
    assert!(mine_listen.try_recv().is_ok());
    assert!(main_rx.try_recv().is_err() && main_listen.try_recv().is_err());
    // Resources changed in the view too (u's), prompts did not.
    assert!(mine_rx.try_recv().unwrap().contains("resources/list_changed"));
    assert!(mine_rx.try_recv().is_err());
}
