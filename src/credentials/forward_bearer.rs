//! `mode = "forward"`: the host's own validated bearer token, sent on to the upstream as
//! `Authorization: Bearer <token>` (token passthrough: an explicit opt-in the configuration
//! check warns about). The header is always the principal's latest inbound token; a refused
//! one is never retried unless the host has presented a newer one since.

use super::bearer::{Bearer, Refusal, Renewal, SignInNeeded};
use super::inbound::InboundTokens;
use super::token_cell::now_unix;
use http::HeaderValue;
use std::sync::Arc;

/// One principal's forwarded identity at one upstream.
pub struct ForwardBearer {
    upstream: String,
    principal: String,
    inbound: Arc<InboundTokens>,
}

impl ForwardBearer {
    pub fn new(upstream: &str, principal: &str, inbound: Arc<InboundTokens>) -> Arc<ForwardBearer> {
        Arc::new(ForwardBearer {
            upstream: upstream.to_string(),
            principal: principal.to_string(),
            inbound,
        })
    }

    /// The header of the principal's latest unexpired token at `now`.
    fn header_at(&self, now: u64) -> Result<Option<HeaderValue>, SignInNeeded> {
        let Some(inbound) = self.inbound.latest(&self.principal, now) else {
            return Ok(None);
        };
        let mut value = HeaderValue::from_str(&format!("Bearer {}", inbound.token))
            .map_err(|_| self.refused("the host's token is not a valid header value"))?;
        value.set_sensitive(true);
        Ok(Some(value))
    }

    fn refused(&self, why: &str) -> SignInNeeded {
        SignInNeeded {
            reason: format!("upstream {:?} (auth.mode = \"forward\"): {why}", self.upstream),
            by_person: false,
        }
    }

    fn renew_at(&self, refusal: Refusal<'_>, now: u64) -> Result<HeaderValue, SignInNeeded> {
        let header = self.header_at(now)?.ok_or_else(|| {
            self.refused("no inbound token to forward (the host's request carried no bearer token; an API key is never forwarded)")
        })?;
        if refusal.status.is_some() && refusal.stale == Some(&header) {
            return Err(self.refused("the upstream refused the host's own token"));
        }
        Ok(header)
    }
}

impl Bearer for ForwardBearer {
    fn current(&self) -> Option<HeaderValue> {
        self.header_at(now_unix()).ok().flatten()
    }

    fn renew<'a>(&'a self, refusal: Refusal<'a>) -> Renewal<'a> {
        Box::pin(async move { self.renew_at(refusal, now_unix()) })
    }

    fn grant_id(&self) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused_with(status: u16, stale: &HeaderValue) -> Refusal<'_> {
        Refusal {
            status: Some(status),
            challenge: None,
            stale: Some(stale),
        }
    }

    #[test]
    fn the_header_is_the_principals_latest_inbound_token() {
        let inbound = Arc::new(InboundTokens::default());
        let alice = ForwardBearer::new("jira", "alice@idp", inbound.clone());
        assert!(alice.current().is_none());
        let none = alice.renew_at(Refusal::NONE, 100).unwrap_err();
        assert!(!none.by_person);
        assert_eq!(
            none.reason,
            "upstream \"jira\" (auth.mode = \"forward\"): no inbound token to forward (the host's \
             request carried no bearer token; an API key is never forwarded)"
        );
        inbound.note("alice@idp", "alice-token-1", None, 100);
        inbound.note("bob@idp", "bob-token", None, 100);
        let header = alice.current().expect("alice's header");
        assert_eq!(header, "Bearer alice-token-1");
        assert!(header.is_sensitive());
        assert_eq!(alice.renew_at(Refusal::NONE, 100), Ok(header.clone()));
        assert_eq!(alice.grant_id(), None);
    }

    #[test]
    fn a_refused_token_is_renewed_only_by_a_newer_one() {
        let inbound = Arc::new(InboundTokens::default());
        let alice = ForwardBearer::new("jira", "alice@idp", inbound.clone());
        inbound.note("alice@idp", "alice-token-1", None, 100);
        let first = alice.current().expect("a header");
        let refused = alice.renew_at(refused_with(401, &first), 100).unwrap_err();
        assert_eq!(
            refused,
            SignInNeeded {
                reason:
                    "upstream \"jira\" (auth.mode = \"forward\"): the upstream refused the host's own token"
                        .into(),
                by_person: false,
            }
        );
        assert!(!refused.reason.contains("alice-token-1"));
        inbound.note("alice@idp", "alice-token-2", None, 101);
        let second = alice
            .renew_at(refused_with(401, &first), 101)
            .expect("the newer token");
        assert_eq!(second, "Bearer alice-token-2");
    }
}
