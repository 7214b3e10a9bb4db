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
    /// The grant's id (a digest, never the token).
    grant_id: String,
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
            grant_id: grant.summary().id,
        })));
        Ok(header)
    }

    /// The id of the grant held.
    pub fn grant_id(&self) -> Option<String> {
        self.0.load().as_ref().map(|h| h.grant_id.clone())
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

pub(super) use super::oauth::now_unix;

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(token_type: &str, obtained_at: u64, expires_at: Option<u64>) -> Grant {
        Grant {
            access_token: "tok-123".into(),
            token_type: token_type.into(),
            refresh_token: None,
            expires_at,
            scope: None,
            obtained_at,
            token_endpoint: None,
            resource: None,
            client: None,
        }
    }

    #[test]
    fn a_token_is_due_for_renewal_a_minute_or_a_fifth_of_its_life_before_it_expires() {
        let cell = TokenCell::default();
        // An hour-long token: due a minute before it expires.
        let header = cell.hold(&grant("bearer", 1000, Some(4600))).unwrap();
        assert_eq!(header, "Bearer tok-123");
        assert!(header.is_sensitive());
        assert!(cell.fresh(4539).is_some() && cell.fresh(4540).is_none());
        assert!(cell.unexpired(4599).is_some() && cell.unexpired(4600).is_none());
        // A ten-second token: due two seconds before.
        cell.hold(&grant("Bearer", 1000, Some(1010))).unwrap();
        assert!(cell.fresh(1007).is_some() && cell.fresh(1008).is_none());
        // No expiry: never due.
        cell.hold(&grant("Bearer", 1000, None)).unwrap();
        assert!(cell.fresh(u64::MAX).is_some());
        assert!(cell.grant_id().is_some_and(|id| !id.contains("tok-123")));
        cell.clear();
        assert!(cell.fresh(0).is_none() && cell.grant_id().is_none());
    }

    #[test]
    fn only_bearer_tokens_that_make_a_header_are_held() {
        let cell = TokenCell::default();
        let dpop = cell.hold(&grant("DPoP", 0, None)).unwrap_err();
        assert!(dpop.reason.contains("DPoP") && !dpop.by_person);
        let mut bad = grant("Bearer", 0, None);
        bad.access_token = "line\nbreak".into();
        let refused = cell.hold(&bad).unwrap_err();
        assert!(!refused.reason.contains("line"), "{}", refused.reason);
        assert!(cell.fresh(0).is_none());
    }
}
