//! `mcpmux login SERVER [--config FILE | --url URL]`: a person signs mcpmux in to an `oauth`
//! upstream from a terminal. It prints the link, opens a browser when there is one (`$BROWSER`,
//! else `xdg-open`/`open` on a desktop), and waits for the sign-in to finish.
//! With `--config`: when the gateway of that file is not running, `login` serves the callback
//! itself on the gateway's own address (so the redirect URI is the same) and seals the grant into
//! the vault, which the gateway uses once it runs (or at once, if it starts meanwhile); when the
//! gateway runs, it asks it (as `--url` does). With `--url`: it asks the running gateway at that
//! operator address to start the sign-in, and waits until the gateway holds the grant.
//! Exit status 0 signed in, 1 refused or timed out, 2 not reachable or misconfigured.

use crate::admin::sign_in::SIGN_IN_PATH;
use crate::config::{Config, UpstreamAuth};
use crate::credentials::vault::Vault;
use crate::credentials::{Credentials, LOCAL_PRINCIPAL};
use std::path::Path;
use std::time::Duration;

/// How long `login` waits for the person to finish.
const WAIT: Duration = Duration::from_secs(600);
const POLL: Duration = Duration::from_millis(500);

/// Run `mcpmux login`; returns the exit status.
pub fn command(server: &str, config: Option<&Path>, url: Option<&str>) -> u8 {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the runtime: {err}");
            return 2;
        }
    };
    let result = runtime.block_on(async {
        match (config, url) {
            (_, Some(url)) => via_gateway(server, url, None).await,
            (Some(path), None) => with_config(server, path).await,
            (None, None) => Err((2, "give --config FILE (the gateway's configuration) or --url URL (a running gateway's operator address)".into())),
        }
    });
    match result {
        Ok(message) => {
            println!("{message}");
            0
        }
        Err((status, why)) => {
            eprintln!("error: {why}");
            status
        }
    }
}

async fn with_config(server: &str, path: &Path) -> Result<String, (u8, String)> {
    let config = Config::load(path).map_err(|e| (2, e.to_string()))?;
    let Some(upstream) = config.servers.iter().find(|s| s.name == server) else {
        return Err((2, format!("{}: no [servers.{server}]", path.display())));
    };
    if !matches!(upstream.auth, UpstreamAuth::OAuth(_)) {
        return Err((
            2,
            format!("server {server:?} has no auth = {{ mode = \"oauth\" }}: there is nothing to sign in to"),
        ));
    }
    let listener = match tokio::net::TcpListener::bind(config.gateway.listen).await {
        Ok(listener) => listener,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            // The gateway (presumably) runs: it serves the callback, so it starts the sign-in.
            let operator = crate::config::operator_address(path).map_err(|e| (2, e.to_string()))?;
            return via_gateway(server, &operator.base(), operator.pinned_cert.as_deref()).await;
        }
        Err(e) => {
            return Err((
                2,
                format!(
                    "cannot listen on {} for the sign-in's callback: {e}",
                    config.gateway.listen
                ),
            ))
        }
    };
    let vault = Vault::open(&config.vault).map_err(|e| (2, format!("the vault: {e}")))?;
    let credentials = Credentials::new(&config, Some(vault));
    let link = credentials
        .start_sign_in(upstream, LOCAL_PRINCIPAL, None)
        .await
        .map_err(|e| (1, e.to_string()))?;
    let mut changes = credentials.changes();
    let app = crate::http::oauth_callback::router(credentials.clone());
    let stop = tokio_util::sync::CancellationToken::new();
    let serving = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
        })
    };
    show(server, &link.url);
    let finished = tokio::time::timeout(WAIT, async {
        loop {
            if credentials.has_grant(server, LOCAL_PRINCIPAL).await {
                return;
            }
            let _ = changes.changed().await;
        }
    })
    .await;
    // Let the browser's page be served before the listener goes.
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.cancel();
    let _ = serving.await;
    match finished {
        Ok(()) => Ok(format!(
            "signed in to {server}; the grant is sealed in the vault (the gateway uses it)"
        )),
        Err(_) => Err((
            1,
            format!(
                "the sign-in did not finish within {} minutes",
                WAIT.as_secs() / 60
            ),
        )),
    }
}

/// Ask the running gateway at operator address `base` to sign the local user in.
async fn via_gateway(server: &str, base: &str, pinned_cert: Option<&Path>) -> Result<String, (u8, String)> {
    let mut url = reqwest::Url::parse(base).map_err(|e| (2, format!("--url {base:?} is not a URL ({e})")))?;
    url.set_path(&SIGN_IN_PATH.replace("{server}", server));
    url.set_query(None);
    let http =
        crate::tls::pinned::operator_client(Duration::from_secs(60), pinned_cert).map_err(|e| (2, e))?;
    let unreachable = |e: reqwest::Error| (2, format!("the gateway at {base} cannot be reached: {e}"));
    let resp = http.post(url.clone()).send().await.map_err(unreachable)?;
    let status = resp.status();
    let body = json_of(resp).await;
    let field = |name: &str| body.get(name).and_then(|v| v.as_str()).map(str::to_string);
    if !status.is_success() {
        let why = field("error").unwrap_or_else(|| format!("HTTP {status}"));
        return Err((if status.as_u16() == 403 { 2 } else { 1 }, why));
    }
    let link = field("url").ok_or((1, "the gateway answered without a link".to_string()))?;
    show(server, &link);
    let finished = tokio::time::timeout(WAIT, async {
        loop {
            tokio::time::sleep(POLL).await;
            let Ok(resp) = http.get(url.clone()).send().await else {
                continue;
            };
            let body = json_of(resp).await;
            if body.get("signed_in").and_then(|v| v.as_bool()) == Some(true) {
                return;
            }
        }
    })
    .await;
    match finished {
        Ok(()) => Ok(format!("signed in to {server}; the gateway holds the grant")),
        Err(_) => Err((
            1,
            format!(
                "the sign-in did not finish within {} minutes",
                WAIT.as_secs() / 60
            ),
        )),
    }
}

/// Print the link, and open a browser when there is one.
fn show(server: &str, link: &str) {
    eprintln!("Sign in to {server} in your browser:\n\n  {link}\n\nWaiting for the sign-in to finish (Ctrl-C to give up)...");
    let browser = std::env::var("BROWSER").ok().filter(|b| !b.trim().is_empty());
    let desktop = std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some();
    let opener = match browser {
        Some(browser) => Some(browser),
        None if cfg!(target_os = "macos") => Some("open".to_string()),
        None if desktop => Some("xdg-open".to_string()),
        None => None,
    };
    if let Some(opener) = opener {
        let mut words = opener.split_whitespace();
        if let Some(program) = words.next() {
            let spawned = std::process::Command::new(program)
                .args(words)
                .arg(link)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .spawn();
            if let Err(e) = spawned {
                eprintln!("(could not open a browser with {program}: {e}; open the link yourself)");
            }
        }
    }
}

/// A response's JSON body (`null` when it has none).
async fn json_of(resp: reqwest::Response) -> serde_json::Value {
    let bytes = resp.bytes().await.unwrap_or_default();
    serde_json::from_slice(&bytes).unwrap_or_default()
}
