//! Metrics and logs (issue 18): a real Prometheus (Debian's) scrapes `GET /metrics` on
//! `admin_listen` while real clients call real servers through the `mcpmux serve` binary, and
//! `promtool check metrics` passes on the exposition; the operator rule of `/metrics` (401
//! without credentials, 403 without `mcpmux:admin`, 200 with it or on `admin_listen`); the JSON
//! log, parsed line by line, with the access lines and their fields (Streamable HTTP, and a real
//! client over legacy HTTP+SSE).

use crate::support::mcp::RawSession;
use crate::support::prometheus::{promtool_check, samples, value, Prometheus, Sample};
use crate::support::serve::ServeProcess;
use crate::support::{
    boot_gateway, free_port, peers, run_py_client_async, scratch_dir, test_server_toml, toml_list,
};
use serde_json::{json, Value};
use std::time::Duration;

/// A tool argument that must never reach a label, the exposition or a span.
const SECRET: &str = "secret-argument-5c0ffee";

const HOST: &str = "mcp_server_operation_duration_seconds_count";
const LEG: &str = "mcp_client_operation_duration_seconds_count";

/// `[servers.NAME]` for mcp-server-time (PyPI) over stdio.
fn time_stdio(name: &str) -> String {
    let (python, args) = &peers().time_cmd;
    let python = python.to_str().expect("UTF-8 python path");
    format!(
        "[servers.{name}]\ncommand = {python:?}\nargs = {}\n\n",
        toml_list(args)
    )
}

/// The exposition at `url`, checked to be Prometheus text format 0.0.4.
async fn scrape(url: &str) -> String {
    let response = reqwest::get(url).await.expect("GET /metrics");
    assert_eq!(response.status(), 200, "{url}");
    let content_type = response.headers()["content-type"].to_str().unwrap().to_string();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    response.text().await.unwrap()
}

fn exactly(samples: &[Sample], name: &str, labels: &[(&str, &str)], absent: &[&str]) -> f64 {
    value(samples, name, labels, absent)
        .unwrap_or_else(|| panic!("no {name} {labels:?} (without {absent:?})"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_a_run_of_real_clients() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("metrics-prometheus");
    let admin_port = free_port();
    let servers = format!("{}\n{}", test_server_toml("t", &[], None), time_stdio("time"));
    let admin = format!("admin_listen = \"127.0.0.1:{admin_port}\"");
    let mut gateway = ServeProcess::start(&dir, &admin, &servers, &dir, &[]);
    gateway.wait_tools(&["t__echo", "time__get_current_time"]).await;
    let prometheus = Prometheus::scraping(&dir, &format!("127.0.0.1:{admin_port}"), "/metrics");

    // A real client (the Python SDK) calls both real servers through mcpmux.
    let echo = json!({ "message": SECRET }).to_string();
    let time = r#"{"timezone": "UTC"}"#;
    let calls = [
        "t__echo",
        &echo,
        "t__echo",
        &echo,
        "t__echo",
        &echo,
        "time__get_current_time",
        time,
    ];
    let run = run_py_client_async(&gateway.url(), "call", &calls).await;
    run.assert_ok();
    // A tool error (echo without its argument) and a tool the catalog does not have.
    let raw = RawSession::open(&gateway.url(), json!({})).await;
    let failed = raw
        .call("tools/call", json!({"name": "t__echo", "arguments": {}}))
        .await;
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    let unknown = raw
        .call(
            "tools/call",
            json!({"name": format!("t__nope-{SECRET}"), "arguments": {}}),
        )
        .await;
    assert!(
        unknown.get("error").is_some() || unknown["result"]["isError"] == true,
        "{unknown}"
    );

    let exposition = scrape(&format!("http://127.0.0.1:{admin_port}/metrics")).await;
    let (ok, said) = promtool_check(&exposition);
    assert!(ok, "promtool check metrics: {said}\n{exposition}");
    assert!(
        !exposition.contains(SECRET),
        "an argument in the exposition:\n{exposition}"
    );
    assert!(
        !exposition.contains(&raw.sid),
        "a session id in the exposition:\n{exposition}"
    );
    let all = samples(&exposition);
    let call = ("mcp_method_name", "tools/call");
    // Host-facing: the three echo calls, the tool error, the time call, the unknown name.
    let echo_ok = [call, ("gen_ai_tool_name", "t__echo"), ("upstream", "t")];
    assert_eq!(
        exactly(&all, HOST, &echo_ok, &["error_type"]),
        3.0,
        "{exposition}"
    );
    let tool_error = [
        call,
        ("gen_ai_tool_name", "t__echo"),
        ("error_type", "tool_error"),
    ];
    assert_eq!(exactly(&all, HOST, &tool_error, &[]), 1.0);
    let time_ok = [
        call,
        ("gen_ai_tool_name", "time__get_current_time"),
        ("upstream", "time"),
    ];
    assert_eq!(exactly(&all, HOST, &time_ok, &["error_type"]), 1.0);
    let other: Vec<&Sample> = (all.iter())
        .filter(|s| s.name == HOST && s.labels.get("gen_ai_tool_name").map(String::as_str) == Some("_OTHER"))
        .collect();
    assert!(
        other.len() == 1 && other[0].value == 1.0 && other[0].labels.contains_key("error_type"),
        "the unknown tool: {other:?}"
    );
    // Upstream legs of the calls, each labelled with the tool as its upstream knows it (a leg
    // is mcpmux's request to that upstream), and nothing left in flight.
    let echo_leg = [call, ("gen_ai_tool_name", "echo"), ("upstream", "t")];
    assert_eq!(exactly(&all, LEG, &echo_leg, &["error_type"]), 3.0);
    let echo_failed = [
        call,
        ("gen_ai_tool_name", "echo"),
        ("upstream", "t"),
        ("error_type", "tool_error"),
    ];
    assert_eq!(exactly(&all, LEG, &echo_failed, &[]), 1.0);
    let time_leg = [
        call,
        ("gen_ai_tool_name", "get_current_time"),
        ("upstream", "time"),
    ];
    assert_eq!(exactly(&all, LEG, &time_leg, &["error_type"]), 1.0);
    assert!(
        (all.iter())
            .filter(|s| s.name == LEG
                && s.labels.get("mcp_method_name").map(String::as_str) == Some("tools/call"))
            .all(|s| s.labels.contains_key("gen_ai_tool_name")),
        "a tools/call leg without its tool: {exposition}"
    );
    let in_flight = "mcpmux_upstream_requests_in_flight";
    assert_eq!(exactly(&all, in_flight, &[("upstream", "t")], &[]), 0.0);
    // State: phases, restarts, lists, sessions.
    let phase = "mcpmux_upstream_phase";
    assert_eq!(
        exactly(&all, phase, &[("upstream", "t"), ("phase", "ready")], &[]),
        1.0
    );
    assert_eq!(
        exactly(&all, phase, &[("upstream", "t"), ("phase", "crash-loop")], &[]),
        0.0
    );
    assert_eq!(
        exactly(
            &all,
            "mcpmux_upstream_restarts_total",
            &[("upstream", "time")],
            &[]
        ),
        0.0
    );
    let tools = [("upstream", "t"), ("list", "tools")];
    assert!(exactly(&all, "mcpmux_list_refreshes_total", &tools, &[]) >= 1.0);
    let open = [("era", "session"), ("transport", "streamable_http")];
    assert!(exactly(&all, "mcpmux_sessions_active", &open, &[]) >= 1.0);

    // Prometheus scraped it during the run: the series are in its database.
    let up = prometheus
        .wait_value("up{job=\"mcpmux\"}", |v| v == 1.0, Duration::from_secs(30))
        .await;
    assert_eq!(up, 1.0);
    let query =
        "sum(mcp_server_operation_duration_seconds_count{gen_ai_tool_name=\"t__echo\",error_type=\"\"})";
    prometheus
        .wait_value(query, |v| v == 3.0, Duration::from_secs(30))
        .await;
    let query = "sum(mcp_client_operation_duration_seconds_count{gen_ai_tool_name=\"get_current_time\",upstream=\"time\"})";
    prometheus
        .wait_value(query, |v| v == 1.0, Duration::from_secs(30))
        .await;
    let query = "mcpmux_upstream_phase{upstream=\"time\",phase=\"ready\"}";
    prometheus
        .wait_value(query, |v| v == 1.0, Duration::from_secs(30))
        .await;
    raw.delete().await;
}

/// A gateway with `[auth]` (two API keys) in front of the test server; `ops` may see the
/// operator routes, `dev` may call tools only.
fn auth_config() -> (String, String) {
    let servers = test_server_toml("t", &[], None);
    let auth = "[auth]\n\
        [[auth.api_keys]]\nname = \"ops\"\nkey = \"ops-key-0123456789\"\n\
        [[auth.api_keys]]\nname = \"dev\"\nkey = \"dev-key-0123456789\"\n\
        [[policy]]\nprincipals = [\"ops\"]\nallow = [\"mcpmux:admin\"]\n\
        [[policy]]\nprincipals = [\"dev\"]\nallow = [\"*\"]\n";
    (format!("{servers}\n{auth}"), String::new())
}

async fn get(url: &str, token: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new().get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.expect("GET")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_the_admin_page_need_an_admin_principal_when_auth_is_on_without_admin_listen() {
    let _suite = crate::suite::enter(module_path!());
    let (servers, _) = auth_config();
    let gateway = boot_gateway(&servers, "").await;
    let url = format!("http://{}/metrics", gateway.local_addr());

    let refused = get(&url, None).await;
    assert_eq!(refused.status(), 401);
    let challenge = refused.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(challenge.starts_with("Bearer"), "{challenge}");
    // A principal whose rules allow every tool, but not mcpmux's own permission.
    assert_eq!(get(&url, Some("dev-key-0123456789")).await.status(), 403);
    assert_eq!(get(&url, Some("wrong-key-0123456789")).await.status(), 401);
    let allowed = get(&url, Some("ops-key-0123456789")).await;
    assert_eq!(allowed.status(), 200);
    let content_type = allowed.headers()["content-type"].to_str().unwrap().to_string();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let exposition = allowed.text().await.unwrap();
    // The refusals above were counted, and no token is anywhere.
    assert!(
        exposition.contains("mcpmux_refusals_total{reason=\"auth\"}"),
        "{exposition}"
    );
    assert!(!exposition.contains("key-0123456789"), "{exposition}");
    // The admin page and its event stream sit behind the same rule.
    for path in ["/admin", "/admin/events", "/admin/app.js"] {
        let url = format!("http://{}{path}", gateway.local_addr());
        assert_eq!(get(&url, None).await.status(), 401, "{path}");
        assert_eq!(
            get(&url, Some("dev-key-0123456789")).await.status(),
            403,
            "{path}"
        );
        assert_eq!(
            get(&url, Some("ops-key-0123456789")).await.status(),
            200,
            "{path}"
        );
    }
    // The probes keep their own rule: open.
    assert_eq!(
        get(&format!("http://{}/healthz", gateway.local_addr()), None)
            .await
            .status(),
        200
    );
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_open_on_admin_listen_and_without_auth() {
    let _suite = crate::suite::enter(module_path!());
    let (servers, _) = auth_config();
    let admin_port = free_port();
    let gateway = boot_gateway(&servers, &format!("admin_listen = \"127.0.0.1:{admin_port}\"")).await;
    // On admin_listen: no credentials needed, [auth] or not.
    let response = get(&format!("http://127.0.0.1:{admin_port}/metrics"), None).await;
    assert_eq!(response.status(), 200);
    let page = get(&format!("http://127.0.0.1:{admin_port}/admin"), None).await;
    assert_eq!(page.status(), 200);
    // Not on the main listener then.
    let main = get(&format!("http://{}/metrics", gateway.local_addr()), None).await;
    assert_ne!(main.status(), 200);
    gateway.stop().await;

    // Without [auth] and admin_listen: on the main listener, open.
    let gateway = boot_gateway(&test_server_toml("t", &[], None), "").await;
    let response = get(&format!("http://{}/metrics", gateway.local_addr()), None).await;
    assert_eq!(response.status(), 200);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_log_has_one_object_a_line_and_an_access_line_per_request() {
    let _suite = crate::suite::enter(module_path!());
    let dir = scratch_dir("metrics-json-log");
    let servers = format!(
        "{}\n[telemetry]\nlog_format = \"json\"\naccess_log = true\n",
        test_server_toml("t", &[], None)
    );
    let mut gateway = ServeProcess::start(&dir, "", &servers, &dir, &[]);
    gateway.wait_tools(&["t__echo"]).await;
    let raw = RawSession::open(&gateway.url(), json!({})).await;
    let text = raw.tool_text("t__echo", json!({ "message": SECRET })).await;
    assert!(text.contains(SECRET), "{text}");
    raw.call("tools/list", json!({})).await;
    raw.delete().await;
    // A real client over the legacy HTTP+SSE transport: its messages get access lines too.
    let sse = format!("http://127.0.0.1:{}/sse", gateway.port);
    let args = ["t__echo", r#"{"message": "over-sse"}"#, "--transport", "sse"];
    run_py_client_async(&sse, "call", &args).await.assert_ok();

    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let access = loop {
        let log = gateway.log();
        let mut lines = Vec::new();
        for line in log.lines().filter(|l| !l.trim().is_empty()) {
            let parsed: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {line}\nlog:\n{log}"));
            lines.push(parsed);
        }
        let access: Vec<Value> = lines
            .into_iter()
            .filter(|l| l["target"] == "mcpmux::access")
            .collect();
        let calls = access.iter().filter(|l| l["method"] == "tools/call").count();
        if calls >= 2 || std::time::Instant::now() > deadline {
            break access;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let session = crate::support::session_digest(&raw.sid);
    let call = (access.iter())
        .find(|l| l["method"] == "tools/call" && l["session"] == session.as_str())
        .unwrap_or_else(|| panic!("no access line for the call: {access:?}"));
    assert_eq!(call["level"], "INFO");
    assert_eq!(call["name"], "t__echo");
    assert_eq!(call["upstream"], "t");
    assert_eq!(call["outcome"], "ok");
    assert_eq!(call["session"], session.as_str());
    assert_eq!(call["client_name"], "raw-test");
    assert_eq!(call["client_version"], "0");
    assert!(call["duration_ms"].as_f64().is_some_and(|ms| ms >= 0.0), "{call}");
    let trace = call["trace_id"].as_str().unwrap_or_default();
    assert!(
        trace.len() == 32 && trace.chars().all(|c| c.is_ascii_hexdigit()),
        "{call}"
    );
    assert!(access.iter().any(|l| l["method"] == "tools/list"), "{access:?}");
    assert!(
        !call.to_string().contains(SECRET),
        "an argument in the access line: {call}"
    );
    let legacy = (access.iter())
        .find(|l| l["method"] == "tools/call" && l["session"] != session.as_str())
        .unwrap_or_else(|| panic!("no access line for the legacy SSE call: {access:?}"));
    assert_eq!(legacy["name"], "t__echo", "{legacy}");
    assert_eq!(legacy["upstream"], "t", "{legacy}");
    assert_eq!(legacy["outcome"], "ok", "{legacy}");
    assert!(
        legacy["session"].as_str().is_some_and(|s| !s.is_empty()),
        "{legacy}"
    );
    assert!(
        legacy["client_name"].as_str().is_some_and(|s| !s.is_empty()),
        "{legacy}"
    );
}
