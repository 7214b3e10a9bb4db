//! A URL that may carry a password (`redis://:pw@host/0`, `redis+unix:///s.sock?pass=pw`): kept
//! whole for the one client that connects with it, shown everywhere else (errors, logs,
//! `/status`, `Debug`) with the password replaced by `***`.

use std::fmt;

/// A URL whose password is never shown.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretUrl(String);

/// What stands for a hidden password.
pub const HIDDEN: &str = "***";

impl SecretUrl {
    pub fn new(url: impl Into<String>) -> SecretUrl {
        SecretUrl(url.into())
    }

    /// The URL as written, password included: for connecting only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The URL with its password (the userinfo's, and a `pass`/`password` query parameter's)
    /// replaced by `***`; a URL that does not parse shows only that it is one.
    pub fn redacted(&self) -> String {
        redact(&self.0)
    }
}

impl fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.redacted())
    }
}

impl fmt::Display for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

fn redact(text: &str) -> String {
    let Ok(mut url) = url::Url::parse(text) else {
        return "(a URL that does not parse)".into();
    };
    if url.password().is_some() {
        // Only URLs with a host have a password; setting one there cannot fail.
        let _ = url.set_password(Some(HIDDEN));
    }
    if url.query().is_some() {
        let pairs: Vec<(String, String)> = (url.query_pairs())
            .map(|(k, v)| {
                let hide = matches!(k.to_ascii_lowercase().as_str(), "pass" | "password");
                (k.into_owned(), if hide { HIDDEN.into() } else { v.into_owned() })
            })
            .collect();
        url.query_pairs_mut().clear().extend_pairs(pairs);
    }
    url.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show_and_the_rest_does() {
        let cases = [
            ("redis://:s3cret@10.0.0.5:6379/0", "redis://:***@10.0.0.5:6379/0"),
            (
                "rediss://app:s3cret@cache:6380/2",
                "rediss://app:***@cache:6380/2",
            ),
            ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
            (
                "redis+unix:///run/r.sock?db=1&pass=s3cret",
                "redis+unix:///run/r.sock?db=1&pass=***",
            ),
            (
                "unix:///run/r.sock?password=s3cret",
                "unix:///run/r.sock?password=***",
            ),
            ("not a url s3cret", "(a URL that does not parse)"),
        ];
        for (url, shown) in cases {
            let secret = SecretUrl::new(url);
            assert_eq!(secret.redacted(), shown);
            assert_eq!(secret.to_string(), shown);
            assert!(!format!("{secret:?}").contains("s3cret"));
            assert_eq!(secret.expose(), url);
        }
    }
}
