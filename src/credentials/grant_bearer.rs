//! `mode = "oauth"`: one principal's grant at one upstream, read from the vault (where a
//! sign-in, through the gateway or `mcpmux login`, put it), refreshed before it expires, and
//! given up when the authorization server refuses the refresh (revoked): then the principal
//! must sign in again. A 403 `insufficient_scope` remembers the scope asked for, for the next
//! sign-in (step-up).

use super::bearer::{Bearer, Refusal, Renewal, SignInNeeded};
use super::grant::{Grant, GrantKey};
use super::oauth::{self, parse_www_authenticate, Challenge, OAuthError};
use super::token_cell::{now_unix, TokenCell};
use super::vault::Vault;
use http::HeaderValue;
use parking_lot::Mutex;
use std::sync::Arc;

/// One principal's identity at one OAuth upstream.
pub struct GrantBearer {
    key: GrantKey,
    vault: Vault,
    http: reqwest::Client,
    cell: TokenCell,
    renewing: tokio::sync::Mutex<()>,
    /// The challenge of the last refusal asking for more scope (the next sign-in asks for it).
    step_up: Mutex<Option<Challenge>>,
    /// Called after the grant was removed (revoked, refused): the upstream's supervisor and
    /// hosts learn a sign-in is needed.
    on_lost: Arc<dyn Fn(&GrantKey) + Send + Sync>,
}

impl GrantBearer {
    pub fn new(
        key: GrantKey,
        vault: Vault,
        http: reqwest::Client,
        on_lost: Arc<dyn Fn(&GrantKey) + Send + Sync>,
    ) -> Arc<GrantBearer> {
        Arc::new(GrantBearer {
            key,
            vault,
            http,
            cell: TokenCell::default(),
            renewing: tokio::sync::Mutex::new(()),
            step_up: Mutex::new(None),
            on_lost,
        })
    }

    /// The scope challenge a refusal left for the next sign-in, if any.
    pub fn step_up_challenge(&self) -> Option<Challenge> {
        self.step_up.lock().clone()
    }

    /// A new grant was stored (a sign-in finished): use it from the next request on.
    pub fn forget_held(&self) {
        self.cell.clear();
        *self.step_up.lock() = None;
    }

    fn sign_in(&self, why: &str) -> SignInNeeded {
        SignInNeeded {
            reason: format!("{why}: sign in to upstream {:?} again", self.key.upstream),
            by_person: true,
        }
    }

    async fn renew_locked(&self, refusal: Refusal<'_>) -> Result<HeaderValue, SignInNeeded> {
        let now = now_unix();
        let challenge = refusal.challenge.and_then(parse_www_authenticate);
        if refusal.status == Some(403) {
            // Only a person can grant more scope.
            let scope = challenge.as_ref().and_then(|c| c.scope.clone());
            *self.step_up.lock() = challenge.or(Some(Challenge::default()));
            return Err(SignInNeeded {
                reason: format!(
                    "upstream {:?} asks for more scope{}: sign in to it again to grant it",
                    self.key.upstream,
                    scope.map(|s| format!(" ({s})")).unwrap_or_default()
                ),
                by_person: true,
            });
        }
        let refused = |header: &HeaderValue| refusal.stale.is_some_and(|stale| stale == header);
        if let Some(header) = self.cell.fresh(now).filter(|h| !refused(h)) {
            return Ok(header);
        }
        // The vault may hold a newer grant than the one held (a sign-in through `mcpmux login`).
        let stored = self.vault.get(&self.key).await.map_err(|e| SignInNeeded {
            reason: format!("the vault: {e}"),
            by_person: false,
        })?;
        let Some(grant) = stored else {
            self.cell.clear();
            return Err(self.sign_in("no grant"));
        };
        let header = super::token_cell::header_of(&grant)?;
        let due = grant.expires_within(now, 0);
        if !refused(&header) && !due && refusal.status.is_none() {
            // Not refused: use it (renewed ahead of expiry on the next call when due).
            self.cell.hold(&grant)?;
            if let Some(fresh) = self.cell.fresh(now) {
                return Ok(fresh);
            }
        }
        if grant.refresh_token.is_none() {
            if !refused(&header) && !due {
                return self.cell.hold(&grant);
            }
            self.lose("the token expired or was refused and there is no refresh token")
                .await;
            return Err(self.sign_in("the token expired or was refused"));
        }
        match oauth::refresh(&self.http, &grant).await {
            Ok(fresh) => {
                if let Err(e) = self.vault.put(&self.key, &fresh).await {
                    tracing::warn!(upstream = %self.key.upstream, "the vault: {e}; the refreshed token is used but not kept");
                }
                tracing::info!(upstream = %self.key.upstream, principal = %self.key.principal, "upstream token refreshed");
                self.cell.hold(&fresh)
            }
            Err(OAuthError::Refused { status, .. }) if status < 500 => {
                self.lose("the authorization server refused the refresh (revoked or expired)")
                    .await;
                Err(self.sign_in("the authorization server refused to refresh the grant"))
            }
            Err(OAuthError::Invalid(why)) => {
                self.lose(&format!("the grant cannot be refreshed ({why})")).await;
                Err(self.sign_in("the grant cannot be refreshed"))
            }
            Err(other) => {
                // Unreachable or answering garbage: keep the grant, use the old token while it
                // lasts, and say why when it no longer does.
                match self.cell.unexpired(now).filter(|h| !refused(h)) {
                    Some(header) => Ok(header),
                    None => Err(SignInNeeded {
                        reason: format!(
                            "refreshing the grant for upstream {:?}: {other}",
                            self.key.upstream
                        ),
                        by_person: false,
                    }),
                }
            }
        }
    }

    /// The grant is no good any more: remove it, and say so.
    async fn lose(&self, why: &str) {
        self.cell.clear();
        match self.vault.remove(&self.key).await {
            Ok(_) => {
                tracing::warn!(upstream = %self.key.upstream, principal = %self.key.principal, "{why}: grant removed; a sign-in is needed")
            }
            Err(e) => {
                tracing::warn!(upstream = %self.key.upstream, "{why}; removing the grant from the vault failed: {e}")
            }
        }
        (self.on_lost)(&self.key);
    }
}

impl Bearer for GrantBearer {
    fn grant_id(&self) -> Option<String> {
        self.cell.grant_id()
    }

    fn current(&self) -> Option<HeaderValue> {
        self.cell.fresh(now_unix())
    }

    fn renew<'a>(&'a self, refusal: Refusal<'a>) -> Renewal<'a> {
        Box::pin(async move {
            let _one = self.renewing.lock().await;
            self.renew_locked(refusal).await
        })
    }
}

/// A grant's summary line for logs (never a token).
pub fn describe(grant: &Grant) -> String {
    let summary = grant.summary();
    format!(
        "grant {} (scope {:?})",
        summary.id,
        summary.scope.unwrap_or_default()
    )
}
