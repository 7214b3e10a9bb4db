//! `mcpmux grants` and `mcpmux logout`: list the upstream grants (principal, server, scope,
//! expiry, whether refreshable, the grant's id; never a token) and remove one. With `--config
//! FILE` they open the vault that file names directly (whether or not a gateway runs: the vault
//! is locked for each write); with `--url URL` they ask a running gateway's `/grants` (served
//! where `/reload` is). Exit status: `grants` 0 listed, 2 not read; `logout` 0 removed, 1
//! nothing to remove, 2 not done.

use crate::admin::grants::{no_grant, GrantLine, SigningIn, GRANTS_PATH};
use crate::credentials::grant::GrantKey;
use crate::credentials::vault::Vault;
use std::path::Path;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Which vault: the one a configuration file names, or a running gateway's.
#[derive(Debug, Clone, Copy)]
pub enum Where<'a> {
    Config(&'a Path),
    Url(&'a str),
}

/// `mcpmux grants`: print the grants; the exit status.
pub fn grants(at: Where<'_>) -> u8 {
    match run(async move {
        match at {
            Where::Config(path) => local_list(path).await,
            Where::Url(url) => remote_list(url).await,
        }
    }) {
        Ok(lines) => {
            print!("{}", table(&lines, now()));
            0
        }
        Err(err) => {
            eprintln!("error: {err}");
            2
        }
    }
}

/// `mcpmux logout SERVER --principal P`: remove that grant; the exit status.
pub fn logout(server: &str, principal: &str, at: Where<'_>) -> u8 {
    let key = GrantKey::new(principal, server);
    let done = run(async {
        match at {
            Where::Config(path) => {
                let vault = open(path)?;
                let removed = vault.remove_named(principal, server).await;
                removed.map(|k| k.is_some()).map_err(|e| e.to_string())
            }
            Where::Url(url) => remote_remove(url, &key).await,
        }
    });
    match done {
        Ok(true) => {
            println!("signed out: the grant of principal {principal:?} for server {server:?} is removed");
            0
        }
        Ok(false) => {
            eprintln!("{}", no_grant(&key));
            1
        }
        Err(err) => {
            eprintln!("error: {err}");
            2
        }
    }
}

fn run<T>(work: impl std::future::Future<Output = Result<T, String>>) -> Result<T, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(work)
}

fn now() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map(|d| d.as_secs()).unwrap_or(0)
}

/// The vault the configuration at `path` names.
fn open(path: &Path) -> Result<Vault, String> {
    let config = crate::config::Config::load(path).map_err(|e| e.to_string())?;
    Vault::open(&config.vault).map_err(|e| e.to_string())
}

async fn local_list(path: &Path) -> Result<Vec<GrantLine>, String> {
    let vault = open(path)?;
    let grants = vault.list().await.map_err(|e| e.to_string())?;
    Ok(grants.into_iter().map(|(k, s)| GrantLine::new(k, s)).collect())
}

/// The gateway's `/grants` URL from `--url` (a URL without a path gets `/grants`).
fn grants_url(url: &str) -> Result<reqwest::Url, String> {
    crate::util::operator_url::operator_url(url, GRANTS_PATH)
}

fn client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot make an HTTP client: {e}"))
}

/// The answer's status and JSON body, or why there was none.
async fn ask(
    request: reqwest::RequestBuilder,
    url: &reqwest::Url,
) -> Result<(u16, serde_json::Value), String> {
    let resp = request.send().await.map_err(|e| {
        let text = crate::util::http_client::error_chain(&e);
        format!("cannot reach {url}: {text}; is `mcpmux serve` running there?")
    })?;
    let status = resp.status();
    let body = resp.text().await.map_err(|e| format!("{url}: {e}"))?;
    let json: serde_json::Value = serde_json::from_str(&body).map_err(|_| {
        let body: String = body.trim().chars().take(300).collect();
        format!("{url} answered HTTP {status}, not an mcpmux grants answer: {body}")
    })?;
    Ok((status.as_u16(), json))
}

fn error_of(json: &serde_json::Value) -> &str {
    json.get("error").and_then(|v| v.as_str()).unwrap_or("")
}

async fn remote_list(url: &str) -> Result<Vec<GrantLine>, String> {
    let url = grants_url(url)?;
    let (status, json) = ask(client()?.get(url.clone()), &url).await?;
    let lines = match (status, json.get("grants")) {
        (200, Some(grants)) => serde_json::from_value::<Vec<GrantLine>>(grants.clone())
            .map_err(|e| format!("{url}: an answer this mcpmux does not read: {e}"))?,
        _ => return Err(format!("{url} answered HTTP {status}: {}", error_of(&json))),
    };
    // Sign-ins waiting for a person: their links (each works once), after the table.
    let waiting: Vec<SigningIn> = (json.get("signing_in").cloned())
        .and_then(|w| serde_json::from_value(w).ok())
        .unwrap_or_default();
    for w in waiting {
        eprintln!(
            "waiting for {} to sign in to {} (started {} s ago): {}",
            w.principal, w.server, w.for_secs, w.url
        );
    }
    Ok(lines)
}

async fn remote_remove(url: &str, key: &GrantKey) -> Result<bool, String> {
    let mut url = grants_url(url)?;
    let shown = url.to_string();
    url.path_segments_mut()
        .map_err(|()| format!("--url {shown}: cannot add the server to its path"))?
        .pop_if_empty()
        .push(&key.upstream);
    url.query_pairs_mut().append_pair("principal", &key.principal);
    let (status, json) = ask(client()?.delete(url.clone()), &url).await?;
    match (status, json.get("removed").and_then(|v| v.as_bool())) {
        (200, Some(true)) => Ok(true),
        (404, Some(false)) => Ok(false),
        _ => Err(format!("{url} answered HTTP {status}: {}", error_of(&json))),
    }
}

/// The grants as a table (a line saying there are none when there are none).
fn table(lines: &[GrantLine], now: u64) -> String {
    if lines.is_empty() {
        return "no grants (sign in to an upstream with `mcpmux login SERVER`)\n".into();
    }
    let header = ["PRINCIPAL", "SERVER", "SCOPE", "EXPIRES", "REFRESHABLE", "ID"].map(String::from);
    let mut rows = vec![header];
    for line in lines {
        rows.push([
            line.principal.clone(),
            line.server.clone(),
            line.scope.clone().unwrap_or_else(|| "-".into()),
            expiry(line.expires_at, now),
            if line.refreshable { "yes" } else { "no" }.into(),
            line.id.clone(),
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// When a grant expires, in UTC and relative to now.
fn expiry(at: Option<u64>, now: u64) -> String {
    let Some(at) = at else {
        return "never".into();
    };
    let when = crate::audit::record::rfc3339(at, 0).replace(".000Z", "Z");
    let human = |secs: u64| match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    };
    if at > now {
        format!("{when} (in {})", human(at - now))
    } else {
        format!("{when} (expired {} ago)", human(now - at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(principal: &str, server: &str, expires_at: Option<u64>, refreshable: bool) -> GrantLine {
        GrantLine {
            principal: principal.into(),
            server: server.into(),
            scope: Some("read write".into()),
            expires_at,
            obtained_at: 0,
            refreshable,
            id: "0123456789ab".into(),
        }
    }

    #[test]
    fn the_table_shows_who_what_scope_expiry_and_refreshability() {
        let now = 1_800_000_000;
        let text = table(
            &[
                line("local", "linear", Some(now + 3600), true),
                line("alice@example.com", "github", Some(now - 90), false),
                line("local", "notion", None, false),
            ],
            now,
        );
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows.len(), 4, "{text}");
        assert!(rows[0].starts_with("PRINCIPAL          SERVER  SCOPE"), "{text}");
        assert!(
            rows[1].contains("linear") && rows[1].contains("(in 60m)") && rows[1].contains(" yes "),
            "{text}"
        );
        assert!(rows[1].contains("2027-01-15T09:00:00Z"), "{text}");
        assert!(
            rows[2].contains("(expired 90s ago)") && rows[2].contains(" no "),
            "{text}"
        );
        assert!(rows[3].contains("never"), "{text}");
        assert!(table(&[], now).starts_with("no grants"));
    }

    #[test]
    fn a_bare_address_gets_the_grants_path() {
        assert_eq!(
            grants_url("http://127.0.0.1:9/").unwrap().as_str(),
            "http://127.0.0.1:9/grants"
        );
        assert_eq!(grants_url("http://127.0.0.1:9/grants").unwrap().path(), "/grants");
        assert!(grants_url("127.0.0.1:9").is_err());
        assert!(grants_url("ftp://h/grants").is_err());
    }
}
