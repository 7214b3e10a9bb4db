//! Real OAuth clients doing the whole flow through mcpmux's metadata, against a real
//! authorization server: oidc-provider (pinned, on 127.0.0.1, `tests/fixtures/oidc_idp.mjs`:
//! dynamic client registration, authorization code with PKCE, resource indicators issuing JWT
//! access tokens whose `aud` is mcpmux's `public_url`, login and consent pages filled in over
//! HTTP) and the real `mcpmux serve` binary in front of real server-everything.
//!
//! The Python SDK (mcp 2.3.0) and the TypeScript SDK (1.32.2) start with no token: mcpmux's 401
//! sends them to the protected resource metadata, then the authorization server's metadata; they
//! register, authorize, call a tool, and step up on a `[[auth.step_up]]` tool's 403
//! `insufficient_scope` to a token with the union of scopes. The Inspector CLI calls with the
//! tokens those flows produced in an `Authorization: Bearer` header. A token issued for one
//! mcpmux is refused by another that trusts the same issuer. No token reaches the log.

use crate::support::serve::ServeProcess;
use crate::support::{free_port, log_dir, peers, repo_root, run_client, scratch_dir, spawn_server};
use crate::support::{toml_list, ChildGuard, ClientRun, CLIENT_TIMEOUT};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The scopes mcpmux publishes and the authorization server issues for it.
const SCOPES: &str = "mcp:tools mcp:write";
/// The tool behind `[[auth.step_up]]` (needs `mcp:write`), and its arguments.
const STEP_UP_TOOL: &str = "everything__get-sum";
const STEP_UP_ARGS: &str = r#"{"a": 1, "b": 2}"#;
const STEP_UP_TEXT: &str = "The sum of 1 and 2 is 3";

/// oidc-provider and mcpmux (with server-everything) configured for each other.
struct Deployment {
    _idp: ChildGuard,
    issuer: String,
    gateway: ServeProcess,
    /// mcpmux's endpoint, as it listens and as `gateway.public_url` names it.
    url: String,
    dir: PathBuf,
}

impl Deployment {
    async fn start(tag: &str) -> Deployment {
        let p = peers();
        let idp_port = free_port();
        let mut idp = Command::new(&p.node22);
        idp.arg(repo_root().join("tests/fixtures/oidc_idp.mjs"))
            .arg(&p.oidc_provider_pkg)
            .arg(idp_port.to_string())
            .arg(SCOPES);
        let log = log_dir().join(format!("oidc-provider-{idp_port}.log"));
        let idp = spawn_server(idp, idp_port, &log, "oidc-provider");
        let issuer = format!("http://127.0.0.1:{idp_port}");

        let (node, args) = p.everything_stdio_cmd();
        let everything = format!(
            "[servers.everything]\ncommand = {node:?}\nargs = {}\n",
            toml_list(&args)
        );
        let (gateway, url, dir) = serve(tag, &issuer, &everything).await;
        Deployment {
            _idp: idp,
            issuer,
            gateway,
            url,
            dir,
        }
    }

    /// The protected resource metadata URL mcpmux names in its challenges.
    fn metadata_url(&self) -> String {
        format!(
            "http://127.0.0.1:{}/.well-known/oauth-protected-resource/mcp",
            self.gateway.port
        )
    }

    /// Panics if any of `tokens` (its signature) is in the gateway's log.
    fn assert_no_token_logged(&self, tokens: &[String]) {
        let log = self.gateway.log();
        assert!(log.contains("everything"), "the log is the gateway's: {log}");
        for token in tokens {
            let signature = token.rsplit('.').next().unwrap_or(token);
            assert!(!log.contains(signature), "a token is in the gateway log:\n{log}");
        }
    }
}

/// `mcpmux serve` with `servers`, its `public_url` the URL it listens on, trusting `issuer`:
/// `mcp:tools` on every request, `mcp:write` too on [`STEP_UP_TOOL`]. Returns it once every
/// upstream is ready, with its URL and scratch directory.
async fn serve(tag: &str, issuer: &str, servers: &str) -> (ServeProcess, String, PathBuf) {
    let dir = scratch_dir(tag);
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let config = format!(
        "[auth]\nissuer = \"{issuer}\"\nscopes_supported = [\"mcp:tools\", \"mcp:write\"]\n\
         required_scopes = [\"mcp:tools\"]\n\n\
         [[auth.step_up]]\ntools = [\"{STEP_UP_TOOL}\"]\nscopes = [\"mcp:write\"]\n\n{servers}"
    );
    let public_url = format!("public_url = \"{url}\"");
    let mut gateway = ServeProcess::start_on(port, &dir, &public_url, &config, &dir, &[]);
    wait_ready(&mut gateway).await;
    (gateway, url, dir)
}

/// Wait until every upstream is ready (`/readyz`, which needs no credentials).
async fn wait_ready(gateway: &mut ServeProcess) {
    let deadline = Instant::now() + Duration::from_secs(45);
    let ready = format!("http://127.0.0.1:{}/readyz", gateway.port);
    loop {
        if let Some(status) = gateway.guard.try_wait() {
            panic!("gateway exited ({status}):\n{}", gateway.log());
        }
        if let Ok(response) = reqwest::get(&ready).await {
            if response.status() == 200 {
                return;
            }
        }
        assert!(Instant::now() < deadline, "gateway not ready:\n{}", gateway.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[derive(Clone, Copy, Debug)]
enum Sdk {
    Python,
    TypeScript,
}

/// Run an SDK's OAuth client (`tests/fixtures/oauth_{py,ts}_client`) signing in as `login` and
/// calling each `(tool, JSON arguments)`; returns the run and every access token it got.
async fn run_flow(sdk: Sdk, d: &Deployment, login: &str, calls: &[(&str, &str)]) -> (ClientRun, Vec<String>) {
    let p = peers();
    let tokens = d.dir.join(format!("tokens-{sdk:?}-{login}.txt"));
    let mut cmd = match sdk {
        Sdk::Python => {
            let mut cmd = Command::new(&p.python);
            cmd.arg(repo_root().join("tests/fixtures/oauth_py_client.py"));
            cmd
        }
        Sdk::TypeScript => {
            let mut cmd = Command::new("node");
            cmd.arg(repo_root().join("tests/fixtures/oauth_ts_client.mjs"))
                .env("MCPMUX_PEERS_NPM", &p.npm_modules);
            cmd
        }
    };
    cmd.arg(&d.url).arg(login).env("MCPMUX_OAUTH_TOKEN_OUT", &tokens);
    for (tool, args) in calls {
        cmd.arg(tool).arg(args);
    }
    let started = Instant::now();
    let run = tokio::task::spawn_blocking(move || run_client(cmd, CLIENT_TIMEOUT))
        .await
        .expect("client run");
    eprintln!("{sdk:?} OAuth client ran in {:?}", started.elapsed());
    (run, read_tokens(&tokens))
}

fn read_tokens(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    (v.as_array().into_iter().flatten())
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

fn words(v: &Value) -> Vec<&str> {
    v.as_str().unwrap_or_default().split(' ').collect()
}

/// Where `line` first is in `http` at or after `from`; panics with the whole list if nowhere.
fn find(http: &[String], from: usize, line: &str) -> usize {
    (http.iter().skip(from).position(|l| l == line))
        .map(|i| i + from)
        .unwrap_or_else(|| panic!("no `{line}` after request {from} in {http:#?}"))
}

/// The whole flow, as the client's own HTTP requests and the authorization requests show it:
/// 401 without a token, the metadata named by the challenge, the authorization server's
/// metadata, registration, code with PKCE for mcpmux's resource, the token, a tool call; then
/// the step-up tool's 403, a second authorization for the union of scopes, and the call again.
fn check_whole_flow(sdk: Sdk, run: &ClientRun, d: &Deployment, login: &str) {
    assert!(run.success(), "{sdk:?} client:\n{run}");
    let obs = &run.json;
    let http = strings(&obs["http"]);
    let url = &d.url;
    let issuer = &d.issuer;
    assert_eq!(http.first(), Some(&format!("POST {url} 401")), "{http:#?}");
    assert_eq!(
        http.get(1),
        Some(&format!("GET {} 200", d.metadata_url())),
        "{http:#?}"
    );
    let as_metadata = http.get(2).cloned().unwrap_or_default();
    assert!(
        as_metadata.starts_with(&format!("GET {issuer}/.well-known/")) && as_metadata.ends_with(" 200"),
        "the authorization server's metadata next: {http:#?}"
    );
    let registered = find(&http, 3, &format!("POST {issuer}/reg 201"));
    let token = find(&http, registered, &format!("POST {issuer}/token 200"));
    let served = find(&http, token, &format!("POST {url} 200"));
    let refused = find(&http, served, &format!("POST {url} 403"));
    let stepped_up = find(&http, refused, &format!("POST {issuer}/token 200"));
    find(&http, stepped_up, &format!("POST {url} 200"));
    assert_eq!(
        http.iter().filter(|l| l.contains("/reg ")).count(),
        1,
        "one registration: {http:#?}"
    );

    let authorizations = obs["authorizations"].as_array().cloned().unwrap_or_default();
    assert_eq!(authorizations.len(), 2, "{obs}");
    for a in &authorizations {
        assert_eq!(a["response_type"], "code", "{a}");
        assert_eq!(a["code_challenge_method"], "S256", "{a}");
        assert!(a["code_challenge"].as_str().is_some_and(|c| c.len() >= 43), "{a}");
        assert_eq!(a["resource"], url.as_str(), "RFC 8707 resource: {a}");
        assert_eq!(a["client_id"], obs["client_id"], "the registered client: {a}");
    }
    let first = words(&authorizations[0]["scope"]);
    assert!(
        first.contains(&"mcp:tools") && !first.contains(&"mcp:write"),
        "{first:?}"
    );
    let second = words(&authorizations[1]["scope"]);
    assert!(
        second.contains(&"mcp:tools") && second.contains(&"mcp:write"),
        "{second:?}"
    );
    let pages = strings(&obs["pages"]);
    assert_eq!(pages.first().map(String::as_str), Some("login"), "{pages:?}");
    assert!(pages.iter().filter(|p| *p == "consent").count() >= 2, "{pages:?}");

    let claims = &obs["claims"];
    assert_eq!(claims["iss"], issuer.as_str(), "{claims}");
    assert_eq!(claims["aud"], url.as_str(), "{claims}");
    assert_eq!(claims["sub"], login, "{claims}");
    assert_eq!(claims["client_id"], obs["client_id"], "{claims}");
    let granted = words(&claims["scope"]);
    assert!(
        granted.contains(&"mcp:tools") && granted.contains(&"mcp:write"),
        "{claims}"
    );

    let texts = strings(&obs["texts"]);
    assert_eq!(texts.len(), 2, "{obs}");
    assert!(texts[0].contains("Echo: hi"), "{texts:?}");
    assert!(texts[1].contains(STEP_UP_TEXT), "{texts:?}");
}

const CALLS: [(&str, &str); 2] = [
    ("everything__echo", r#"{"message": "hi"}"#),
    (STEP_UP_TOOL, STEP_UP_ARGS),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_runs_the_whole_oauth_flow_through_mcpmux_and_steps_up() {
    let _suite = crate::suite::enter(module_path!());
    let d = Deployment::start("oauth-python").await;
    let (run, tokens) = run_flow(Sdk::Python, &d, "alice", &CALLS).await;
    check_whole_flow(Sdk::Python, &run, &d, "alice");
    assert_eq!(tokens.len(), 2, "a token, then the stepped-up one");
    d.assert_no_token_logged(&tokens);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_runs_the_whole_oauth_flow_through_mcpmux_and_steps_up() {
    let _suite = crate::suite::enter(module_path!());
    let d = Deployment::start("oauth-typescript").await;
    let (run, tokens) = run_flow(Sdk::TypeScript, &d, "bob", &CALLS).await;
    check_whole_flow(Sdk::TypeScript, &run, &d, "bob");
    assert_eq!(tokens.len(), 2, "a token, then the stepped-up one");
    d.assert_no_token_logged(&tokens);
}

/// `inspector --cli URL --header "Authorization: Bearer TOKEN" --method tools/call ...`.
async fn inspector(url: &str, token: Option<&str>, tool: &str, args: &[&str]) -> ClientRun {
    let p = peers();
    let mut cmd = Command::new(&p.node22);
    cmd.arg(&p.inspector_js).args(["--cli", url]);
    if let Some(token) = token {
        cmd.arg("--header").arg(format!("Authorization: Bearer {token}"));
    }
    cmd.args(["--method", "tools/call", "--tool-name", tool]);
    for arg in args {
        cmd.args(["--tool-arg", arg]);
    }
    cmd.args(["--format", "json"])
        .env("HOME", scratch_dir("inspector-home"));
    tokio::task::spawn_blocking(move || run_client(cmd, CLIENT_TIMEOUT))
        .await
        .expect("inspector run")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_cli_calls_through_mcpmux_with_the_flows_bearer_tokens() {
    let _suite = crate::suite::enter(module_path!());
    let d = Deployment::start("oauth-inspector").await;
    // Tokens from the real flow: one with mcp:tools, then the stepped-up one.
    let (run, tokens) = run_flow(Sdk::Python, &d, "carol", &CALLS).await;
    assert!(run.success(), "{run}");
    let [low, full] = tokens.as_slice() else {
        panic!("two tokens: {tokens:?}\n{run}")
    };

    let echo = inspector(&d.url, Some(low), "everything__echo", &["message=from-inspector"]).await;
    assert!(echo.exited_ok(), "{echo}");
    assert!(echo.stdout.contains("Echo: from-inspector"), "{echo}");

    // The low token on the step-up tool: refused with the scopes the call needs.
    let refused = inspector(&d.url, Some(low), STEP_UP_TOOL, &["a=1", "b=2"]).await;
    assert!(!refused.exited_ok(), "{refused}");
    assert!(!refused.stdout.contains(STEP_UP_TEXT), "{refused}");
    assert!(refused.stderr.contains("mcp:tools mcp:write"), "{refused}");
    let stepped_up = inspector(&d.url, Some(full), STEP_UP_TOOL, &["a=1", "b=2"]).await;
    assert!(stepped_up.exited_ok(), "{stepped_up}");
    assert!(stepped_up.stdout.contains(STEP_UP_TEXT), "{stepped_up}");

    // Without the header the same call gets nothing.
    let bare = inspector(&d.url, None, "everything__echo", &["message=from-inspector"]).await;
    assert!(!bare.stdout.contains("Echo: from-inspector"), "{bare}");
    assert!(
        format!("{}{}", bare.stdout, bare.stderr).contains("\"error\""),
        "{bare}"
    );
    d.assert_no_token_logged(&tokens);
}

/// RFC 8707 with the real authorization server: a token it issued for one mcpmux (its `aud`)
/// is refused by another mcpmux that trusts the same issuer, with `invalid_token`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_issued_for_another_mcpmux_is_refused() {
    let _suite = crate::suite::enter(module_path!());
    let d = Deployment::start("oauth-audience").await;
    let (run, tokens) = run_flow(Sdk::TypeScript, &d, "dave", &CALLS[..1]).await;
    assert!(run.success(), "{run}");
    let [token] = tokens.as_slice() else {
        panic!("one token: {tokens:?}\n{run}")
    };
    let (mut other, other_url, _) = serve("oauth-audience-other", &d.issuer, "").await;
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "audience", "version": "0"}}});
    let post = |url: String| {
        let body = initialize.to_string();
        async move {
            reqwest::Client::new()
                .post(url)
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .bearer_auth(token)
                .body(body)
                .send()
                .await
                .expect("POST")
        }
    };
    let refused = post(other_url).await;
    let challenge = (refused.headers().get("www-authenticate"))
        .map(|v| v.to_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    assert_eq!(refused.status(), 401, "{challenge}");
    assert!(
        challenge.starts_with("Bearer error=\"invalid_token\"") && challenge.contains("(aud)"),
        "{challenge}"
    );
    assert_eq!(
        post(d.url.clone()).await.status(),
        200,
        "the token's own resource"
    );
    d.assert_no_token_logged(&tokens);
    let other_log = other.log();
    assert!(
        !other_log.contains(token.rsplit('.').next().unwrap_or(token)),
        "{other_log}"
    );
    other.guard.kill();
}
