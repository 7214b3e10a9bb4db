//! `mcpmux reload --config FILE | --url URL`: ask a running gateway to re-read its configuration
//! (`POST /reload` on its operator address) and print what changed, or why the new configuration
//! was refused (the gateway then serves on with the old one). Exit status 0 reloaded, 1 refused,
//! 2 the gateway could not be reached or does not allow it.

use crate::admin::reload::RELOAD_PATH;
use std::path::{Path, PathBuf};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(130);

/// The `/reload` URL of the gateway serving the file at `path` (its `admin_listen`, else its
/// `listen`), read even when the rest of the file is wrong. When it cannot be read: the exit
/// status and what to print (1 when the file itself does not load, which a reload would refuse
/// too: the gateway serves on with what it has; 2 when it cannot be read at all).
pub fn reload_url(path: &Path) -> Result<(String, Option<PathBuf>), (u8, String)> {
    match crate::config::operator_address(path) {
        Ok(endpoint) => Ok((format!("{}{RELOAD_PATH}", endpoint.base()), endpoint.pinned_cert)),
        Err(err @ crate::config::ConfigError::Io { .. }) => Err((2, format!("error: {err}"))),
        Err(err) => Err((
            1,
            format!(
                "reload refused, nothing changed: {err}\n(the gateway's address cannot be read from the \
                 file either: give it with --url http://HOST:PORT{RELOAD_PATH}, or send the process SIGHUP)"
            ),
        )),
    }
}

/// A URL given without a path gets `/reload`.
fn with_path(url: &str) -> Result<reqwest::Url, String> {
    crate::util::operator_url::operator_url(url, RELOAD_PATH)
}

/// Ask and print; returns the exit status.
pub fn command(url: &str, pinned_cert: Option<&Path>) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the runtime: {err}");
            return 2;
        }
    };
    match runtime.block_on(ask(url, pinned_cert)) {
        Ok(Ok(message)) => {
            println!("{message}");
            0
        }
        Ok(Err(why)) => {
            eprintln!("reload refused, nothing changed: {why}");
            1
        }
        Err(err) => {
            eprintln!("error: {err}");
            2
        }
    }
}

/// `Ok(Ok(what changed))`, `Ok(Err(why refused))`, or `Err` when there was no answer.
async fn ask(url: &str, pinned_cert: Option<&Path>) -> Result<Result<String, String>, String> {
    let parsed = with_path(url)?;
    let client = crate::tls::pinned::operator_client(TIMEOUT, pinned_cert)?;
    let resp = client.post(parsed.clone()).send().await.map_err(|e| {
        let text = crate::util::http_client::error_chain(&e);
        format!("cannot reach {parsed}: {text}; is `mcpmux serve` running there?")
    })?;
    let status = resp.status();
    let body = resp.text().await.map_err(|e| format!("{parsed}: {e}"))?;
    let json: serde_json::Value = serde_json::from_str(&body).map_err(|_| {
        let body: String = body.trim().chars().take(300).collect();
        format!("{parsed} answered HTTP {status}, not an mcpmux reload answer: {body}")
    })?;
    let text = |key: &str| json.get(key).and_then(|v| v.as_str()).unwrap_or("").to_string();
    match (status.as_u16(), json.get("reloaded").and_then(|v| v.as_bool())) {
        (200, Some(true)) => Ok(Ok(text("message"))),
        (422, Some(false)) => Ok(Err(text("error"))),
        _ => Err(format!("{parsed} answered HTTP {status}: {}", text("error"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_address_gets_the_reload_path() {
        assert_eq!(
            with_path("http://127.0.0.1:9/").unwrap().as_str(),
            "http://127.0.0.1:9/reload"
        );
        assert_eq!(with_path("http://127.0.0.1:9/reload").unwrap().path(), "/reload");
        assert!(with_path("127.0.0.1:9").is_err());
        assert!(with_path("ftp://h/reload").is_err());
    }
}
