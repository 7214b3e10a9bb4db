//! `mcpmux status`: fetch a running gateway's `/status` and print it as a table (or as JSON);
//! the exit status says whether every upstream is ready.

use crate::config::Config;
use crate::status_doc::StatusDocument;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The `/status` URL of the gateway a configuration describes (a wildcard listen address is
/// reached on loopback).
pub fn status_url(config: &Config) -> String {
    let mut addr: SocketAddr = config.gateway.listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    format!("http://{addr}{}", crate::admin::status::STATUS_PATH)
}

/// Fetch the status document.
pub async fn fetch(url: &str) -> Result<StatusDocument, String> {
    let client = reqwest::Client::builder()
        .timeout(FETCH_TIMEOUT)
        .build()
        .map_err(|e| e.to_string())?;
    let resp = client
        .get(url)
        .send()
        .await
        .map_err(|e| format!("cannot reach {url}: {e}"))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| format!("{url}: {e}"))?;
    if !status.is_success() {
        return Err(format!("{url} answered HTTP {status}: {}", text.trim()));
    }
    serde_json::from_str(&text).map_err(|e| format!("{url} did not answer a status document: {e}"))
}

/// Fetch and print the status; the exit status: 0 every upstream ready, 1 not, 2 unreachable.
pub fn command(url: &str, json: bool) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the runtime: {err}");
            return 2;
        }
    };
    match runtime.block_on(fetch(url)) {
        Ok(doc) => {
            match json {
                true => match serde_json::to_string_pretty(&doc) {
                    Ok(text) => println!("{text}"),
                    Err(err) => eprintln!("error: {err}"),
                },
                false => print!("{}", render(&doc)),
            }
            u8::from(!doc.all_ready())
        }
        Err(err) => {
            eprintln!("error: {err}");
            2
        }
    }
}

/// The document as a table for people.
pub fn render(doc: &StatusDocument) -> String {
    let mut out = String::new();
    let version = match doc.server.version.as_str() {
        "" => "?",
        version => version,
    };
    let _ = writeln!(
        out,
        "mcpmux {version}, up {} s: {} session(s), {} listen stream(s), {} call(s) waiting for input",
        doc.uptime_secs, doc.sessions, doc.listen_streams, doc.calls_waiting_for_input,
    );
    let _ = writeln!(
        out,
        "{:<20} {:<11} {:<9} {:<10} {:>8} {:>6} {:>7} {:>9}  last error",
        "UPSTREAM", "PHASE", "ERA", "TRANSPORT", "RESTARTS", "TOOLS", "PROMPTS", "RESOURCES"
    );
    for u in &doc.upstreams {
        let _ = writeln!(
            out,
            "{:<20} {:<11} {:<9} {:<10} {:>8} {:>6} {:>7} {:>9}  {}",
            u.name,
            u.phase.as_str(),
            u.era.as_deref().unwrap_or("-"),
            u.transport,
            u.restarts,
            u.tools,
            u.prompts,
            u.resources,
            u.last_error.as_deref().unwrap_or("-"),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_one_line_per_upstream_and_tells_readiness() {
        let doc = json!({
            "server": {"version": "0.1.0"}, "uptime_secs": 5, "sessions": 2,
            "listen_streams": 0, "calls_waiting_for_input": 0,
            "upstreams": [
                {"name": "a", "phase": "ready", "era": "session", "transport": "stdio",
                 "restarts": 0, "tools": 3, "prompts": 0, "resources": 1, "last_error": null},
                {"name": "b", "phase": "crash-loop", "era": null, "transport": "http",
                 "restarts": 7, "tools": 0, "prompts": 0, "resources": 0, "last_error": "exit 1"}
            ]
        });
        let doc: StatusDocument = serde_json::from_value(doc).expect("a status document");
        let table = render(&doc);
        assert_eq!(table.lines().count(), 4, "{table}");
        assert!(
            table.contains("crash-loop") && table.contains("exit 1"),
            "{table}"
        );
        assert!(!doc.all_ready());
    }
}
