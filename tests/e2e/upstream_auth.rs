//! mcpmux signing in to an upstream (issue 26, one user, no `[auth]`: the principal is `local`),
//! against a real authorization server: oidc-provider with dynamic registration, PKCE, resource
//! indicators, refresh tokens, client credentials and revocation, in front of a TypeScript SDK
//! resource server that checks the JWT's signature, issuer and audience and whose `whoami` tool
//! answers the `sub` it saw (`tests/fixtures/upstream_idp.mjs`, `upstream_rs.mjs`).
//!
//! The real `mcpmux serve` binary, and as the user a real Python SDK host (mcp 2.3.0,
//! `tests/conformance/auth_host.py`) that opens the sign-in link it is given in a test browser
//! (login and consent forms filled in, redirects followed to mcpmux's `/oauth/callback`):
//! in-band in the session era (URL elicitation) and in 2026-07-28 (`input_required`); with
//! `mcpmux login --config` while no gateway runs; a refresh after the token expired; a grant
//! revoked at the AS asks to sign in again; client credentials; and no token the AS issued in
//! the log, `/status`, `/metrics`, the audit log, exported spans or the vault file.

use crate::support::serve::ServeProcess;
use crate::support::upstream_idp::{browser_script, run_host, UpstreamIdp, CC_CLIENT_ID, CC_CLIENT_SECRET};
use crate::support::{path_str, scratch_dir, ClientRun};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Access tokens live long enough for a whole test unless a test wants them to expire.
const LONG_TTL: Duration = Duration::from_secs(600);
/// The short life of the refresh test's access tokens.
const SHORT_TTL: Duration = Duration::from_secs(3);
const WHOAMI: &str = "up__whoami";
const AUTHORIZE: &str = "up__authorize";

/// `[servers.up]` at the fixture's resource server with `auth`, and `[vault]` in `dir`.
fn servers(idp: &UpstreamIdp, auth: &str, dir: &Path) -> String {
    format!(
        "[servers.up]\nurl = {:?}\nauth = {auth}\n\n[vault]\npath = {:?}\n",
        idp.resource,
        path_str(&dir.join("vault"))
    )
}

fn serve(dir: &Path, servers: &str) -> ServeProcess {
    ServeProcess::start(dir, "", servers, dir, &[])
}

fn strings(v: &Value) -> Vec<String> {
    (v.as_array().into_iter().flatten())
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// The host ran, every call answered, and `whoami` said `sub=<sub>`.
fn assert_whoami(run: &ClientRun, sub: &str, idp: &UpstreamIdp, gw: &ServeProcess) {
    assert!(
        run.exited_ok() && run.json["ok"] == true,
        "the host failed:\n{run}\n--- fixture ---\n{}\n--- gateway ---\n{}",
        idp.log(),
        gw.log()
    );
    assert_eq!(
        run.json["texts"][WHOAMI].as_str(),
        Some(format!("sub={sub}").as_str()),
        "{run}"
    );
}

/// The host was sent to sign in, and the browser landed on this gateway's callback.
fn assert_signed_in_via_callback(run: &ClientRun, gw: &ServeProcess) {
    let landed = strings(&run.json["landed"]);
    let callback = format!("http://127.0.0.1:{}/oauth/callback", gw.port);
    assert!(!landed.is_empty(), "the host was never asked to sign in: {run}");
    assert!(
        landed
            .iter()
            .all(|l| l.starts_with("200 ") && l.contains(&callback)),
        "the browser did not land on {callback}: {landed:?}"
    );
}

async fn in_band(mode: &str) {
    let idp = UpstreamIdp::start(LONG_TTL);
    let dir = scratch_dir(&format!("upstream-auth-{mode}"));
    let mut gw = serve(&dir, &servers(&idp, "{ mode = \"oauth\" }", &dir));
    let before = gw.wait_tools(&[AUTHORIZE]).await;
    assert!(
        !before.iter().any(|t| t == WHOAMI),
        "real tools before a grant: {before:?}"
    );

    let run = run_host(&gw.url(), mode, "alice", &[(WHOAMI, "{}")]).await;
    assert_whoami(&run, "alice", &idp, &gw);
    assert_signed_in_via_callback(&run, &gw);
    // One sign-in: the host's retry after the callback waits for it instead of starting another.
    let links = strings(&run.json["links"]);
    assert_eq!(
        links.len(),
        1,
        "signed in {} times: {links:?}
{run}
{}",
        links.len(),
        gw.log()
    );
    assert_eq!(run.json["authorize_tool"], AUTHORIZE, "{run}");
    // Asked in the call itself: the session era on its GET stream (then told it completed), the
    // 2026-07-28 era with `input_required`: never an error to retry after.
    assert_eq!(strings(&run.json["asked_by"]), ["elicitation"], "{run}");
    if mode == "legacy" {
        assert_eq!(run.json["completed"].as_array().map(Vec::len), Some(1), "{run}");
    }
    // The authorize call itself went on after the callback and answered without isError.
    assert!(run.json["texts"][AUTHORIZE].is_string(), "{run}");
    // The grant outlives the host: a second host calls without being asked.
    let again = run_host(&gw.url(), mode, "nobody", &[(WHOAMI, "{}")]).await;
    assert_whoami(&again, "alice", &idp, &gw);
    assert!(strings(&again.json["links"]).is_empty(), "asked again: {again}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_era_host_signs_in_through_url_elicitation_and_the_call_goes_on() {
    let _suite = crate::suite::enter(module_path!());
    in_band("legacy").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_2026_07_28_host_signs_in_through_input_required_and_the_call_goes_on() {
    let _suite = crate::suite::enter(module_path!());
    in_band("2026-07-28").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mcpmux_login_signs_in_while_no_gateway_runs_and_serve_uses_the_grant() {
    let _suite = crate::suite::enter(module_path!());
    let idp = UpstreamIdp::start(LONG_TTL);
    let dir = scratch_dir("upstream-auth-login");
    let config = dir.join("mcpmux.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nlisten = \"127.0.0.1:{}\"\n\n{}",
            crate::support::free_port(),
            servers(&idp, "{ mode = \"oauth\" }", &dir)
        ),
    )
    .expect("write config");
    let (browser, opened) = browser_script(&dir);
    let login = tokio::task::spawn_blocking({
        let config = config.clone();
        move || {
            Command::new(env!("CARGO_BIN_EXE_mcpmux"))
                .args(["login", "up", "--config"])
                .arg(&config)
                .env("BROWSER", &browser)
                .env("MCPMUX_TEST_LOGIN", "carol")
                .output()
                .expect("run mcpmux login")
        }
    })
    .await
    .expect("login");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&login.stdout),
        String::from_utf8_lossy(&login.stderr)
    );
    let browsed = std::fs::read_to_string(&opened).unwrap_or_default();
    assert!(
        login.status.success(),
        "mcpmux login failed:\n{said}\nbrowser: {browsed}\n{}",
        idp.log()
    );
    assert!(
        browsed.contains("/oauth/callback"),
        "the browser never reached the callback: {browsed:?}\n{said}"
    );

    let mut gw = ServeProcess::start_text(
        config_port(&config),
        &dir,
        &std::fs::read_to_string(&config).expect("config"),
        &dir,
        &[],
    );
    gw.wait_tools(&[WHOAMI]).await;
    let run = run_host(&gw.url(), "legacy", "nobody", &[(WHOAMI, "{}")]).await;
    assert_whoami(&run, "carol", &idp, &gw);
    assert!(
        strings(&run.json["links"]).is_empty(),
        "asked to sign in after login: {run}"
    );
}

/// The port of `listen` in a config this file wrote.
fn config_port(config: &Path) -> u16 {
    let text = std::fs::read_to_string(config).expect("config");
    let listen = text
        .lines()
        .find_map(|l| l.strip_prefix("listen = \"127.0.0.1:"))
        .expect("listen line");
    listen.trim_end_matches('"').parse().expect("port")
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_access_token_is_refreshed_without_asking_the_user() {
    let _suite = crate::suite::enter(module_path!());
    let idp = UpstreamIdp::start(SHORT_TTL);
    let dir = scratch_dir("upstream-auth-refresh");
    let mut gw = serve(&dir, &servers(&idp, "{ mode = \"oauth\" }", &dir));
    gw.wait_tools(&[AUTHORIZE]).await;
    let first = run_host(&gw.url(), "legacy", "dave", &[(WHOAMI, "{}")]).await;
    assert_whoami(&first, "dave", &idp, &gw);
    let refreshed_before = idp.issued_with("refresh_token");

    // Past the access token's life: the next call needs a refresh.
    tokio::time::sleep(SHORT_TTL + Duration::from_secs(1)).await;
    let later = run_host(&gw.url(), "legacy", "nobody", &[(WHOAMI, "{}")]).await;
    assert_whoami(&later, "dave", &idp, &gw);
    assert!(
        strings(&later.json["links"]).is_empty(),
        "asked to sign in again: {later}"
    );
    assert!(
        idp.issued_with("refresh_token") > refreshed_before,
        "no refresh_token grant at the AS:\n{}",
        idp.log()
    );
}

/// Sign in as erin, revoke erin's grant at the AS, then run a host signing in as frank calling
/// whoami: (the host's run, the gateway, the fixture).
async fn revoked(tag: &str) -> (ClientRun, ServeProcess, UpstreamIdp) {
    let idp = UpstreamIdp::start(LONG_TTL);
    let dir = scratch_dir(tag);
    let mut gw = serve(&dir, &servers(&idp, "{ mode = \"oauth\" }", &dir));
    gw.wait_tools(&[AUTHORIZE]).await;
    let first = run_host(&gw.url(), "legacy", "erin", &[(WHOAMI, "{}")]).await;
    assert_whoami(&first, "erin", &idp, &gw);
    idp.revoke("erin").await;
    let next = run_host(&gw.url(), "legacy", "frank", &[(WHOAMI, "{}")]).await;
    (next, gw, idp)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_grant_revoked_at_the_authorization_server_brings_the_sign_in_back() {
    let _suite = crate::suite::enter(module_path!());
    let (next, gw, idp) = revoked("upstream-auth-revoke").await;
    // Asked again (the refresh is refused too); whoever signs in now is who the upstream sees.
    assert_signed_in_via_callback(&next, &gw);
    assert_whoami(&next, "frank", &idp, &gw);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_call_refused_after_a_revocation_asks_for_the_sign_in_itself() {
    let _suite = crate::suite::enter(module_path!());
    let (next, gw, idp) = revoked("upstream-auth-revoke-call").await;
    assert_whoami(&next, "frank", &idp, &gw);
    assert!(
        strings(&next.json["relisted"]).is_empty(),
        "the call was dropped: {next}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn client_credentials_give_mcpmux_its_own_token_without_a_user() {
    let _suite = crate::suite::enter(module_path!());
    let idp = UpstreamIdp::start(LONG_TTL);
    let dir = scratch_dir("upstream-auth-cc");
    let auth = format!(
        "{{ mode = \"client_credentials\", client_id = \"{CC_CLIENT_ID}\", client_secret = \"{CC_CLIENT_SECRET}\" }}"
    );
    let mut gw = serve(&dir, &servers(&idp, &auth, &dir));
    gw.wait_tools(&[WHOAMI]).await;
    let run = run_host(&gw.url(), "legacy", "nobody", &[(WHOAMI, "{}")]).await;
    assert_whoami(&run, CC_CLIENT_ID, &idp, &gw);
    assert!(strings(&run.json["links"]).is_empty(), "a user was asked: {run}");
    assert!(idp.issued_with("client_credentials") > 0, "{}", idp.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn no_token_the_authorization_server_issued_is_in_the_log_status_metrics_audit_or_spans() {
    let _suite = crate::suite::enter(module_path!());
    let idp = UpstreamIdp::start(LONG_TTL);
    let dir = scratch_dir("upstream-auth-secrets");
    let auth_cc = format!(
        "{{ mode = \"client_credentials\", client_id = \"{CC_CLIENT_ID}\", client_secret = \"{CC_CLIENT_SECRET}\" }}"
    );
    let (spans, otlp_port) = crate::support::otlp::start_collector("mcpmux").await;
    let text = format!(
        "{}\n[servers.svc]\nurl = {:?}\nauth = {auth_cc}\n\n[audit]\npath = {:?}\n\n\
         [telemetry]\notlp_endpoint = \"http://127.0.0.1:{otlp_port}\"\n",
        servers(&idp, "{ mode = \"oauth\" }", &dir),
        idp.resource,
        path_str(&dir.join("audit.jsonl"))
    );
    let mut gw = serve(&dir, &text);
    gw.wait_tools(&[AUTHORIZE, "svc__whoami"]).await;
    let run = run_host(
        &gw.url(),
        "legacy",
        "grace",
        &[(WHOAMI, "{}"), ("svc__whoami", "{}")],
    )
    .await;
    assert_whoami(&run, "grace", &idp, &gw);

    let tokens = idp.tokens().await;
    assert!(tokens.len() >= 2, "the AS issued {} tokens", tokens.len());
    let base = format!("http://127.0.0.1:{}", gw.port);
    let mut seen = vec![("log", gw.log())];
    for path in ["/status", "/metrics"] {
        let body = reqwest::get(format!("{base}{path}"))
            .await
            .expect(path)
            .text()
            .await
            .expect(path);
        seen.push((path, body));
    }
    // The audit writer is asynchronous: wait for its lines (bounded) before searching them.
    let audit = dir.join("audit.jsonl");
    for _ in 0..100 {
        if std::fs::metadata(&audit).map(|m| m.len() > 0).unwrap_or(false) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    seen.push((
        "audit",
        std::fs::read_to_string(dir.join("audit.jsonl")).unwrap_or_default(),
    ));
    // Spans are exported in batches: wait (bounded) for the calls' ones.
    for _ in 0..150 {
        if spans.bodies().concat().contains("whoami") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    seen.push(("spans", spans.bodies().concat()));
    seen.push((
        "vault",
        String::from_utf8_lossy(&std::fs::read(dir.join("vault")).unwrap_or_default()).into_owned(),
    ));
    for (what, text) in &seen {
        assert!(!text.is_empty(), "nothing to search in {what}");
    }
    for token in &tokens {
        // The signature of a JWT, the whole of an opaque refresh token.
        let secret = token.rsplit('.').next().unwrap_or(token);
        for (what, text) in &seen {
            assert!(
                !text.contains(secret),
                "a token the AS issued is in {what}:\n{text}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_era_host_without_a_stream_to_ask_on_gets_error_32042_with_the_link() {
    let _suite = crate::suite::enter(module_path!());
    let idp = UpstreamIdp::start(LONG_TTL);
    let dir = scratch_dir("upstream-auth-32042");
    let mut gw = serve(&dir, &servers(&idp, "{ mode = \"oauth\" }", &dir));
    gw.wait_tools(&[AUTHORIZE]).await;
    // URL elicitation declared, but no GET stream open: the call cannot wait for an answer.
    let host =
        crate::support::mcp::RawSession::open(&gw.url(), serde_json::json!({"elicitation": {"url": {}}}))
            .await;
    let answer = host
        .call(
            "tools/call",
            serde_json::json!({"name": AUTHORIZE, "arguments": {}}),
        )
        .await;
    assert_eq!(answer["error"]["code"], -32042, "{answer}");
    let asked = &answer["error"]["data"]["elicitations"][0];
    assert_eq!(asked["mode"], "url", "{answer}");
    let url = asked["url"].as_str().unwrap_or_default();
    assert!(
        url.contains("code_challenge_method=S256") && url.contains("%2Foauth%2Fcallback"),
        "{answer}"
    );
    assert!(
        asked["elicitationId"].as_str().is_some_and(|id| url.contains(id)),
        "{answer}"
    );
}
