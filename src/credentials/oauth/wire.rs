//! The HTTP exchanges every OAuth step shares: a JSON GET that tells "not there" from a
//! failure, a form POST to a token endpoint, a JSON POST to a registration endpoint; bodies
//! read up to a bound, error answers turned into [`OAuthError`] naming the endpoint.

use super::error::OAuthError;
use crate::util::http_client::error_chain;
use base64::Engine as _;
use serde_json::Value;

/// The most bytes of a metadata, registration or token response read.
pub(crate) const BODY_LIMIT: usize = 256 * 1024;

/// A URL as errors name it: no user info, query or fragment.
pub(crate) fn endpoint_name(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            parsed.set_query(None);
            parsed.set_fragment(None);
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.to_string()
        }
        Err(_) => "<invalid URL>".to_string(),
    }
}

/// The body of `resp`, failing past `limit` bytes.
pub(crate) async fn read_bounded(mut resp: reqwest::Response, limit: usize) -> Result<Vec<u8>, String> {
    if resp.content_length().is_some_and(|len| len > limit as u64) {
        return Err(format!("response larger than {limit} bytes"));
    }
    let mut out = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if out.len() + chunk.len() > limit {
                    return Err(format!("response larger than {limit} bytes"));
                }
                out.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(out),
            Err(err) => return Err(error_chain(&err)),
        }
    }
}

fn transport(endpoint: &str, err: reqwest::Error) -> OAuthError {
    // reqwest's error names the URL with its query; ours is the cleaned one.
    OAuthError::Transport {
        endpoint: endpoint_name(endpoint),
        reason: error_chain(&err.without_url()),
    }
}

/// What a metadata GET found.
pub(crate) enum Fetched {
    /// 200 with a JSON object.
    Found(Value),
    /// A 4xx answer (or a redirect, not followed): try the next candidate.
    Absent(u16),
}

/// GET `url` expecting a JSON object; a 4xx or 3xx is [`Fetched::Absent`], a 5xx or a transport
/// failure an error.
pub(crate) async fn get_json(http: &reqwest::Client, url: &str) -> Result<Fetched, OAuthError> {
    let resp = http
        .get(url)
        .header(reqwest::header::ACCEPT, "application/json")
        .header("MCP-Protocol-Version", "2025-11-25")
        .send()
        .await
        .map_err(|e| transport(url, e))?;
    let status = resp.status();
    if status.is_redirection() || status.is_client_error() {
        return Ok(Fetched::Absent(status.as_u16()));
    }
    let body = read_bounded(resp, BODY_LIMIT)
        .await
        .map_err(|reason| OAuthError::Transport {
            endpoint: endpoint_name(url),
            reason,
        })?;
    if !status.is_success() {
        return Err(OAuthError::refused(&endpoint_name(url), status.as_u16(), &body));
    }
    match serde_json::from_slice::<Value>(&body) {
        Ok(value) if value.is_object() => Ok(Fetched::Found(value)),
        _ => Err(OAuthError::Malformed {
            endpoint: endpoint_name(url),
            reason: "not a JSON object".to_string(),
        }),
    }
}

/// The client's credentials on a token request, per RFC 6749 §2.3.1.
pub(crate) struct BasicAuth<'a> {
    pub client_id: &'a str,
    pub client_secret: &'a str,
}

/// POST `form` to a token endpoint; the JSON object of a 2xx answer, else the AS's error.
pub(crate) async fn post_form(
    http: &reqwest::Client,
    endpoint: &str,
    form: &[(&str, &str)],
    basic: Option<BasicAuth<'_>>,
) -> Result<Value, OAuthError> {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form.iter())
        .finish();
    let mut req = http
        .post(endpoint)
        .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(reqwest::header::ACCEPT, "application/json")
        .body(body);
    if let Some(basic) = basic {
        // RFC 6749 §2.3.1: each part form-urlencoded before the base64.
        let pair = format!(
            "{}:{}",
            form_encode(basic.client_id),
            form_encode(basic.client_secret)
        );
        let value = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair));
        req = req.header(reqwest::header::AUTHORIZATION, value);
    }
    let resp = req.send().await.map_err(|e| transport(endpoint, e))?;
    json_answer(endpoint, resp).await
}

/// POST a JSON document (RFC 7591 registration); the JSON object of a 2xx answer.
pub(crate) async fn post_json(
    http: &reqwest::Client,
    endpoint: &str,
    body: &Value,
) -> Result<Value, OAuthError> {
    let resp = http
        .post(endpoint)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(reqwest::header::ACCEPT, "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| transport(endpoint, e))?;
    json_answer(endpoint, resp).await
}

async fn json_answer(endpoint: &str, resp: reqwest::Response) -> Result<Value, OAuthError> {
    let status = resp.status();
    let body = read_bounded(resp, BODY_LIMIT)
        .await
        .map_err(|reason| OAuthError::Transport {
            endpoint: endpoint_name(endpoint),
            reason,
        })?;
    if !status.is_success() {
        return Err(OAuthError::refused(
            &endpoint_name(endpoint),
            status.as_u16(),
            &body,
        ));
    }
    match serde_json::from_slice::<Value>(&body) {
        Ok(value) if value.is_object() => Ok(value),
        _ => Err(OAuthError::Malformed {
            endpoint: endpoint_name(endpoint),
            reason: format!("HTTP {status} without a JSON object"),
        }),
    }
}

fn form_encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
