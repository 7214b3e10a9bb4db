//! The audit lines of the pipeline's own answers: a step-up refusal, a policy denial, and an
//! allowed request mcpmux answers itself (its upstream is down), for a token principal.

use super::methods::{request, Outcome};
use crate::audit::AuditLog;
use crate::auth::Principal;
use crate::catalog::ListKind;
use crate::config::Config;
use crate::core::context::RequestCtx;
use crate::core::hub::Hub;
use crate::protocol::{ClientCaps, RawObject, RequestId};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn step_up_refusals_denials_and_own_answers_are_audited() {
    let dir = std::env::temp_dir().join(format!("mcpmux-trail-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("audit.jsonl");
    let text = format!(
        "[servers.t]\ncommand = \"unused\"\n\n\
         [auth]\n[[auth.api_keys]]\nname = \"k\"\nkey = \"secret-key\"\n\
         [[auth.step_up]]\ntools = [\"t__echo\"]\nscopes = [\"mcp:write\"]\n\n\
         [[policy]]\nallow = [\"t__*\"]\ndeny = [\"t__add\"]\naudit_arguments = true\n\n\
         [audit]\npath = {:?}\n\n\
         [profiles.review]\npath = \"/mcp/review\"\nservers = [\"t\"]\n",
        path.display().to_string()
    );
    let config = Config::from_toml_str(&text, "t.toml", &|_| None).expect("config");
    let audit = AuditLog::open(config.audit.as_ref().expect("[audit]")).expect("open");
    let (hub, _inputs) = Hub::new(Arc::new(config), CancellationToken::new(), Some(audit.clone()));
    let tools = ["echo", "add"].map(|name| {
        RawObject::parse(&format!(
            r#"{{"name":"{name}","inputSchema":{{"type":"object"}}}}"#
        ))
        .expect("tool")
    });
    hub.catalog.replace(&"t".into(), ListKind::Tools, tools.into());
    let principal = Principal {
        name: "alice".into(),
        issuer: Some("https://idp.example".into()),
        client_id: Some("cli".into()),
        groups: Vec::new(),
        scopes: Vec::new(),
        token: None,
        claims: Vec::new(),
        credential: crate::auth::Credential::Token,
        certificate: None,
    };
    let session = hub.new_session("s".into(), "2025-11-25".into(), ClientCaps::ALL);
    let ctx = RequestCtx::on(session.clone()).by(Some(Arc::new(principal)));
    let call = |name: &str| {
        let params =
            RawObject::parse(&format!(r#"{{"name":"{name}","arguments":{{"x":1}}}}"#)).expect("params");
        request(&hub, &ctx, RequestId::number(1), "tools/call".into(), params)
    };
    assert!(matches!(call("t__echo").await, Outcome::Denied { .. }), "step-up");
    assert!(
        matches!(call("t__add").await, Outcome::Reply(_)),
        "denied by the policy"
    );
    assert!(matches!(call("t__nothing").await, Outcome::Reply(_)), "unknown");
    let at_review = RequestCtx::on(session.clone())
        .by(ctx.principal.clone())
        .at(Some("review".into()));
    let params = RawObject::parse(r#"{"name":"t__nothing"}"#).expect("params");
    let via_profile = request(
        &hub,
        &at_review,
        RequestId::number(2),
        "tools/call".into(),
        params,
    );
    assert!(matches!(via_profile.await, Outcome::Reply(_)), "at the profile");
    assert!(audit.flush(Duration::from_secs(10)).await);
    let lines: Vec<Value> = std::fs::read_to_string(&path)
        .expect("read")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    let summary: Vec<(&str, &str, &str)> = (lines.iter())
        .map(|l| {
            let what = l["decision"].as_str().or(l["outcome"].as_str()).unwrap_or("?");
            (
                l["event"].as_str().unwrap_or("?"),
                l["name"].as_str().unwrap_or("?"),
                what,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("decision", "t__echo", "denied"),
            ("decision", "t__add", "denied"),
            ("decision", "t__nothing", "allowed"),
            ("completed", "t__nothing", "error"),
            ("decision", "t__nothing", "allowed"),
            ("completed", "t__nothing", "error"),
        ]
    );
    let profiles: Vec<&Value> = lines.iter().map(|l| &l["profile"]).collect();
    assert_eq!(
        profiles,
        [
            &Value::Null,
            &Value::Null,
            &Value::Null,
            &Value::Null,
            &"review".into(),
            &"review".into()
        ],
        "the lines of a request at a profile's endpoint name the profile"
    );
    let step_up = &lines[0];
    assert!(
        step_up["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("step-up")),
        "{step_up}"
    );
    assert_eq!(step_up["rule"], "policy[0]");
    assert_eq!(step_up["arguments"], serde_json::json!({"x": 1}));
    assert_eq!(
        step_up["principal"],
        serde_json::json!({"issuer": "https://idp.example", "subject": "alice", "client_id": "cli"})
    );
    assert_eq!(
        (&step_up["upstream"], &step_up["original"]),
        (&"t".into(), &"echo".into())
    );
    // The name carries the prefix of an upstream that is not running: mcpmux answers that it is down.
    assert_eq!(
        lines[3]["error_code"],
        crate::protocol::codes::UPSTREAM_UNAVAILABLE
    );
    assert!(lines.iter().all(|l| !l.to_string().contains("secret-key")));
}
