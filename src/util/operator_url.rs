//! The `--url` of the CLI commands that ask a running gateway (`reload`, `grants`, `pins`): an
//! http:// or https:// URL with a host, its path defaulting to the command's endpoint.

/// `url` parsed; without a path it gets `default_path` (which also completes the example an
/// error gives).
pub fn operator_url(url: &str, default_path: &str) -> Result<reqwest::Url, String> {
    let mut parsed = reqwest::Url::parse(url).map_err(|e| {
        format!(
            "--url {url:?} is not a URL ({e}); give the gateway's operator address, e.g. http://127.0.0.1:8080{default_path}"
        )
    })?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(format!(
            "--url {url:?}: an http:// or https:// URL with a host is needed"
        ));
    }
    if parsed.path() == "/" || parsed.path().is_empty() {
        parsed.set_path(default_path);
    }
    Ok(parsed)
}
