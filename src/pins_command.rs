//! `mcpmux pins [--config FILE | --url URL]`: the tools of a running gateway whose definition
//! drifted from its pin (`GET /pins` on its operator address), each with a readable diff (exit
//! status 0 none, 1 some, 2 not reached); `mcpmux pins approve SERVER[/TOOL]`: accept the new
//! definitions (`POST /pins/approve`; exit 0 approved, 1 nothing to approve, 2 not done).

use crate::admin::pins::{Approval, PinsReport, APPROVE_PATH, PINS_PATH};
use std::path::{Path, PathBuf};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);

/// `mcpmux pins` (`approve` = `None`) or `mcpmux pins approve TARGET`, asking the gateway at
/// `--url` or the one serving `--config`; returns the exit status.
pub fn run(approve: Option<&str>, config: Option<&Path>, url: Option<&str>) -> u8 {
    let base = match (url, config) {
        (Some(url), _) => base_of_url(url)
            .map(|base| (base, None))
            .map_err(|e| (2, format!("error: {e}"))),
        (None, Some(path)) => base_of_config(path),
        (None, None) => Err((
            2,
            "error: say which gateway: --url http://HOST:PORT (its operator address), or --config FILE \
             (the configuration it runs with; its admin_listen, else listen, is used)"
                .to_string(),
        )),
    };
    match (base, approve) {
        (Err((status, message)), _) => {
            eprintln!("{message}");
            status
        }
        (Ok((base, pinned)), None) => list(&base, pinned.as_deref()),
        (Ok((base, pinned)), Some(target)) => self::approve(&base, target, pinned.as_deref()),
    }
}

/// The operator address (`http://HOST:PORT`, `https://` with TLS) of the gateway serving the
/// file at `path` and the certificate file to trust, or the exit status and what to print.
pub fn base_of_config(path: &Path) -> Result<(String, Option<PathBuf>), (u8, String)> {
    match crate::config::operator_address(path) {
        Ok(endpoint) => Ok((endpoint.base(), endpoint.pinned_cert)),
        Err(err) => Err((
            2,
            format!(
                "error: {err}\n(the gateway's address cannot be read from the file: give it with \
                 --url http://HOST:PORT)"
            ),
        )),
    }
}

/// The operator address of a `--url` as `mcpmux reload` takes it (a bare address, or one
/// ending `/reload`; `/pins` is taken too): the URL without that path.
pub fn base_of_url(url: &str) -> Result<String, String> {
    let parsed = crate::util::operator_url::operator_url(url, "")?;
    let mut path = parsed.path().trim_end_matches('/');
    for suffix in [APPROVE_PATH, PINS_PATH, crate::admin::reload::RELOAD_PATH] {
        if let Some(prefix) = path.strip_suffix(suffix) {
            path = prefix;
            break;
        }
    }
    let mut base = parsed.clone();
    base.set_path(path);
    base.set_query(None);
    Ok(base.as_str().trim_end_matches('/').to_string())
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    (tokio::runtime::Builder::new_current_thread().enable_all().build())
        .map_err(|err| format!("cannot start the runtime: {err}"))
}

/// `mcpmux pins`: print the drifts; returns the exit status.
pub fn list(base: &str, pinned_cert: Option<&Path>) -> u8 {
    let asked = runtime().and_then(|rt| rt.block_on(get(base, pinned_cert)));
    let report = match asked {
        Ok(report) => report,
        Err(err) => {
            eprintln!("error: {err}");
            return 2;
        }
    };
    print!("{}", render(&report));
    match report.drifts.is_empty() {
        true => 0,
        false => 1,
    }
}

/// What `mcpmux pins` prints of a report.
pub fn render(report: &PinsReport) -> String {
    let mut out = String::new();
    if report.drifts.is_empty() {
        out.push_str(&format!(
            "no drifted tools (pinning mode {}, lock {})\n",
            report.mode, report.lock
        ));
        return out;
    }
    let count = report.drifts.len();
    out.push_str(&format!(
        "{count} drifted tool{} (pinning mode {}, lock {}):\n",
        if count == 1 { "" } else { "s" },
        report.mode,
        report.lock
    ));
    for drift in &report.drifts {
        out.push_str(&format!(
            "\n{}/{}: {} changed (pinned sha256 {}, now {})\n{}",
            drift.server,
            drift.tool,
            drift.changed.join(", "),
            &drift.pinned_sha256[..drift.pinned_sha256.len().min(12)],
            &drift.current_sha256[..drift.current_sha256.len().min(12)],
            drift.diff
        ));
    }
    out.push_str(&format!(
        "\nreview, then accept with `mcpmux pins approve SERVER[/TOOL]` (e.g. mcpmux pins approve {}/{})\n",
        report.drifts[0].server, report.drifts[0].tool
    ));
    out
}

/// `mcpmux pins approve SERVER[/TOOL]`; returns the exit status.
pub fn approve(base: &str, target: &str, pinned_cert: Option<&Path>) -> u8 {
    let approval = match target.split_once('/') {
        Some((server, tool)) if !server.is_empty() && !tool.is_empty() => Approval {
            server: server.to_string(),
            tool: Some(tool.to_string()),
        },
        None if !target.is_empty() => Approval {
            server: target.to_string(),
            tool: None,
        },
        _ => {
            eprintln!("error: say what to approve: SERVER (all its drifted tools) or SERVER/TOOL");
            return 2;
        }
    };
    match runtime().and_then(|rt| rt.block_on(post(base, &approval, pinned_cert))) {
        Ok((200, json)) => {
            let approved: Vec<&str> = (json["approved"].as_array().into_iter().flatten())
                .filter_map(|v| v.as_str())
                .collect();
            println!(
                "approved the new definition of {} of server {} (written to {}); hosts are told the tools list changed",
                approved.join(", "),
                approval.server,
                json["lock"].as_str().unwrap_or("the lock")
            );
            0
        }
        Ok((404, json)) => {
            eprintln!("{}", json["error"].as_str().unwrap_or("nothing to approve"));
            1
        }
        Ok((status, json)) => {
            eprintln!("error: HTTP {status}: {}", json["error"].as_str().unwrap_or(""));
            2
        }
        Err(err) => {
            eprintln!("error: {err}");
            2
        }
    }
}

fn unreachable(url: &str, e: reqwest::Error) -> String {
    let text = crate::util::http_client::error_chain(&e);
    format!("cannot reach {url}: {text}; is `mcpmux serve` running there?")
}

async fn get(base: &str, pinned_cert: Option<&Path>) -> Result<PinsReport, String> {
    let url = format!("{base}{PINS_PATH}");
    let client = crate::tls::pinned::operator_client(TIMEOUT, pinned_cert)?;
    let resp = (client.get(&url).send().await).map_err(|e| unreachable(&url, e))?;
    let status = resp.status();
    let body = resp.text().await.map_err(|e| format!("{url}: {e}"))?;
    if !status.is_success() {
        let body: String = body.trim().chars().take(300).collect();
        return Err(format!("{url} answered HTTP {status}: {body}"));
    }
    serde_json::from_str(&body)
        .map_err(|e| format!("{url} answered something that is not a pins report ({e})"))
}

async fn post(
    base: &str,
    approval: &Approval,
    pinned_cert: Option<&Path>,
) -> Result<(u16, serde_json::Value), String> {
    let url = format!("{base}{APPROVE_PATH}");
    let client = crate::tls::pinned::operator_client(TIMEOUT, pinned_cert)?;
    let body = serde_json::to_string(approval).map_err(|e| e.to_string())?;
    let resp = (client
        .post(&url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await)
        .map_err(|e| unreachable(&url, e))?;
    let status = resp.status().as_u16();
    let text = resp.text().await.map_err(|e| format!("{url}: {e}"))?;
    let json = serde_json::from_str(&text).map_err(|_| {
        let body: String = text.trim().chars().take(300).collect();
        format!("{url} answered HTTP {status}, not an mcpmux answer: {body}")
    })?;
    Ok((status, json))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_as_reload_takes_it_gives_the_operator_address() {
        for url in [
            "http://127.0.0.1:9",
            "http://127.0.0.1:9/",
            "http://127.0.0.1:9/reload",
            "http://127.0.0.1:9/pins",
        ] {
            assert_eq!(base_of_url(url).unwrap(), "http://127.0.0.1:9", "{url}");
        }
        assert_eq!(
            base_of_url("https://ops.example/gw/reload").unwrap(),
            "https://ops.example/gw"
        );
        assert!(base_of_url("127.0.0.1:9").is_err());
        assert!(base_of_url("ftp://h/").is_err());
    }
}
