//! `mode = "token_exchange"`: one principal's identity at one upstream, obtained by RFC 8693
//! token exchange of the host's validated inbound token (its latest) at the configured IdP, for
//! the upstream's `audience` and/or `resource`. The exchanged token is cached until shortly
//! before it expires, and never past the expiry of the inbound token it came from; it is
//! exchanged again then, or when the upstream refuses it. A refused exchange says which IdP
//! refused and its `error`; there is never a fallback to the inbound token itself.

use super::bearer::{Bearer, Refusal, Renewal, SignInNeeded};
use super::grant::{ClientRegistration, Grant, GrantKey};
use super::inbound::InboundTokens;
use super::oauth::{self, ClientAuth, OAuthError};
use super::token_cell::{now_unix, TokenCell};
use crate::config::TokenExchange;
use http::HeaderValue;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long an IdP's refusal of one inbound token is repeated without asking the IdP again
/// (a host retrying with the same token does not hammer it; a fixed IdP is asked again soon).
const REFUSAL_KEPT: Duration = Duration::from_secs(30);

/// One principal's exchanged identity at one upstream.
pub struct ExchangeBearer {
    key: GrantKey,
    config: TokenExchange,
    http: reqwest::Client,
    inbound: Arc<InboundTokens>,
    cell: TokenCell,
    /// One exchange at a time; the others wait for its token.
    renewing: tokio::sync::Mutex<()>,
    /// The IdP's last refusal: of which inbound token, when, and why.
    refused: Mutex<Option<(Arc<str>, Instant, SignInNeeded)>>,
}

impl ExchangeBearer {
    pub fn new(
        key: GrantKey,
        config: TokenExchange,
        http: reqwest::Client,
        inbound: Arc<InboundTokens>,
    ) -> Arc<ExchangeBearer> {
        Arc::new(ExchangeBearer {
            key,
            config,
            http,
            inbound,
            cell: TokenCell::default(),
            renewing: tokio::sync::Mutex::new(()),
            refused: Mutex::new(None),
        })
    }

    /// The configuration it exchanges with (a reload that changes it makes a new bearer).
    pub fn config(&self) -> &TokenExchange {
        &self.config
    }

    fn refusal(&self, why: String) -> SignInNeeded {
        SignInNeeded {
            reason: format!("upstream {:?}: {why}", self.key.upstream),
            by_person: false,
        }
    }

    /// [`Bearer::renew`] at `now` (unix seconds), holding the renewal lock.
    async fn renew_at(&self, refusal: Refusal<'_>, now: u64) -> Result<HeaderValue, SignInNeeded> {
        if refusal.status == Some(403) {
            return Err(self.refusal(
                "asks for more scope than the exchanged token has (set auth.scopes, and let the IdP grant them)"
                    .into(),
            ));
        }
        let refused = |header: &HeaderValue| refusal.stale.is_some_and(|stale| stale == header);
        if let Some(header) = self.cell.fresh(now).filter(|h| !refused(h)) {
            return Ok(header);
        }
        self.cell.clear();
        let inbound = self.inbound.latest(&self.key.principal, now).ok_or_else(|| {
            self.refusal(
                "no inbound token to exchange (the host's request carried no bearer token; an API key is never exchanged)"
                    .into(),
            )
        })?;
        if let Some((token, at, why)) = &*self.refused.lock() {
            if *token == inbound.token && at.elapsed() < REFUSAL_KEPT {
                return Err(why.clone());
            }
        }
        let mut grant = self.exchange(&inbound.token).await.inspect_err(|why| {
            *self.refused.lock() = Some((inbound.token.clone(), Instant::now(), why.clone()));
        })?;
        *self.refused.lock() = None;
        // Never used past the inbound token it was exchanged for.
        if let Some(cap) = inbound.expires_at {
            grant.expires_at = Some(grant.expires_at.map_or(cap, |at| at.min(cap)));
        }
        tracing::info!(
            upstream = %self.key.upstream,
            principal = %self.key.principal,
            expires_at = ?grant.expires_at,
            "token exchange: upstream token obtained"
        );
        self.cell.hold(&grant)
    }

    /// One RFC 8693 exchange of `subject_token` at the configured token endpoint.
    async fn exchange(&self, subject_token: &str) -> Result<Grant, SignInNeeded> {
        let config = &self.config;
        let secret = config.client_secret.as_ref().map(|s| s.expose().to_string());
        let (auth, method) = match secret {
            Some(_) => (ClientAuth::Basic, "client_secret_basic"),
            None => (ClientAuth::None, "none"),
        };
        let client = ClientRegistration {
            client_id: config.client_id.clone(),
            client_secret: secret,
            auth_method: method.to_string(),
            issuer: None,
        };
        let request = oauth::TokenExchange {
            audience: config.audience.clone(),
            resource: config.resource.clone(),
            scope: (!config.scopes.is_empty()).then(|| config.scopes.join(" ")),
            ..oauth::TokenExchange::of_access_token(subject_token.to_string())
        };
        let endpoint = &config.token_endpoint;
        oauth::token_exchange(&self.http, endpoint, &client, auth, &request)
            .await
            .map_err(|e| self.refusal(describe_failure(endpoint, &e)))
    }
}

/// Why an exchange at `endpoint` failed, naming the IdP's `error` when it gave one.
fn describe_failure(endpoint: &str, error: &OAuthError) -> String {
    match error {
        OAuthError::Refused {
            status,
            error,
            description,
            ..
        } => {
            let why = match (error, description) {
                (Some(error), Some(description)) => format!("{error} ({description})"),
                (Some(error), None) => error.clone(),
                (None, _) => format!("HTTP {status}"),
            };
            format!("token exchange refused by {endpoint}: {why}")
        }
        other => format!("token exchange at {endpoint} failed: {other}"),
    }
}

impl Bearer for ExchangeBearer {
    fn current(&self) -> Option<HeaderValue> {
        self.cell.fresh(now_unix())
    }

    fn renew<'a>(&'a self, refusal: Refusal<'a>) -> Renewal<'a> {
        Box::pin(async move {
            let _one = self.renewing.lock().await;
            self.renew_at(refusal, now_unix()).await
        })
    }

    fn grant_id(&self) -> Option<String> {
        self.cell.grant_id()
    }
}

#[cfg(test)]
#[path = "exchange_bearer_tests.rs"]
mod tests;
