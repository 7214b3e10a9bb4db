//! Why a request is not authenticated, and the `WWW-Authenticate: Bearer` challenge that says
//! so (RFC 6750 §3, RFC 9728 §5.1): no `error=` without credentials, `invalid_token` for a bad
//! one, `insufficient_scope` with every scope the operation needs.

use crate::error::DownstreamError;

/// Why a request carries no acceptable credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No `Authorization: Bearer` header.
    NoCredentials,
    /// A token that is not valid here (signature, issuer, audience, lifetime, algorithm...).
    InvalidToken(String),
    /// A valid token without these scopes (all the operation needs).
    InsufficientScope(Vec<String>),
    /// A malformed request: a token in the query string, or an Authorization header that is
    /// not one bearer token.
    InvalidRequest(String),
    /// Tokens cannot be checked now (the authorization server's keys cannot be fetched): 503,
    /// not `invalid_token`, so a host does not throw away a good token.
    Unavailable(String),
}

/// Printable ASCII without `"` or `\` (a quoted-string's content), for error descriptions.
fn quotable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .take(200)
        .collect()
}

/// The challenge for `failure`; `scopes` are the ones to ask for when there is no token.
pub fn www_authenticate(metadata_url: &str, scopes: &[String], failure: &Failure) -> String {
    let mut params = Vec::new();
    match failure {
        Failure::NoCredentials | Failure::Unavailable(_) => {}
        Failure::InvalidToken(why) => {
            params.push("error=\"invalid_token\"".to_string());
            params.push(format!("error_description=\"{}\"", quotable(why)));
        }
        Failure::InsufficientScope(_) => params.push("error=\"insufficient_scope\"".to_string()),
        Failure::InvalidRequest(why) => {
            params.push("error=\"invalid_request\"".to_string());
            params.push(format!("error_description=\"{}\"", quotable(why)));
        }
    }
    params.push(format!("resource_metadata=\"{}\"", quotable(metadata_url)));
    let scope = match failure {
        Failure::InsufficientScope(needed) => needed.join(" "),
        _ => scopes.join(" "),
    };
    if !scope.is_empty() {
        params.push(format!("scope=\"{scope}\""));
    }
    format!("Bearer {}", params.join(", "))
}

/// The HTTP refusal for `failure` with its `challenge`.
pub fn refusal(failure: &Failure, challenge: String) -> DownstreamError {
    match failure {
        Failure::NoCredentials => DownstreamError::Unauthorized {
            challenge,
            reason: "this endpoint needs an Authorization: Bearer token".into(),
        },
        Failure::InvalidToken(why) => DownstreamError::Unauthorized {
            challenge,
            reason: format!("invalid token: {why}"),
        },
        Failure::InsufficientScope(needed) => DownstreamError::InsufficientScope {
            challenge,
            scopes: needed.join(" "),
        },
        Failure::InvalidRequest(why) => DownstreamError::AuthBadRequest {
            challenge,
            reason: why.clone(),
        },
        Failure::Unavailable(_) => DownstreamError::Unavailable(
            "cannot check tokens now: the authorization server's signing keys are unavailable",
        ),
    }
}
