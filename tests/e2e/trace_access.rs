//! Spans and access lines of the same host requests, side by side (issue 25): the `mcpmux serve`
//! binary logs JSON with access lines and exports traces to a collector of the test's own, while
//! the real Python SDK client (both eras) works through it. Every host request has its SERVER
//! span and its access line, in the same trace; span names keep to the catalog's names.

use crate::support::otlp::*;
use crate::support::serve::ServeProcess;
use crate::support::*;
use serde_json::Value;
use std::time::{Duration, Instant};

const MODERN: &str = "2026-07-28";
const HOST_SPAN: &str = "b7ad6b7169203331";

/// The `mcpmux serve` binary in front of the test server (`tr`, with `echo` and `echo_meta`),
/// exporting spans to a collector of the test's own and logging JSON with access lines.
struct Watched {
    collected: Collected,
    gateway: ServeProcess,
    dir: std::path::PathBuf,
}

impl Watched {
    async fn start(tag: &str) -> Watched {
        let (collected, otlp_port) = start_collector("watched-gw").await;
        let dir = scratch_dir(tag);
        let servers = format!(
            "[telemetry]\notlp_endpoint = \"http://127.0.0.1:{otlp_port}\"\nservice_name = \"watched-gw\"\n\
             log_format = \"json\"\naccess_log = true\n\n[audit]\npath = {:?}\n\n{}",
            path_str(&dir.join("audit.log")),
            test_server_toml("tr", &["--tools", "0", "--echo-meta"], None),
        );
        let mut gateway = ServeProcess::start(&dir, "", &servers, &dir, &[]);
        gateway.wait_tools(&["tr__echo", "tr__echo_meta"]).await;
        Watched {
            collected,
            gateway,
            dir,
        }
    }

    /// The access lines logged so far.
    fn access_lines(&self) -> Vec<Value> {
        (self.gateway.log().lines())
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|line| line["target"] == "mcpmux::access")
            .collect()
    }

    /// The audit log's records.
    fn audit_lines(&self) -> Vec<Value> {
        (std::fs::read_to_string(self.dir.join("audit.log"))
            .unwrap_or_default()
            .lines())
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .collect()
    }

    /// The access lines of trace `trace` once `want` of them are logged and `want_spans` SERVER
    /// spans of it are exported (or, past the deadline, what there is), with those spans.
    async fn in_trace(&self, trace: &str, want: usize, want_spans: usize) -> (Vec<Value>, Vec<Value>) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let lines: Vec<Value> = (self.access_lines().into_iter())
                .filter(|l| l["trace_id"] == trace)
                .collect();
            let spans: Vec<Value> = (self.collected.spans().into_iter())
                .filter(|s| s["traceId"] == trace && s["kind"] == 2)
                .collect();
            if (lines.len() >= want && spans.len() >= want_spans) || Instant::now() > deadline {
                return (lines, spans);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// `py_client.py URL SCENARIO ARGS… --mode MODE` with, when given, the header `traceparent`
/// (trace `header`) on each request and `_meta.traceparent` (trace `meta`) on each tool call.
async fn python(
    url: &str,
    mode: &str,
    (header, meta): (Option<&str>, Option<&str>),
    args: &[&str],
) -> ClientRun {
    let mut cmd = std::process::Command::new(&peers().python);
    cmd.arg(repo_root().join("tests/clients/py_client.py"))
        .arg(url)
        .args(args)
        .args(["--mode", mode]);
    if let Some(trace) = header {
        cmd.env("MCPMUX_TEST_TRACEPARENT", format!("00-{trace}-{HOST_SPAN}-01"));
    }
    if let Some(meta) = meta {
        cmd.env(
            "MCPMUX_TEST_META_TRACEPARENT",
            format!("00-{meta}-{HOST_SPAN}-01"),
        );
    }
    tokio::task::spawn_blocking(move || run_client(cmd, Duration::from_secs(90)))
        .await
        .expect("python client")
}

fn names(spans: &[Value]) -> Vec<&str> {
    spans.iter().filter_map(|s| s["name"].as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_not_in_the_catalog_make_no_span_names_of_their_own() {
    let _suite = crate::suite::enter(module_path!());
    let watched = Watched::start("trace-access-names").await;
    let unknown = ["tr__nope-1", "tr__nope-2", "tr__nope-3"];
    for (mode, trace) in [
        ("legacy", "1bf92f3577b34da6a3ce929d0e0e4701"),
        (MODERN, "2bf92f3577b34da6a3ce929d0e0e4702"),
    ] {
        let mut args = vec!["shaped", "tr__echo", r#"{"message": "hi"}"#];
        args.extend(unknown);
        let run = python(&watched.gateway.url(), mode, (Some(trace), None), &args).await;
        run.assert_ok();
        let is_refused = |s: &&Value| attr(s, "gen_ai.tool.name").is_some_and(|n| n.starts_with("tr__nope"));
        // Spans arrive in export batches: wait for the last refused call's (bounded).
        let deadline = Instant::now() + Duration::from_secs(20);
        let spans = loop {
            let (_, spans) = watched.in_trace(trace, 0, 4).await;
            if spans.iter().filter(is_refused).count() >= unknown.len() || Instant::now() > deadline {
                break spans;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let refused: Vec<&Value> = spans.iter().filter(is_refused).collect();
        assert_eq!(refused.len(), unknown.len(), "{mode}: {:?}", names(&spans));
        for span in refused {
            assert_eq!(span["name"], "tools/call", "{mode}: {span}");
            assert_eq!(span["status"]["code"], 2, "{mode}: {span}");
        }
        assert!(
            names(&spans).contains(&"tools/call tr__echo"),
            "{mode}: a catalog name still names its span: {:?}",
            names(&spans)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_named_in_meta_is_the_trace_of_the_span_the_access_line_and_the_audit_record() {
    let _suite = crate::suite::enter(module_path!());
    let watched = Watched::start("trace-access-meta").await;
    // The session era with both contexts (`_meta` is the parent, the header a link), and the
    // 2026-07-28 era with `_meta` alone.
    for (mode, header, meta) in [
        (
            "legacy",
            Some("3bf92f3577b34da6a3ce929d0e0e4703"),
            "4bf92f3577b34da6a3ce929d0e0e4704",
        ),
        (MODERN, None, "5bf92f3577b34da6a3ce929d0e0e4705"),
    ] {
        let args = ["call", "tr__echo", r#"{"message": "meta"}"#];
        let run = python(&watched.gateway.url(), mode, (header, Some(meta)), &args).await;
        run.assert_ok();
        let (lines, spans) = watched.in_trace(meta, 1, 1).await;
        let call = (lines.iter())
            .find(|l| l["method"] == "tools/call")
            .unwrap_or_else(|| {
                panic!(
                    "{mode}: no access line in trace {meta}: {:#?}",
                    watched.access_lines()
                )
            });
        assert_eq!(call["name"], "tr__echo", "{mode}: {call}");
        let server = (spans.iter())
            .find(|s| s["name"] == "tools/call tr__echo")
            .unwrap_or_else(|| panic!("{mode}: no SERVER span in trace {meta}: {spans:#?}"));
        assert_eq!(server["parentSpanId"], HOST_SPAN, "{mode}: {server}");
        if let Some(header) = header {
            assert_eq!(server["links"][0]["traceId"], header, "{mode}: {server}");
            let in_header_trace = (watched.access_lines().into_iter())
                .filter(|l| l["trace_id"] == header && l["method"] == "tools/call")
                .count();
            assert_eq!(
                in_header_trace, 0,
                "{mode}: the call's access line names the header's trace"
            );
        }
        let audited: Vec<Value> = (watched.audit_lines().into_iter())
            .filter(|l| l["method"] == "tools/call" && l["trace_id"] == meta)
            .collect();
        let events: Vec<&Value> = audited.iter().map(|l| &l["event"]).collect();
        assert_eq!(
            events,
            ["decision", "completed"],
            "{mode}: {:#?}",
            watched.audit_lines()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_07_28_requests_access_line_names_the_client_its_meta_names() {
    let _suite = crate::suite::enter(module_path!());
    let watched = Watched::start("trace-access-client").await;
    let mut named = Vec::new();
    for (mode, trace) in [
        ("legacy", "6bf92f3577b34da6a3ce929d0e0e4706"),
        (MODERN, "7bf92f3577b34da6a3ce929d0e0e4707"),
    ] {
        let args = ["call", "tr__echo", r#"{"message": "who"}"#];
        let run = python(&watched.gateway.url(), mode, (Some(trace), None), &args).await;
        run.assert_ok();
        let (lines, _) = watched.in_trace(trace, 2, 0).await;
        for method in ["tools/list", "tools/call"] {
            let line = (lines.iter())
                .find(|l| l["method"] == method)
                .unwrap_or_else(|| panic!("{mode}: no {method} access line: {lines:#?}"));
            let client = (line["client_name"].clone(), line["client_version"].clone());
            assert!(
                client.0.as_str().is_some_and(|s| !s.is_empty())
                    && client.1.as_str().is_some_and(|s| !s.is_empty()),
                "{mode} {method}: {line}"
            );
            named.push(client);
        }
    }
    // The same SDK names itself the same way in both eras (in `initialize`, then in `_meta`).
    assert!(named.windows(2).all(|w| w[0] == w[1]), "{named:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_and_every_other_host_request_has_a_server_span_and_an_access_line() {
    let _suite = crate::suite::enter(module_path!());
    let watched = Watched::start("trace-access-initialize").await;
    let trace = "8bf92f3577b34da6a3ce929d0e0e4708";
    let args = ["call", "tr__echo", r#"{"message": "init"}"#];
    let run = python(&watched.gateway.url(), "legacy", (Some(trace), None), &args).await;
    run.assert_ok();
    // initialize, tools/list, tools/call (the notification initialized is no request).
    let (lines, spans) = watched.in_trace(trace, 3, 3).await;
    let sorted = |mut of: Vec<String>| {
        of.sort_unstable();
        of
    };
    let logged = sorted(
        lines
            .iter()
            .filter_map(|l| l["method"].as_str().map(String::from))
            .collect(),
    );
    let spanned = sorted(spans.iter().filter_map(|s| attr(s, "mcp.method.name")).collect());
    assert!(logged.iter().any(|m| m == "initialize"), "{lines:#?}");
    assert_eq!(
        logged, spanned,
        "each request has its access line and its SERVER span"
    );
    let init = (lines.iter())
        .find(|l| l["method"] == "initialize")
        .expect("initialize");
    assert_eq!(init["outcome"], "ok", "{init}");
    assert!(init["session"].as_str().is_some_and(|s| !s.is_empty()), "{init}");
    assert!(
        init["client_name"].as_str().is_some_and(|s| !s.is_empty()),
        "{init}"
    );
    let span = (spans.iter())
        .find(|s| s["name"] == "initialize")
        .expect("initialize span");
    assert_eq!(span["parentSpanId"], HOST_SPAN, "{span}");
    assert!(attr(span, "mcp.session.id").is_some(), "{span}");
    assert!(
        attr(span, "mcp.protocol.version").is_some_and(|v| v != MODERN),
        "{span}"
    );

    // Over legacy HTTP+SSE too (its messages are served after their POSTs were answered, so
    // they are in traces of their own).
    let count = || {
        let lines = watched.access_lines();
        let lines = lines.iter().filter(|l| l["method"] == "initialize").count();
        let spans = watched.collected.spans();
        (lines, spans.iter().filter(|s| s["name"] == "initialize").count())
    };
    let before = count();
    let sse = format!("http://127.0.0.1:{}/sse", watched.gateway.port);
    let sse_args = ["tr__echo", r#"{"message": "sse"}"#, "--transport", "sse"];
    run_py_client_async(&sse, "call", &sse_args).await.assert_ok();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = count();
        if now == (before.0 + 1, before.1 + 1) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "initialize (access lines, spans): {before:?} then {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_and_audit_records_name_a_session_by_a_short_digest_never_by_its_id() {
    let _suite = crate::suite::enter(module_path!());
    let watched = Watched::start("trace-access-digest").await;
    let raw = crate::support::mcp::RawSession::open(&watched.gateway.url(), serde_json::json!({})).await;
    assert!(raw.sid.len() > 100, "a sealed session id: {}", raw.sid);
    let text = raw
        .tool_text("tr__echo", serde_json::json!({"message": "digest"}))
        .await;
    assert!(text.contains("digest"), "{text}");
    raw.delete().await;
    let trace = "9bf92f3577b34da6a3ce929d0e0e4709";
    let args = ["call", "tr__echo", r#"{"message": "py"}"#];
    python(&watched.gateway.url(), "legacy", (Some(trace), None), &args)
        .await
        .assert_ok();
    let (python_lines, _) = watched.in_trace(trace, 3, 0).await;

    let short = session_digest(&raw.sid);
    let deadline = Instant::now() + Duration::from_secs(20);
    let lines = loop {
        let lines: Vec<Value> = (watched.access_lines().into_iter())
            .filter(|l| l["session"] == short.as_str())
            .collect();
        if lines.len() >= 2 || Instant::now() > deadline {
            break lines;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let methods: Vec<&str> = lines.iter().filter_map(|l| l["method"].as_str()).collect();
    assert!(
        methods.contains(&"tools/call"),
        "{methods:?}: {:#?}",
        watched.access_lines()
    );
    let audited: Vec<Value> = (watched.audit_lines().into_iter())
        .filter(|l| l["method"] == "tools/call" && l["session"] == short.as_str())
        .collect();
    assert!(!audited.is_empty(), "{:#?}", watched.audit_lines());
    for line in &python_lines {
        let session = line["session"].as_str().unwrap_or_default();
        assert_eq!(session.len(), 16, "{line}");
    }
    let log = watched.gateway.log();
    let audit = std::fs::read_to_string(watched.dir.join("audit.log")).unwrap_or_default();
    for (what, text) in [("the log", &log), ("the audit log", &audit)] {
        assert!(!text.contains(&raw.sid), "the session id in {what}");
        assert!(
            !text.contains(&raw.sid[..40]),
            "a piece of the session id in {what}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authentication_refusal_is_logged_in_words_with_its_peer_and_without_the_token() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("trace-access-auth");
    let servers = format!(
        "[auth]\n[[auth.api_keys]]\nname = \"ci\"\nkey = \"right-key-0123456789\"\n\n{}",
        test_server_toml("tr", &["--tools", "0"], None)
    );
    let gateway = ServeProcess::start(&dir, "", &servers, &dir, &[]);
    assert!(
        wait_for_port(gateway.port, Duration::from_secs(30)),
        "the gateway never listened"
    );
    let wrong = "wrong-key-never-logged-7f3a";
    let mut cmd = std::process::Command::new(&peers().python);
    cmd.arg(repo_root().join("tests/clients/py_client.py"))
        .args([&gateway.url(), "smoke", "--mode", "legacy"])
        .env("MCPMUX_TEST_BEARER", wrong);
    let run = tokio::task::spawn_blocking(move || run_client(cmd, Duration::from_secs(90)))
        .await
        .expect("python client");
    assert!(!run.success(), "a wrong key was let in:\n{run}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let refused = loop {
        let log = gateway.log();
        let found = (log.lines())
            .find(|l| l.contains("authentication refused"))
            .map(String::from);
        if let Some(line) = found {
            break line;
        }
        assert!(Instant::now() < deadline, "no refusal logged:\n{log}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(refused.contains("WARN"), "{refused}");
    assert!(refused.contains("invalid token (unknown API key"), "{refused}");
    assert!(refused.contains("peer=127.0.0.1:"), "{refused}");
    assert!(refused.contains("path=/mcp"), "{refused}");
    let log = gateway.log();
    assert!(!log.contains(wrong), "the token in the log:\n{log}");
    assert!(
        !log.contains("InvalidToken("),
        "a refusal in Rust debug form:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_07_28_request_refused_for_its_envelope_has_its_span_and_access_line() {
    let _suite = crate::suite::enter(module_path!());
    let watched = Watched::start("trace-access-refused").await;
    let trace = "abf92f3577b34da6a3ce929d0e0e470a";
    // A 2026-07-28 request (by its header) whose params lack the `_meta` envelope: -32602.
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"});
    let response = reqwest::Client::new()
        .post(watched.gateway.url())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/list")
        .header("traceparent", format!("00-{trace}-{HOST_SPAN}-01"))
        .body(body.to_string())
        .send()
        .await
        .expect("POST");
    assert_eq!(response.status(), 400);
    let (lines, spans) = watched.in_trace(trace, 1, 1).await;
    let line = (lines.iter())
        .find(|l| l["method"] == "tools/list")
        .unwrap_or_else(|| panic!("no access line: {:#?}", watched.access_lines()));
    assert_eq!(line["outcome"], "-32602", "{line}");
    let span = (spans.iter())
        .find(|s| s["name"] == "tools/list")
        .unwrap_or_else(|| panic!("no SERVER span: {spans:#?}"));
    assert_eq!(attr(span, "error.type").as_deref(), Some("-32602"), "{span}");
    assert_eq!(span["parentSpanId"], HOST_SPAN, "{span}");
}
