//! Signing a principal in to an OAuth upstream: the authorization URL with its PKCE pair and
//! `state` (bound to the principal, the upstream and, when a host asked in-band, its session),
//! kept here until the authorization server sends the browser back to the callback; then the
//! code is redeemed and the grant sealed into the vault. Bounded: few sign-ins wait at once, and
//! each only so long.

use super::grant::{ClientRegistration, GrantKey};
use super::oauth::{self, Challenge, Discovery, Pkce, Registration};
use super::vault::Vault;
use crate::config::OAuthClient;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::Duration;

/// How long a sign-in waits for its callback.
pub const SIGN_IN_TTL: Duration = Duration::from_secs(600);
/// At most this many sign-ins wait at once.
const MAX_PENDING: usize = 1024;

/// A sign-in started: where the person goes.
#[derive(Clone, Debug)]
pub struct SignInLink {
    pub url: String,
    /// The `state` (also the in-band elicitation's id).
    pub state: String,
}

/// A sign-in waiting for its callback (shared sealed through a `[cluster] store`).
#[derive(serde::Serialize, serde::Deserialize)]
struct Pending {
    key: GrantKey,
    discovery: Discovery,
    client: ClientRegistration,
    verifier: String,
    scope: Option<String>,
    redirect_uri: String,
    /// The host session that asked in-band, if one did (who is told when it completes).
    session: Option<String>,
    /// When it started (Unix seconds: a replica that did not start it reads it too).
    started: u64,
    /// The link the person opens.
    url: String,
}

/// A sign-in waiting for its callback, as it may be shown (the admin's `GET /grants`).
#[derive(Clone, Debug)]
pub struct Waiting {
    pub key: GrantKey,
    pub url: String,
    pub for_secs: u64,
}

/// Why a sign-in could not start or finish (said to the person; never a token).
#[derive(Debug, Clone, thiserror::Error)]
pub enum SignInError {
    #[error("{0}")]
    Start(String),
    #[error("this sign-in link is unknown or expired (each link works once, for {} minutes): start the sign-in again", SIGN_IN_TTL.as_secs() / 60)]
    UnknownState,
    #[error("the authorization server refused: {0}")]
    Denied(String),
    #[error("redeeming the authorization code failed: {0}")]
    Exchange(String),
    #[error("too many sign-ins are waiting; try again in a few minutes")]
    Busy,
    #[error("the vault: {0}")]
    Vault(String),
}

/// What a finished sign-in did.
#[derive(Clone, Debug)]
pub struct Finished {
    pub key: GrantKey,
    pub session: Option<String>,
    pub state: String,
}

/// The sign-ins waiting for their callbacks.
#[derive(Default)]
pub struct SignIns {
    pending: Mutex<HashMap<String, Pending>>,
}

/// What a sign-in needs to know of the gateway.
pub struct Start<'a> {
    pub http: &'a reqwest::Client,
    pub vault: &'a Vault,
    pub upstream: &'a str,
    pub url: &'a url::Url,
    pub config: &'a OAuthClient,
    pub principal: &'a str,
    pub redirect_uri: &'a str,
    /// mcpmux's Client ID Metadata Document URL, when the AS can fetch it.
    pub cimd_url: Option<&'a str>,
    /// The scope challenge of a refusal asking for more (step-up), with what was granted.
    pub step_up: Option<(Challenge, Option<String>)>,
    pub session: Option<String>,
}

impl SignIns {
    /// Start a sign-in: discovery, the client registration (kept in the vault when dynamic),
    /// PKCE and state; the URL to send the person to.
    pub async fn start(&self, s: Start<'_>) -> Result<SignInLink, SignInError> {
        let fail = |e: oauth::OAuthError| SignInError::Start(format!("upstream {:?}: {e}", s.upstream));
        let challenge = match &s.step_up {
            Some((challenge, _)) => Some(challenge.clone()),
            None => super::probe::challenge_of(s.http, s.url).await,
        };
        let discovery = oauth::discover(s.http, s.url, challenge.as_ref())
            .await
            .map_err(fail)?;
        let client = self.client(&s, &discovery).await?;
        let scope = match &s.step_up {
            Some((challenge, granted)) => oauth::step_up_scope(granted.as_deref(), challenge)
                .or_else(|| oauth::choose_scope(Some(challenge), &discovery, &s.config.scopes)),
            None => oauth::choose_scope(challenge.as_ref(), &discovery, &s.config.scopes),
        };
        let pkce = Pkce::new();
        let state = oauth::random_state();
        let url = oauth::authorization_url(
            &discovery,
            &client,
            s.redirect_uri,
            scope.as_deref(),
            &state,
            &pkce,
        )
        .map_err(fail)?;
        let waiting = Pending {
            key: GrantKey::new(s.principal.to_string(), s.upstream.to_string()),
            discovery,
            client,
            verifier: pkce.verifier,
            scope,
            redirect_uri: s.redirect_uri.to_string(),
            session: s.session,
            started: oauth::now_unix(),
            url: url.to_string(),
        };
        {
            let mut pending = self.pending.lock();
            pending.retain(|_, p| alive(p));
            if pending.len() >= MAX_PENDING {
                return Err(SignInError::Busy);
            }
        }
        // Behind a balancer the callback may reach another replica: it finds the sign-in there.
        if let Err(e) = s.vault.share_sign_in(&state, &waiting, SIGN_IN_TTL).await {
            tracing::warn!(upstream = %s.upstream, "the sign-in is not shared with other replicas: {e}");
        }
        self.pending.lock().insert(state.clone(), waiting);
        Ok(SignInLink {
            url: url.to_string(),
            state,
        })
    }

    /// The client to sign in with: the configured one, else one registered before at this
    /// authorization server (kept in the vault), else a new registration (CIMD or RFC 7591).
    async fn client(&self, s: &Start<'_>, d: &Discovery) -> Result<ClientRegistration, SignInError> {
        let fail = |e: oauth::OAuthError| {
            SignInError::Start(format!("upstream {:?}: registering mcpmux: {e}", s.upstream))
        };
        if let Some(client_id) = &s.config.client_id {
            let how = Registration::PreRegistered {
                client_id: client_id.clone(),
                client_secret: s.config.client_secret.as_ref().map(|v| v.expose().to_string()),
            };
            return oauth::register(s.http, d, how).await.map_err(fail);
        }
        let known = s
            .vault
            .registration(s.upstream, &d.issuer)
            .await
            .map_err(|e| SignInError::Vault(e.to_string()))?;
        if let Some(client) = known {
            return Ok(client);
        }
        let how = Registration::Metadata {
            cimd_url: s.cimd_url.map(str::to_string),
            redirect_uri: s.redirect_uri.to_string(),
            client_name: "mcpmux".to_string(),
        };
        let client = oauth::register(s.http, d, how).await.map_err(fail)?;
        if Some(client.client_id.as_str()) != s.cimd_url {
            if let Err(e) = s.vault.put_registration(s.upstream, &client).await {
                tracing::warn!(upstream = %s.upstream, "the vault: {e}; the client registration is not kept");
            }
        }
        Ok(client)
    }

    /// The callback: redeem `code` for the sign-in `state` started, and seal the grant.
    pub async fn finish(
        &self,
        http: &reqwest::Client,
        vault: &Vault,
        state: &str,
        outcome: Result<&str, String>,
    ) -> Result<Finished, SignInError> {
        let here = self.pending.lock().remove(state);
        // Taken from the store too, whoever started it: each link works once on every replica.
        let shared: Option<Pending> = match vault.take_shared_sign_in(state).await {
            Ok(shared) => shared,
            Err(e) => {
                tracing::warn!("a sign-in shared by another replica could not be read: {e}");
                None
            }
        };
        let pending = here.or(shared).filter(alive).ok_or(SignInError::UnknownState)?;
        let code = outcome.map_err(SignInError::Denied)?;
        let grant = oauth::exchange_code(
            http,
            &pending.discovery,
            &pending.client,
            code,
            &pending.redirect_uri,
            &pending.verifier,
            pending.scope.as_deref(),
        )
        .await
        .map_err(|e| SignInError::Exchange(e.to_string()))?;
        vault
            .put(&pending.key, &grant)
            .await
            .map_err(|e| SignInError::Vault(e.to_string()))?;
        tracing::info!(
            upstream = %pending.key.upstream,
            principal = %pending.key.principal,
            "signed in: {}",
            super::grant_bearer::describe(&grant)
        );
        Ok(Finished {
            key: pending.key,
            session: pending.session,
            state: state.to_string(),
        })
    }

    /// The sign-ins waiting for their callback (their links are listed by `GET /grants`).
    pub fn waiting(&self) -> Vec<Waiting> {
        let all = self.pending.lock();
        all.values()
            .filter(|p| alive(p))
            .map(|p| Waiting {
                key: p.key.clone(),
                url: p.url.clone(),
                for_secs: oauth::now_unix().saturating_sub(p.started),
            })
            .collect()
    }
}

/// Whether a sign-in still waits (started less than [`SIGN_IN_TTL`] ago).
fn alive(p: &Pending) -> bool {
    oauth::now_unix().saturating_sub(p.started) < SIGN_IN_TTL.as_secs()
}
