//! `mcpmux status`: fetch a running gateway's `/status` and print it as a table (or as JSON);
//! the exit status says whether every upstream is ready.

use crate::config::ConfigError;
use crate::status_doc::StatusDocument;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The `/status` URL of the gateway serving the file at `path`: on `gateway.admin_listen` when
/// set, else on `listen` (a wildcard address is reached on loopback). Only those two keys are
/// read (through the file's includes): the rest of the file may name variables this shell has
/// not set, or hold a mistake the running gateway refused.
pub fn status_url(path: &Path) -> Result<String, ConfigError> {
    Ok(status_target(path)?.0)
}

/// [`status_url`], and the certificate file to trust when the gateway serves TLS.
pub fn status_target(path: &Path) -> Result<(String, Option<PathBuf>), ConfigError> {
    let endpoint = crate::config::operator_address(path)?;
    let url = format!("{}{}", endpoint.base(), crate::admin::status::STATUS_PATH);
    Ok((url, endpoint.pinned_cert))
}

/// Fetch the status document (trusting only `pinned_cert` when given); an error says what to fix.
pub async fn fetch(url: &str, pinned_cert: Option<&Path>) -> Result<StatusDocument, String> {
    let parsed = check_url(url)?;
    let client = crate::tls::pinned::operator_client(FETCH_TIMEOUT, pinned_cert)?;
    let resp = client
        .get(parsed)
        .send()
        .await
        .map_err(|e| unreachable_message(url, &e))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| format!("{url}: {e}"))?;
    if status == reqwest::StatusCode::NOT_FOUND {
        return Err(not_found_message(url));
    }
    if !status.is_success() {
        let body: String = text.trim().chars().take(300).collect();
        return Err(format!("{url} answered HTTP {status}: {body}"));
    }
    serde_json::from_str(&text).map_err(|e| {
        format!(
            "{url} answered, but not with an mcpmux status document ({e}); is it the gateway's /status URL?"
        )
    })
}

const URL_EXAMPLE: &str = "http://127.0.0.1:8080/status";

/// An http(s) URL with a host, or an error that shows the expected form.
fn check_url(url: &str) -> Result<reqwest::Url, String> {
    let wrong =
        |why: String| format!("--url {url:?} {why}; give the gateway's status URL, e.g. {URL_EXAMPLE}");
    let parsed = match reqwest::Url::parse(url) {
        Ok(parsed) => parsed,
        Err(url::ParseError::RelativeUrlWithoutBase) => {
            return Err(wrong("has no scheme (http:// or https://)".into()))
        }
        Err(err) => return Err(wrong(format!("is not a URL ({err})"))),
    };
    match (parsed.scheme(), parsed.host_str()) {
        ("http" | "https", Some(_)) => Ok(parsed),
        ("http" | "https", None) => Err(wrong("has no host".into())),
        (scheme, _) => Err(wrong(format!("has scheme {scheme:?}, not http or https"))),
    }
}

/// Why the gateway could not be reached, with the cause at the root of the error chain
/// ("Connection refused") and what to check.
fn unreachable_message(url: &str, err: &reqwest::Error) -> String {
    let mut causes = Vec::new();
    let mut source: Option<&dyn std::error::Error> = Some(err);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !causes.contains(&text) {
            causes.push(text);
        }
        source = cause.source();
    }
    let root = causes.last().cloned().unwrap_or_default();
    let hint = if err.is_timeout() {
        "the gateway did not answer in time"
    } else if root.to_ascii_lowercase().contains("refused") {
        "connection refused: is `mcpmux serve` running and listening on that address?"
    } else if err.is_connect() {
        "is `mcpmux serve` running, and is the host and port right?"
    } else {
        "check the URL"
    };
    format!("cannot reach {url}: {}; {hint}", causes.join(": "))
}

/// A 404: the URL is not the status endpoint; suggest the one next to it.
fn not_found_message(url: &str) -> String {
    let path = crate::admin::status::STATUS_PATH;
    match reqwest::Url::parse(url) {
        Ok(mut guess) if !guess.path().ends_with(path) => {
            guess.set_path(path);
            guess.set_query(None);
            format!("{url} answered 404 Not Found: the status document is at {path}; try --url {guess}")
        }
        _ => format!(
            "{url} answered 404 Not Found: is this an mcpmux gateway (and is {path} not its MCP path)?"
        ),
    }
}

/// Fetch and print the status; the exit status: 0 every upstream ready, 1 not, 2 unreachable.
pub fn command(url: &str, pinned_cert: Option<&Path>, json: bool) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the runtime: {err}");
            return 2;
        }
    };
    match runtime.block_on(fetch(url, pinned_cert)) {
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

fn unix_now() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map(|d| d.as_secs()).unwrap_or_default()
}

/// How the last reload went, once there was one (`now` in Unix seconds).
fn reload_line(config: &crate::status_doc::ConfigStatus, now: u64) -> Option<String> {
    let last = config.last_reload.as_ref()?;
    let ago = |at: u64| now.saturating_sub(at);
    let digest = |d: &Option<String>| d.clone().unwrap_or_else(|| "-".into());
    Some(match &last.error {
        None if last.needs_restart.is_empty() => format!(
            "last reload: ok {} s ago (config digest {})",
            ago(last.at_unix),
            digest(&last.digest)
        ),
        None => format!(
            "last reload: ok {} s ago (config digest {}); changed but kept until a restart: {}",
            ago(last.at_unix),
            digest(&last.digest),
            last.needs_restart.join(", ")
        ),
        Some(error) => format!(
            "last reload: REFUSED {} s ago (config digest {}): {}; serving the configuration loaded {} s ago (config digest {})",
            ago(last.at_unix),
            digest(&last.digest),
            one_line(error),
            ago(config.loaded_at_unix),
            digest(&config.digest)
        ),
    })
}

/// The document as tables for people: one line per upstream, then one per session.
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
    let upstreams = Table {
        header: &[
            "UPSTREAM",
            "PHASE",
            "ERA",
            "TRANSPORT",
            "RESTARTS",
            "TOOLS",
            "PROMPTS",
            "RESOURCES",
            "SHADOWED",
            "LAST ERROR",
        ],
        right_aligned: &[4, 5, 6, 7, 8],
        rows: (doc.upstreams.iter())
            .map(|u| {
                vec![
                    u.name.clone(),
                    u.phase.as_str().to_string(),
                    u.era.clone().unwrap_or_else(|| "-".into()),
                    u.transport.clone(),
                    u.restarts.to_string(),
                    u.tools.to_string(),
                    u.prompts.to_string(),
                    (u.resources + u.resource_templates).to_string(),
                    u.shadowed.to_string(),
                    one_line(u.last_error.as_deref().unwrap_or("-")),
                ]
            })
            .collect(),
    };
    upstreams.write(&mut out);
    let (waiting, off): (Vec<&String>, Vec<&String>) =
        (doc.disabled.iter()).partition(|name| doc.disabled_reasons.contains_key(*name));
    if !off.is_empty() {
        let names: Vec<&str> = off.iter().map(|n| n.as_str()).collect();
        let _ = writeln!(out, "disabled (enabled = false): {}", names.join(", "));
    }
    for name in waiting {
        let why = doc.disabled_reasons.get(name).map_or("", String::as_str);
        let _ = writeln!(out, "disabled {name}: {}", one_line(why));
    }
    if let Some(line) = reload_line(&doc.config, unix_now()) {
        let _ = writeln!(out, "{line}");
    }
    for p in &doc.profiles {
        let _ = writeln!(
            out,
            "profile {} at {}: servers {}; {} tools, {} prompts, {} resources; {} sessions",
            p.name,
            p.path,
            p.servers.join(", "),
            p.tools,
            p.prompts,
            p.resources + p.resource_templates,
            p.sessions
        );
    }
    if !doc.session_list.is_empty() {
        out.push('\n');
        let sessions = Table {
            header: &[
                "SESSION",
                "PROTOCOL",
                "CLIENT",
                "AGE",
                "IDLE",
                "IN FLIGHT",
                "GET STREAM",
            ],
            right_aligned: &[3, 4, 5],
            rows: (doc.session_list.iter())
                .map(|s| {
                    vec![
                        format!("{}…", s.id_prefix),
                        s.protocol_version.clone(),
                        one_line(s.client.as_deref().unwrap_or("-")),
                        format!("{} s", s.age_secs),
                        format!("{} s", s.idle_secs),
                        s.in_flight.to_string(),
                        if s.get_stream { "open" } else { "-" }.to_string(),
                    ]
                })
                .collect(),
        };
        sessions.write(&mut out);
    }
    if let Some(audit) = &doc.audit {
        let _ = writeln!(
            out,
            "\naudit log {}: {} line(s) written, {} dropped (queue full), {} lost to write errors{}",
            one_line(&audit.path),
            audit.lines_written,
            audit.dropped,
            audit.write_errors,
            audit
                .last_error
                .as_deref()
                .map(|e| format!(" (last: {})", one_line(e)))
                .unwrap_or_default(),
        );
    }
    if let Some(store) = &doc.shared_store {
        let _ = writeln!(
            out,
            "\nshared store {}: {}",
            one_line(&store.url),
            one_line(&store.state)
        );
    }
    out
}

/// Control characters (a multi-line error, a hostile client name) would break the table.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Columns as wide as their widest cell; the last column is not padded.
struct Table<'a> {
    header: &'a [&'a str],
    /// Columns of numbers, aligned right.
    right_aligned: &'a [usize],
    rows: Vec<Vec<String>>,
}

impl Table<'_> {
    fn write(&self, out: &mut String) {
        let header: Vec<String> = self.header.iter().map(|h| h.to_string()).collect();
        let lines: Vec<&Vec<String>> = std::iter::once(&header).chain(&self.rows).collect();
        let widths: Vec<usize> = (0..header.len())
            .map(|col| {
                (lines.iter())
                    .map(|row| row.get(col).map_or(0, |c| c.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for row in lines {
            let mut line = String::new();
            for (col, cell) in row.iter().enumerate() {
                if col > 0 {
                    line.push_str("  ");
                }
                let pad = " ".repeat(widths[col].saturating_sub(cell.chars().count()));
                match (self.right_aligned.contains(&col), col + 1 == row.len()) {
                    (true, _) => line.push_str(&format!("{pad}{cell}")),
                    (false, true) => line.push_str(cell),
                    (false, false) => line.push_str(&format!("{cell}{pad}")),
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_audit_log_line_says_what_was_written_and_lost() {
        let doc = json!({"upstreams": [], "audit": {"path": "/var/log/a.jsonl", "lines_written": 7,
            "dropped": 2, "write_errors": 1, "last_error": "No space left on device\n(os error 28)"}});
        let doc: StatusDocument = serde_json::from_value(doc).expect("a status document");
        let text = render(&doc);
        assert!(
            text.ends_with(
                "audit log /var/log/a.jsonl: 7 line(s) written, 2 dropped (queue full), 1 lost to write \
                 errors (last: No space left on device (os error 28))\n"
            ),
            "{text}"
        );
        let none: StatusDocument = serde_json::from_value(json!({"upstreams": []})).expect("a document");
        assert!(!render(&none).contains("audit"));
    }

    #[test]
    fn the_shared_store_line_says_whether_it_answers() {
        let doc =
            json!({"upstreams": [], "shared_store": {"url": "redis://:***@cache:6379/0", "state": "down"}});
        let doc: StatusDocument = serde_json::from_value(doc).expect("a status document");
        assert!(
            render(&doc).ends_with("\nshared store redis://:***@cache:6379/0: down\n"),
            "{}",
            render(&doc)
        );
        let none: StatusDocument = serde_json::from_value(json!({"upstreams": []})).expect("a document");
        assert!(!render(&none).contains("shared store"));
    }

    #[test]
    fn the_last_reload_is_said_once_there_was_one_with_its_error() {
        let doc = |last: serde_json::Value| {
            let doc = json!({"upstreams": [], "config": {"loaded_at_unix": 100, "digest": "aa", "last_reload": last}});
            serde_json::from_value::<StatusDocument>(doc).expect("a status document")
        };
        assert_eq!(reload_line(&doc(json!(null)).config, 160), None);
        let ok = doc(json!({"outcome": "ok", "at_unix": 100, "digest": "aa"}));
        assert_eq!(
            reload_line(&ok.config, 160).as_deref(),
            Some("last reload: ok 60 s ago (config digest aa)")
        );
        let kept = doc(
            json!({"outcome": "ok", "at_unix": 100, "digest": "aa", "needs_restart": ["gateway.listen", "[cluster]"]}),
        );
        assert_eq!(
            reload_line(&kept.config, 160).as_deref(),
            Some(
                "last reload: ok 60 s ago (config digest aa); changed but kept until a restart: \
                 gateway.listen, [cluster]"
            )
        );
        let refused = doc(
            json!({"outcome": "error", "at_unix": 150, "error": "t.toml:3:1: bad\nmore", "digest": "bb"}),
        );
        assert_eq!(
            reload_line(&refused.config, 160).as_deref(),
            Some(
                "last reload: REFUSED 10 s ago (config digest bb): t.toml:3:1: bad more; serving the \
                 configuration loaded 60 s ago (config digest aa)"
            )
        );
        assert!(render(&refused).contains("last reload: REFUSED"));
    }

    #[test]
    fn disabled_servers_are_named_after_the_upstreams() {
        let doc = json!({"upstreams": [{"name": "a", "phase": "ready"}], "disabled": ["gh", "old"]});
        let doc: StatusDocument = serde_json::from_value(doc).expect("a status document");
        let text = render(&doc);
        assert!(
            text.ends_with("\ndisabled (enabled = false): gh, old\n"),
            "{text}"
        );
        let none: StatusDocument = serde_json::from_value(json!({"upstreams": []})).expect("a document");
        assert!(!render(&none).contains("disabled"));
        // One waiting for a variable gets a line of its own, with the reason.
        let doc = json!({"upstreams": [], "disabled": ["gh", "api"],
                         "disabled_reasons": {"api": "not started: it needs API_KEY (needs_env)"}});
        let doc: StatusDocument = serde_json::from_value(doc).expect("a status document");
        let text = render(&doc);
        assert!(
            text.ends_with(
                "\ndisabled (enabled = false): gh\ndisabled api: not started: it needs API_KEY (needs_env)\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn profiles_are_named_with_their_path_servers_and_counts() {
        let doc = json!({"upstreams": [{"name": "a", "phase": "ready"}], "profiles": [
            {"name": "review", "path": "/mcp/review", "servers": ["a", "b"], "tools": 3, "prompts": 1,
             "resources": 2, "resource_templates": 1, "sessions": 4}]});
        let doc: StatusDocument = serde_json::from_value(doc).expect("a status document");
        let text = render(&doc);
        assert!(
            text.ends_with(
                "\nprofile review at /mcp/review: servers a, b; 3 tools, 1 prompts, 3 resources; 4 sessions\n"
            ),
            "{text}"
        );
        let none: StatusDocument = serde_json::from_value(json!({"upstreams": []})).expect("a document");
        assert!(!render(&none).contains("profile"));
    }

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

    #[test]
    fn a_url_that_cannot_work_says_what_to_give() {
        let no_scheme = check_url("127.0.0.1:8080/status").expect_err("no scheme");
        assert!(
            no_scheme.contains("no scheme") && no_scheme.contains(URL_EXAMPLE),
            "{no_scheme}"
        );
        let ftp = check_url("ftp://h/status").expect_err("not http");
        assert!(ftp.contains("\"ftp\""), "{ftp}");
        assert!(check_url("http://127.0.0.1:8080/status").is_ok());
        let missing = not_found_message("http://127.0.0.1:8080/");
        assert!(
            missing.contains("try --url http://127.0.0.1:8080/status"),
            "{missing}"
        );
    }

    #[test]
    fn the_status_url_is_on_the_admin_listener_and_read_whatever_else_the_file_holds() {
        let dir = std::env::temp_dir().join(format!("mcpmux-status-url-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch folder");
        let url = |text: &str| {
            let path = dir.join("mcpmux.toml");
            std::fs::write(&path, text).expect("write");
            status_url(&path).map_err(|e| e.to_string())
        };
        let main = url("[gateway]\nlisten = \"127.0.0.1:8123\"\n");
        assert_eq!(main.as_deref(), Ok("http://127.0.0.1:8123/status"));
        let admin = url("[gateway]\nlisten = \"127.0.0.1:8123\"\nadmin_listen = \"0.0.0.0:9123\"\n");
        assert_eq!(admin.as_deref(), Ok("http://127.0.0.1:9123/status"));
        // A variable this shell does not have and a key the gateway would refuse are not its
        // business: it needs the address only.
        let rest = url(
            "[gateway]\nlisten = \"127.0.0.1:8123\"\nbogus = 1\n[servers.a]\ncommand = \"sh\"\n\
             env = { TOKEN = \"${MCPMUX_STATUS_URL_TEST_UNSET}\" }\n",
        );
        assert_eq!(rest.as_deref(), Ok("http://127.0.0.1:8123/status"));
        assert_eq!(url("").as_deref(), Ok("http://127.0.0.1:8080/status"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_refused_connection_says_so() {
        // A port that was just free: nothing listens on it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let err = fetch(&format!("http://127.0.0.1:{port}/status"), None)
            .await
            .expect_err("nothing listens");
        assert!(err.to_ascii_lowercase().contains("connection refused"), "{err}");
        assert!(err.contains("mcpmux serve"), "{err}");
    }

    #[test]
    fn columns_line_up_whatever_the_widths_and_sessions_are_listed() {
        let doc = json!({
            "server": {"version": "0.1.0"}, "sessions": 1,
            "upstreams": [
                {"name": "a-rather-long-upstream-name", "phase": "ready", "era": "stateless",
                 "transport": "sse", "restarts": 12345, "tools": 0, "shadowed": 3},
                {"name": "b", "phase": "restarting", "transport": "stdio",
                 "last_error": "exit status 1\nTraceback: boom"}
            ],
            "session_list": [{"id_prefix": "abcd1234", "protocol_version": "2025-11-25",
                              "client": "claude-code 2.0.1", "age_secs": 61, "idle_secs": 5,
                              "in_flight": 2, "get_stream": true}]
        });
        let doc: StatusDocument = serde_json::from_value(doc).expect("a status document");
        let table = render(&doc);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 7, "{table}");
        // Every column starts at the same character in the header and in each row.
        let start = |line: &str, word: &str| line.find(word).unwrap_or_else(|| panic!("{word} in {line}"));
        let phase = start(lines[1], "PHASE");
        assert_eq!(start(lines[2], "ready"), phase, "{table}");
        assert_eq!(start(lines[3], "restarting"), phase, "{table}");
        let restarts_end = start(lines[1], "RESTARTS") + "RESTARTS".len();
        assert_eq!(start(lines[2], "12345") + 5, restarts_end, "{table}");
        assert!(lines[2].contains(" 3 "), "shadowed count shown: {table}");
        assert!(lines[3].ends_with("exit status 1 Traceback: boom"), "{table}");
        assert!(
            lines[5].starts_with("SESSION") && lines[6].starts_with("abcd1234…"),
            "{table}"
        );
        assert!(
            lines[6].contains("claude-code 2.0.1") && lines[6].contains("open"),
            "{table}"
        );
    }
}
