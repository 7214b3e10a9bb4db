//! Outbound identity: how mcpmux signs in to the upstream servers behind it. Per upstream one
//! provider (the MCP OAuth client flow with one grant per principal, client credentials for
//! mcpmux itself, RFC 8693 token exchange of the host's validated token, or that token itself
//! forwarded) answers, for a principal, the header of the next request or "sign-in
//! needed" ([`bearer::Bearer`]); grants live sealed in the vault. `upstream/` asks for a header
//! and never knows which provider answered; `core/` turns "sign-in needed" into the host's
//! consent request, and the callback face in `http/` finishes the sign-in here.

pub mod bearer;
mod exchange_bearer;
mod forward_bearer;
pub mod grant;
mod grant_bearer;
mod inbound;
pub mod oauth;
mod probe;
mod service;
pub mod sign_in;
mod token_cell;
pub mod vault;

use crate::config::{Config, ServerConfig, TokenExchange, TransportConfig, UpstreamAuth};
use bearer::Bearer;
use exchange_bearer::ExchangeBearer;
use forward_bearer::ForwardBearer;
use grant::GrantKey;
use grant_bearer::GrantBearer;
use inbound::InboundTokens;
use parking_lot::Mutex;
use sign_in::{Finished, SignInError, SignInLink, SignIns, Start};
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use tokio::sync::watch;
use vault::Vault;

/// The principal of a gateway without `[auth]`: the one local user.
pub const LOCAL_PRINCIPAL: &str = "local";
/// The path of the OAuth redirect URI on the gateway's public origin.
pub const CALLBACK_PATH: &str = "/oauth/callback";
/// The path of mcpmux's Client ID Metadata Document there.
pub const CLIENT_METADATA_PATH: &str = "/oauth/client.json";

/// The outbound identities of a gateway (or of `mcpmux login`).
pub struct Credentials {
    http: reqwest::Client,
    vault: Option<Vault>,
    /// `scheme://host:port` of the gateway's public URL.
    origin: String,
    sign_ins: SignIns,
    /// One bearer per (principal, upstream), shared by its connections.
    grants: Mutex<HashMap<GrantKey, Weak<GrantBearer>>>,
    /// Bumped whenever a grant is stored or lost: supervisors waiting for a sign-in wake.
    changed: watch::Sender<u64>,
    /// When each identity's recent step-up sign-ins started (bounded: an upstream that keeps
    /// asking for more scope is not signed in to again and again).
    step_ups: Mutex<HashMap<GrantKey, Vec<std::time::Instant>>>,
    /// The identities whose grant the authorization server gave up on (revoked, refused), until
    /// they sign in again: a call failing for that asks for the sign-in itself.
    lost: Mutex<std::collections::HashSet<GrantKey>>,
    /// Each principal's latest validated inbound token (`token_exchange`, `forward`).
    inbound: Arc<InboundTokens>,
    /// One token-exchange identity per (principal, upstream), shared by its connections: the
    /// exchanged token's cache.
    exchanges: Mutex<HashMap<GrantKey, Weak<ExchangeBearer>>>,
}

/// The window in which at most [`oauth::MAX_STEP_UP_ATTEMPTS`] step-up sign-ins start.
const STEP_UP_WINDOW: std::time::Duration = std::time::Duration::from_secs(600);

impl Credentials {
    /// The identities `config` names; `vault` holds the grants (needed by `oauth` upstreams).
    pub fn new(config: &Config, vault: Option<Vault>) -> Arc<Credentials> {
        Arc::new(Credentials {
            // Building it fails only when the TLS backend cannot start, which no upstream
            // connection would survive either; the default client says so at its first use.
            http: oauth::http_client().unwrap_or_default(),
            vault,
            origin: origin_of(&config.gateway.public_url),
            sign_ins: SignIns::default(),
            grants: Mutex::default(),
            changed: watch::channel(0).0,
            step_ups: Mutex::default(),
            lost: Mutex::default(),
            inbound: Arc::default(),
            exchanges: Mutex::default(),
        })
    }

    /// The redirect URI: the callback on the gateway's public origin.
    pub fn redirect_uri(&self) -> String {
        format!("{}{CALLBACK_PATH}", self.origin)
    }

    /// mcpmux's Client ID Metadata Document URL, when an authorization server could fetch it
    /// (https, not a loopback host); else registration is dynamic.
    pub fn client_metadata_url(&self) -> Option<String> {
        let url = url::Url::parse(&self.origin).ok()?;
        let loopback = match url.host()? {
            url::Host::Domain(d) => d == "localhost",
            url::Host::Ipv4(ip) => ip.is_loopback(),
            url::Host::Ipv6(ip) => ip.is_loopback(),
        };
        (url.scheme() == "https" && !loopback).then(|| format!("{}{CLIENT_METADATA_PATH}", self.origin))
    }

    /// The Client ID Metadata Document served at [`CLIENT_METADATA_PATH`].
    pub fn client_metadata(&self) -> serde_json::Value {
        let url = format!("{}{CLIENT_METADATA_PATH}", self.origin);
        oauth::registration::cimd_document(&url, "mcpmux", &self.redirect_uri())
    }

    pub fn vault(&self) -> Option<&Vault> {
        self.vault.as_ref()
    }

    /// Bumped whenever a grant is stored or lost.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn note_change(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// The header source of `principal` at `server`, when its `auth` needs one.
    pub fn bearer(self: &Arc<Self>, server: &ServerConfig, principal: &str) -> Option<Arc<dyn Bearer>> {
        let TransportConfig::Http { url, .. } = &server.transport else {
            return None;
        };
        let url = url::Url::parse(url).ok()?;
        match &server.auth {
            UpstreamAuth::ClientCredentials(cc) => Some(service::ServiceBearer::new(
                &server.name,
                url,
                cc.clone(),
                self.http.clone(),
            )),
            UpstreamAuth::OAuth(_) => {
                let bearer: Arc<dyn Bearer> =
                    self.grant_bearer(&GrantKey::new(principal.to_string(), server.name.clone()))?;
                Some(bearer)
            }
            UpstreamAuth::TokenExchange(config) => {
                let key = GrantKey::new(principal.to_string(), server.name.clone());
                let bearer: Arc<dyn Bearer> = self.exchange_bearer(key, config);
                Some(bearer)
            }
            UpstreamAuth::Forward => Some(ForwardBearer::new(&server.name, principal, self.inbound.clone())),
            UpstreamAuth::Headers => None,
        }
    }

    /// `principal` (a grant key's principal) presented `token`, validated by `[auth]` and
    /// expiring at `expires_at` (unix seconds): the one its `token_exchange` upstreams exchange
    /// and its `forward` upstreams send from now on. Kept in memory only; never logged.
    pub fn note_inbound(&self, principal: &str, token: &str, expires_at: Option<u64>) {
        self.inbound.note(principal, token, expires_at, oauth::now_unix());
    }

    /// The one token-exchange identity of `key` (made on first use, and again when the
    /// upstream's `auth` changed).
    fn exchange_bearer(&self, key: GrantKey, config: &TokenExchange) -> Arc<ExchangeBearer> {
        let mut exchanges = self.exchanges.lock();
        let held = exchanges.get(&key).and_then(Weak::upgrade);
        if let Some(bearer) = held.filter(|b| b.config() == config) {
            return bearer;
        }
        exchanges.retain(|_, b| b.strong_count() > 0);
        let bearer = ExchangeBearer::new(
            key.clone(),
            config.clone(),
            self.http.clone(),
            self.inbound.clone(),
        );
        exchanges.insert(key, Arc::downgrade(&bearer));
        bearer
    }

    /// The one bearer of `key` (made on first use).
    fn grant_bearer(self: &Arc<Self>, key: &GrantKey) -> Option<Arc<GrantBearer>> {
        let vault = self.vault.clone()?;
        let mut grants = self.grants.lock();
        if let Some(bearer) = grants.get(key).and_then(Weak::upgrade) {
            return Some(bearer);
        }
        grants.retain(|_, b| b.strong_count() > 0);
        let me = Arc::downgrade(self);
        let on_lost = Arc::new(move |key: &GrantKey| {
            if let Some(me) = me.upgrade() {
                me.lost.lock().insert(key.clone());
                me.note_change();
            }
        });
        let bearer = GrantBearer::new(key.clone(), vault, self.http.clone(), on_lost);
        grants.insert(key.clone(), Arc::downgrade(&bearer));
        Some(bearer)
    }

    /// Whether `principal` holds a grant for `upstream` (a vault that cannot be read: no).
    pub async fn has_grant(&self, upstream: &str, principal: &str) -> bool {
        let Some(vault) = &self.vault else { return false };
        let key = GrantKey::new(principal.to_string(), upstream.to_string());
        match vault.get(&key).await {
            Ok(grant) => grant.is_some(),
            Err(e) => {
                tracing::warn!(upstream, "the vault: {e}");
                false
            }
        }
    }

    /// Whether `principal` is signed in to `upstream`: it holds a grant the upstream did not ask
    /// more scope of.
    pub async fn signed_in(&self, upstream: &str, principal: &str) -> bool {
        !self.step_up_pending(upstream, principal) && self.has_grant(upstream, principal).await
    }

    /// How many principals hold a grant for `upstream` (a vault that cannot be read: none).
    pub async fn grant_count(&self, upstream: &str) -> u64 {
        let Some(vault) = &self.vault else { return 0 };
        match vault.list().await {
            Ok(grants) => grants.iter().filter(|(key, _)| key.upstream == upstream).count() as u64,
            Err(e) => {
                tracing::warn!(upstream, "the vault: {e}");
                0
            }
        }
    }

    /// Start signing `principal` in to `server` (an `oauth` upstream): the link to open.
    pub async fn start_sign_in(
        self: &Arc<Self>,
        server: &ServerConfig,
        principal: &str,
        session: Option<String>,
    ) -> Result<SignInLink, SignInError> {
        let (UpstreamAuth::OAuth(config), TransportConfig::Http { url, .. }) =
            (&server.auth, &server.transport)
        else {
            return Err(SignInError::Start(format!(
                "upstream {:?} has no auth.mode = \"oauth\"",
                server.name
            )));
        };
        let vault =
            (self.vault.as_ref()).ok_or_else(|| SignInError::Vault("no vault is configured".into()))?;
        let url = url::Url::parse(url).map_err(|e| SignInError::Start(format!("upstream url: {e}")))?;
        let key = GrantKey::new(principal.to_string(), server.name.clone());
        // A refusal that asked for more scope: the new sign-in asks for it too.
        let step_up = match self.grant_bearer(&key).and_then(|b| b.step_up_challenge()) {
            Some(challenge) => {
                self.count_step_up(&key)?;
                let granted = vault.get(&key).await.ok().flatten().and_then(|g| g.scope);
                Some((challenge, granted))
            }
            None => None,
        };
        let redirect_uri = self.redirect_uri();
        let cimd_url = config
            .client_metadata_url
            .clone()
            .or_else(|| self.client_metadata_url());
        self.sign_ins
            .start(Start {
                http: &self.http,
                vault,
                upstream: &server.name,
                url: &url,
                config,
                principal,
                redirect_uri: &redirect_uri,
                cimd_url: cimd_url.as_deref(),
                step_up,
                session,
            })
            .await
    }

    /// Note one more step-up sign-in of `key`, or refuse it when the upstream asked for more
    /// scope too often lately (a server whose refusals no grant satisfies).
    fn count_step_up(&self, key: &GrantKey) -> Result<(), SignInError> {
        let mut all = self.step_ups.lock();
        all.retain(|_, started| {
            started.retain(|at| at.elapsed() < STEP_UP_WINDOW);
            !started.is_empty()
        });
        let started = all.entry(key.clone()).or_default();
        if started.len() >= oauth::MAX_STEP_UP_ATTEMPTS as usize {
            return Err(SignInError::Start(format!(
                "upstream {:?} still refuses for want of scope after {} sign-ins asking for more: not \
                 asking again for {} minutes (check the scopes its server needs and what the \
                 authorization server grants)",
                key.upstream,
                started.len() + 1,
                STEP_UP_WINDOW.as_secs() / 60
            )));
        }
        started.push(std::time::Instant::now());
        Ok(())
    }

    /// Whether `principal` must sign in to `upstream` before using it: no grant, or the
    /// upstream asked for more scope than the grant holds.
    pub async fn needs_sign_in(&self, upstream: &str, principal: &str) -> bool {
        !self.has_grant(upstream, principal).await || self.step_up_pending(upstream, principal)
    }

    /// The authorization server sent the browser back: finish the sign-in `state` started.
    pub async fn finish_sign_in(
        &self,
        state: &str,
        outcome: Result<&str, String>,
    ) -> Result<Finished, SignInError> {
        let vault =
            (self.vault.as_ref()).ok_or_else(|| SignInError::Vault("no vault is configured".into()))?;
        let finished = self.sign_ins.finish(&self.http, vault, state, outcome).await?;
        self.lost.lock().remove(&finished.key);
        if let Some(bearer) = self.grants.lock().get(&finished.key).and_then(Weak::upgrade) {
            bearer.forget_held();
        }
        self.note_change();
        Ok(finished)
    }

    /// Whether `upstream` asked `principal` for more scope than its grant holds (the next call
    /// signs in again first).
    pub fn step_up_pending(&self, upstream: &str, principal: &str) -> bool {
        let key = GrantKey::new(principal.to_string(), upstream.to_string());
        let bearer = self.grants.lock().get(&key).and_then(Weak::upgrade);
        bearer.is_some_and(|b| b.step_up_challenge().is_some())
    }

    /// Whether `principal`'s grant for `upstream` was given up on (revoked or refused) since
    /// its last sign-in.
    pub fn grant_lost(&self, upstream: &str, principal: &str) -> bool {
        let key = GrantKey::new(principal.to_string(), upstream.to_string());
        self.lost.lock().contains(&key)
    }

    /// The sign-ins waiting for their callback.
    pub fn waiting_sign_ins(&self) -> Vec<sign_in::Waiting> {
        self.sign_ins.waiting()
    }
}

/// `scheme://host[:port]` of a URL (the URL itself when it does not parse).
fn origin_of(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => u.origin().ascii_serialization(),
        Err(_) => url.trim_end_matches('/').to_string(),
    }
}
