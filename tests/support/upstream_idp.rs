//! An upstream that wants a sign-in, for mcpmux's outbound identity tests: oidc-provider as its
//! authorization server and a TypeScript SDK resource server validating audience
//! (`tests/fixtures/upstream_idp.mjs` + `upstream_rs.mjs`), the real Python SDK host that signs in
//! through mcpmux in-band (`tests/conformance/auth_host.py`), and the test browser for
//! `mcpmux login` (`tests/conformance/browser.py` behind a `BROWSER` script).

use super::{
    free_port, log_dir, path_str, peers, repo_root, run_client, spawn_server, ChildGuard, ClientRun,
};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Hard limit for one host run (a sign-in is a few seconds; 2 cores are shared).
pub const HOST_TIMEOUT: Duration = Duration::from_secs(120);

/// The pre-registered client-credentials client of the fixture's authorization server.
pub const CC_CLIENT_ID: &str = "mcpmux-cc";
pub const CC_CLIENT_SECRET: &str = "cc-secret";

/// The fixture running: its authorization server (`issuer`) and resource server (`resource`,
/// the MCP endpoint).
pub struct UpstreamIdp {
    _guard: ChildGuard,
    pub issuer: String,
    pub resource: String,
    log_path: PathBuf,
}

impl UpstreamIdp {
    /// Start it with access tokens living `token_ttl`.
    pub fn start(token_ttl: Duration) -> UpstreamIdp {
        let p = peers();
        let (as_port, rs_port) = (free_port(), free_port());
        let mut cmd = Command::new(&p.node22);
        cmd.arg(repo_root().join("tests/fixtures/upstream_idp.mjs"))
            .arg(&p.oidc_provider_pkg)
            .arg(as_port.to_string())
            .arg(rs_port.to_string())
            .arg(token_ttl.as_secs().max(1).to_string())
            .env("MCPMUX_PEERS_NPM", &p.npm_modules);
        let log_path = log_dir().join(format!("upstream-idp-{as_port}.log"));
        let mut guard = spawn_server(cmd, as_port, &log_path, "upstream oidc-provider");
        super::wait_started(&mut guard, rs_port, &log_path, "upstream resource server");
        UpstreamIdp {
            _guard: guard,
            issuer: format!("http://127.0.0.1:{as_port}"),
            resource: format!("http://127.0.0.1:{rs_port}/mcp"),
            log_path,
        }
    }

    /// What the fixture logged (requests, grant types, the RS's verdicts; never a token).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Every access and refresh token the authorization server issued so far.
    pub async fn tokens(&self) -> Vec<String> {
        let url = format!("{}/test/tokens", self.issuer);
        let doc: serde_json::Value = reqwest::get(&url)
            .await
            .and_then(|r| r.error_for_status())
            .expect("GET /test/tokens")
            .text()
            .await
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .expect("tokens JSON");
        (doc["tokens"].as_array().into_iter().flatten())
            .filter_map(|t| t.as_str().map(str::to_string))
            .collect()
    }

    /// Revoke every grant `login` holds at the authorization server (its refresh tokens die,
    /// the resource server refuses its access tokens).
    pub async fn revoke(&self, login: &str) {
        let url = format!("{}/test/revoke?login={login}", self.issuer);
        let doc: serde_json::Value = reqwest::Client::new()
            .post(&url)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .expect("POST /test/revoke")
            .text()
            .await
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .expect("revoke JSON");
        assert!(
            doc["revoked"].as_u64().unwrap_or(0) > 0,
            "{login} held no grant to revoke: {doc}\n{}",
            self.log()
        );
    }

    /// How many tokens the AS issued with `grant_type` (from its log).
    pub fn issued_with(&self, grant_type: &str) -> usize {
        let needle = format!("token issued: grant_type={grant_type} ");
        self.log().lines().filter(|l| l.contains(&needle)).count()
    }
}

/// `python auth_host.py URL --mode MODE --login LOGIN [TOOL JSON]...`: the Python SDK host
/// signing in through mcpmux in-band; its JSON line is `run.json`.
pub async fn run_host(url: &str, mode: &str, login: &str, calls: &[(&str, &str)]) -> ClientRun {
    run_host_as(url, (mode, None), login, calls).await
}

/// [`run_host`] for a host that presents `bearer` to mcpmux (an API key of its `[auth]`).
pub async fn run_host_as(
    url: &str,
    (mode, bearer): (&str, Option<&str>),
    login: &str,
    calls: &[(&str, &str)],
) -> ClientRun {
    let p = peers();
    let mut cmd = Command::new(&p.python);
    cmd.arg(repo_root().join("tests/conformance/auth_host.py"))
        .arg(url)
        .args(["--mode", mode, "--login", login]);
    if let Some(bearer) = bearer {
        cmd.args(["--bearer", bearer]);
    }
    for (tool, args) in calls {
        cmd.arg(tool).arg(args);
    }
    tokio::task::spawn_blocking(move || run_client(cmd, HOST_TIMEOUT))
        .await
        .expect("host run")
}

/// An executable script in `dir` opening its argument in the test browser (the value for
/// `BROWSER`); what it opened and where it landed is appended to the returned log file.
pub fn browser_script(dir: &Path) -> (PathBuf, PathBuf) {
    let script = dir.join("browser.sh");
    let record = dir.join("browser.log");
    let text = format!(
        "#!/bin/sh\nMCPMUX_TEST_BROWSER_LOG={} exec {} {} \"$@\"\n",
        path_str(&record),
        path_str(&peers().python),
        path_str(&repo_root().join("tests/conformance/browser.py")),
    );
    std::fs::write(&script, text).expect("write browser script");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            .expect("chmod browser script");
    }
    (script, record)
}
