//! The token an identity holds right now, as the `Authorization` header it makes: read by every
//! request without a lock, replaced when a renewal brings a new one.

use super::bearer::SignInNeeded;
use super::grant::Grant;
use arc_swap::ArcSwapOption;
use http::HeaderValue;
use std::sync::Arc;

/// Renew this long before expiry at most (a short-lived token renews at a fifth of its life).
const REFRESH_MARGIN_SECS: u64 = 60;

/// The current header and when its token expires.
struct Held {
    header: HeaderValue,
    expires_at: Option<u64>,
    /// When it counts as due for renewal (before its expiry).
    renew_at: Option<u64>,
}

#[derive(Default)]
pub(super) struct TokenCell(ArcSwapOption<Held>);

impl TokenCell {
    /// The header while its token is not due for renewal.
    pub fn fresh(&self, now: u64) -> Option<HeaderValue> {
        let held = self.0.load();
        let held = held.as_ref()?;
        match held.renew_at {
            Some(due) if now >= due => None,
            _ => Some(held.header.clone()),
        }
    }

    /// The header even if due for renewal, until it has expired.
    pub fn unexpired(&self, now: u64) -> Option<HeaderValue> {
        let held = self.0.load();
        let held = held.as_ref()?;
        match held.expires_at {
            Some(at) if now >= at => None,
            _ => Some(held.header.clone()),
        }
    }

    /// Hold `grant`'s token from now on; its header.
    pub fn hold(&self, grant: &Grant) -> Result<HeaderValue, SignInNeeded> {
        let header = header_of(grant)?;
        let renew_at = grant.expires_at.map(|at| {
            let life = at.saturating_sub(grant.obtained_at);
            at.saturating_sub(REFRESH_MARGIN_SECS.min(life / 5))
        });
        self.0.store(Some(Arc::new(Held {
            header: header.clone(),
            expires_at: grant.expires_at,
            renew_at,
        })));
        Ok(header)
    }

    pub fn clear(&self) {
        self.0.store(None);
    }
}

/// `Authorization: Bearer <token>` for a grant (a token that cannot be a header value is the
/// authorization server's fault, said without the token).
pub(super) fn header_of(grant: &Grant) -> Result<HeaderValue, SignInNeeded> {
    let scheme = match grant.token_type.to_ascii_lowercase().as_str() {
        // RFC 6750: the scheme is "Bearer" whatever case the token type came in.
        "" | "bearer" => "Bearer",
        _ => {
            return Err(SignInNeeded {
                reason: format!(
                    "the authorization server issued a {:?} token; mcpmux sends only Bearer tokens",
                    grant.token_type
                ),
                by_person: false,
            })
        }
    };
    let mut value =
        HeaderValue::from_str(&format!("{scheme} {}", grant.access_token)).map_err(|_| SignInNeeded {
            reason: "the authorization server issued a token that is not a valid header value".into(),
            by_person: false,
        })?;
    value.set_sensitive(true);
    Ok(value)
}

/// Unix seconds now.
pub(super) fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
