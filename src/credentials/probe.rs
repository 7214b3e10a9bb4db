//! Asking an upstream, without a credential, what it wants: the `WWW-Authenticate` challenge of
//! its 401 (where its protected resource metadata is, which scopes). This is how the spec's
//! client starts discovery.

use super::oauth::{parse_www_authenticate, Challenge};

/// How much of a probe's answer is read (only to let the connection be reused).
const MAX_BODY: usize = 4096;

/// The challenge the MCP server at `url` answers an unauthenticated `initialize` with, if it
/// refuses it with one.
pub async fn challenge_of(http: &reqwest::Client, url: &url::Url) -> Option<Challenge> {
    let initialize = serde_json::json!({
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": crate::protocol::version::SESSION_ERA_VERSIONS[0],
            "capabilities": {},
            "clientInfo": { "name": "mcpmux", "version": env!("CARGO_PKG_VERSION") }
        }
    });
    let resp = http
        .post(url.clone())
        .header(reqwest::header::ACCEPT, "application/json, text/event-stream")
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(initialize.to_string())
        .send()
        .await
        .ok()?;
    let challenge = resp
        .headers()
        .get_all(reqwest::header::WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(parse_www_authenticate);
    let refused = matches!(resp.status().as_u16(), 401 | 403);
    // Drain a little of the body so the connection can be reused; an accepted probe opened a
    // session mcpmux does not use (the server reaps it).
    let mut resp = resp;
    let mut read = 0;
    while let Ok(Some(chunk)) = resp.chunk().await {
        read += chunk.len();
        if read >= MAX_BODY {
            break;
        }
    }
    challenge.filter(|_| refused)
}
