//! What can go wrong talking OAuth, naming the endpoint and, when the authorization server
//! answered with an OAuth error, its `error` and `error_description`. Never a token or secret.

use std::fmt;

/// The most characters of an AS's `error_description` repeated in an error.
const DESCRIPTION_CHARS: usize = 300;

/// A failed OAuth step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OAuthError {
    /// The request did not complete (connect, TLS, timeout, a body over the size bound).
    Transport { endpoint: String, reason: String },
    /// The endpoint answered with an error status (and, for an AS, usually an OAuth error body).
    Refused {
        endpoint: String,
        status: u16,
        error: Option<String>,
        description: Option<String>,
    },
    /// The endpoint answered 2xx with something that is not what the spec says it returns.
    Malformed { endpoint: String, reason: String },
    /// Discovery found no usable metadata, or metadata that does not fit the server.
    Discovery(String),
    /// The protected resource metadata names another resource than the server asked.
    ResourceMismatch { server: String, resource: String },
    /// A caller-supplied value (URL, key) is unusable.
    Invalid(String),
}

impl OAuthError {
    /// The AS's OAuth `error` code, when it gave one (`invalid_grant` on a refused refresh
    /// means: ask the user again).
    pub fn oauth_error(&self) -> Option<&str> {
        match self {
            OAuthError::Refused { error, .. } => error.as_deref(),
            _ => None,
        }
    }

    /// An error answer of `endpoint`: `status` and the OAuth error fields of `body` if it is one.
    pub(crate) fn refused(endpoint: &str, status: u16, body: &[u8]) -> Self {
        let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
        let field = |name: &str| {
            parsed
                .as_ref()
                .and_then(|v| v.get(name))
                .and_then(|v| v.as_str())
                .map(clean)
        };
        OAuthError::Refused {
            endpoint: endpoint.to_string(),
            status,
            error: field("error"),
            description: field("error_description"),
        }
    }
}

/// Text from a remote server made safe to print: control characters dropped, length bounded.
pub(crate) fn clean(text: &str) -> String {
    let mut out: String = text
        .chars()
        .filter(|c| !c.is_control())
        .take(DESCRIPTION_CHARS)
        .collect();
    if text
        .chars()
        .filter(|c| !c.is_control())
        .nth(DESCRIPTION_CHARS)
        .is_some()
    {
        out.push('…');
    }
    out
}

impl fmt::Display for OAuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OAuthError::Transport { endpoint, reason } => write!(f, "{endpoint}: {reason}"),
            OAuthError::Refused { endpoint, status, error, description } => {
                write!(f, "{endpoint} answered HTTP {status}")?;
                if let Some(error) = error {
                    write!(f, ": {error}")?;
                }
                if let Some(description) = description {
                    write!(f, " ({description})")?;
                }
                Ok(())
            }
            OAuthError::Malformed { endpoint, reason } => write!(f, "{endpoint}: {reason}"),
            OAuthError::Discovery(reason) => write!(f, "authorization discovery: {reason}"),
            OAuthError::ResourceMismatch { server, resource } => write!(
                f,
                "the protected resource metadata of {server} names another resource ({resource}); not signing in"
            ),
            OAuthError::Invalid(reason) => f.write_str(reason),
        }
    }
}

impl std::error::Error for OAuthError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_as_error_body_is_named_with_its_endpoint() {
        let err = OAuthError::refused(
            "https://as.example/token",
            400,
            br#"{"error":"invalid_grant","error_description":"refresh token revoked\n"}"#,
        );
        assert_eq!(err.oauth_error(), Some("invalid_grant"));
        assert_eq!(
            err.to_string(),
            "https://as.example/token answered HTTP 400: invalid_grant (refresh token revoked)"
        );
        let plain = OAuthError::refused("https://as.example/token", 502, b"<html>bad gateway</html>");
        assert_eq!(plain.to_string(), "https://as.example/token answered HTTP 502");
    }

    #[test]
    fn a_long_description_is_clipped() {
        let long = "x".repeat(5000);
        let cleaned = clean(&long);
        assert_eq!(cleaned.chars().count(), DESCRIPTION_CHARS + 1);
    }
}
