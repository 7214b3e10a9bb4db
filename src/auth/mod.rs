//! Authentication of hosts (the gateway as an OAuth 2.1 resource server): who a request's
//! bearer credential names ([`Principal`]), checked against API keys or JWT access tokens, or
//! the client certificate its connection presented (`certificate`).
//!
//! The [`layer::AuthLayer`] wraps every host face; [`metadata`] serves the protected resource
//! metadata (RFC 9728); [`challenge`] writes the `WWW-Authenticate` answers. Both read the
//! [`AuthInForce`] per request: a reload that changes `[auth]` applies to the next request.

pub mod api_key;
pub mod certificate;
pub mod challenge;
pub mod inbound_token;
pub mod introspection;
pub mod jwks;
pub mod jwt;
pub mod layer;
pub mod metadata;

use crate::config::{AuthConfig, Config};
use arc_swap::ArcSwapOption;
use challenge::Failure;
pub use inbound_token::InboundToken;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Who sent a request, as its credential established it (serialisable: a replica that forwards
/// a request passes it on in a sealed passport, `cluster::passport`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Principal {
    /// The JWT `sub`, or the API key's `name`.
    pub name: String,
    /// The token's issuer; `None` for an API key.
    pub issuer: Option<String>,
    /// The OAuth client the token was issued to (`client_id`, else `azp`).
    pub client_id: Option<String>,
    pub groups: Vec<String>,
    /// Granted scopes.
    pub scopes: Vec<String>,
    /// The validated bearer token itself (a JWT or an introspected opaque token), for an
    /// upstream that exchanges or forwards it; `None` for an API key, which never leaves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<InboundToken>,
    /// The token's claims that are a string or an array of strings (what a profile's
    /// `match = { claim = ... }` looks at), bounded; empty for an API key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<(String, Vec<String>)>,
    /// What established it (missing in a passport from a replica that predates it:
    /// `cluster::passport` reads those).
    #[serde(default = "Credential::unstated")]
    pub credential: Credential,
    /// The subject of the client certificate its connection presented and the listener
    /// verified (`gateway.tls.client_ca`), beside any other credential (audited with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
}

impl Credential {
    /// What a principal that does not say is taken for until its reader knows better.
    fn unstated() -> Credential {
        Credential::Token
    }
}

/// The kind of credential a [`Principal`] authenticated with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Credential {
    /// A JWT or an introspected token (`issuer` names its issuer).
    Token,
    /// An `[[auth.api_keys]]` key (`name` is the key's).
    ApiKey,
    /// A client certificate alone (`name` is `cert:<subject>`).
    Certificate,
}

impl Principal {
    /// The values of claim `claim` (a string claim's one value, an array claim's strings); an
    /// API key's groups are its `groups` claim.
    pub fn claim_values(&self, claim: &str) -> Vec<&str> {
        if self.credential == Credential::ApiKey && claim == "groups" {
            return self.groups.iter().map(String::as_str).collect();
        }
        (self.claims.iter())
            .find(|(name, _)| name == claim)
            .map(|(_, values)| values.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// Who owns what this principal opens (a session): kind, issuer and name together, so the
    /// same `sub` at two issuers, or an API key named like a subject, are different owners.
    pub fn owner(&self) -> String {
        match (self.credential, &self.issuer) {
            (Credential::Certificate, _) => format!("cert\u{0}{}", self.name),
            (_, Some(issuer)) => format!("jwt\u{0}{issuer}\u{0}{}", self.name),
            (_, None) => format!("key\u{0}{}", self.name),
        }
    }

    /// The name its upstream grants are kept under and `mcpmux logout --principal` takes:
    /// `{sub}@{issuer}` for a token, `key:{name}` for an API key, `cert:{subject}` for a client
    /// certificate (readable, and distinct for the same `sub` at two issuers).
    pub fn grant_principal(&self) -> String {
        match (self.credential, &self.issuer) {
            (Credential::Certificate, _) => self.name.clone(),
            (_, Some(issuer)) => format!("{}@{issuer}", self.name),
            (_, None) => format!("key:{}", self.name),
        }
    }

    /// The scopes of `needed` this principal lacks (none of its scopes covers them, a broader
    /// scope covering the narrower ones below it: `util::scope`).
    pub fn missing<'a>(&self, needed: impl IntoIterator<Item = &'a String>) -> Vec<String> {
        crate::util::scope::lacking(&self.scopes, needed)
    }
}

impl crate::policy::Viewer for Principal {
    fn facts(&self) -> crate::policy::PrincipalFacts<'_> {
        crate::policy::PrincipalFacts::new(
            &self.name,
            self.groups.iter().map(String::as_str),
            self.scopes.iter().map(String::as_str),
        )
    }

    fn api_key(&self) -> Option<&str> {
        (self.credential == Credential::ApiKey).then_some(self.name.as_str())
    }

    fn grant_principal(&self) -> Option<String> {
        Some(Principal::grant_principal(self))
    }
}

/// The [`Authenticator`] in force: `None` while there is no `[auth]` (nobody is authenticated).
/// A reload that changes `[auth]` replaces it whole (verifier, JWKS cache, introspection client);
/// a request reads the one in force when it arrives.
#[derive(Default)]
pub struct AuthInForce(ArcSwapOption<Authenticator>);

impl AuthInForce {
    pub fn new(authenticator: Option<Arc<Authenticator>>) -> AuthInForce {
        AuthInForce(ArcSwapOption::new(authenticator))
    }

    /// The one in force (held: a request keeps it to its end).
    pub fn current(&self) -> Option<Arc<Authenticator>> {
        self.0.load_full()
    }

    /// Whether requests are authenticated now.
    pub fn is_on(&self) -> bool {
        self.0.load().is_some()
    }

    /// Put `authenticator` in force for the next request.
    pub fn replace(&self, authenticator: Option<Arc<Authenticator>>) {
        self.0.store(authenticator);
    }
}

/// Checks credentials for one configuration.
pub struct Authenticator {
    config: AuthConfig,
    /// The protected resource metadata URL put in challenges.
    metadata_url: String,
    /// `gateway.public_url`: the resource the metadata document names.
    public_url: String,
    jwt: Option<jwt::JwtVerifier>,
    introspection: Option<introspection::Introspector>,
    /// The principal of each `[[auth.api_keys]]`, in their order, made once: a request with a
    /// key shares it.
    key_principals: Vec<Arc<Principal>>,
}

impl Authenticator {
    /// The authenticator of `config`, or `None` when it has no `[auth]`.
    pub fn from_config(config: &Config) -> Option<Arc<Authenticator>> {
        let auth = config.auth.clone()?;
        let jwt = auth.issuer.as_ref().map(|issuer| {
            jwt::JwtVerifier::new(
                issuer.clone(),
                auth.jwks_uri.clone(),
                auth.audience.clone(),
                auth.groups_claim.clone(),
            )
        });
        let introspection = auth.introspection.clone().map(|config| {
            introspection::Introspector::new(
                config,
                auth.issuer.clone(),
                auth.audience.clone(),
                auth.groups_claim.clone(),
            )
        });
        // An API key holds the scopes it was given (by default the required ones), no more:
        // a `[[policy]]` rule or `[[auth.step_up]]` asking for others does not apply to it.
        let key_principals = (auth.api_keys.iter())
            .map(|key| {
                Arc::new(Principal {
                    name: key.name.clone(),
                    issuer: None,
                    client_id: None,
                    groups: key.groups.clone(),
                    scopes: auth.key_scopes(key),
                    token: None,
                    claims: Vec::new(),
                    credential: Credential::ApiKey,
                    certificate: None,
                })
            })
            .collect();
        Some(Arc::new(Authenticator {
            introspection,
            metadata_url: metadata::metadata_url(&config.gateway.public_url),
            public_url: config.gateway.public_url.clone(),
            config: auth,
            jwt,
            key_principals,
        }))
    }

    pub fn config(&self) -> &AuthConfig {
        &self.config
    }

    /// The gateway's resource URL (`gateway.public_url`) it was built with.
    pub fn public_url(&self) -> &str {
        &self.public_url
    }

    /// The principal a bearer token names, or why it names none; its scopes include those
    /// `[auth.scope_implies]` makes its granted ones imply.
    pub async fn verify(&self, token: &str) -> Result<Arc<Principal>, Failure> {
        self.verify_for(token, None).await
    }

    /// [`Authenticator::verify`] for a request to the endpoint whose resource URL is `resource`
    /// (a profile's): a token issued for that resource (its `aud`) is accepted there too.
    pub async fn verify_for(&self, token: &str, resource: Option<&str>) -> Result<Arc<Principal>, Failure> {
        if let Some(i) = api_key::find(&self.config.api_keys, token) {
            if let Some(principal) = self.key_principals.get(i) {
                return Ok(principal.clone());
            }
        }
        let mut principal = self.verify_token(token, resource).await?;
        principal.scopes = self.config.with_implied(std::mem::take(&mut principal.scopes));
        Ok(Arc::new(principal))
    }

    /// A JWT by its signature, or an opaque token by introspection.
    async fn verify_token(&self, token: &str, also: Option<&str>) -> Result<Principal, Failure> {
        match (&self.jwt, &self.introspection) {
            (Some(verifier), _) if token.split('.').count() == 3 => verifier.verify_for(token, also).await,
            (_, Some(introspector)) => introspector.verify_for(token, also).await,
            _ => Err(Failure::InvalidToken("unknown API key or malformed token".into())),
        }
    }

    /// Checks `required_scopes` for an authenticated principal.
    pub fn check_required(&self, principal: &Principal) -> Result<(), Failure> {
        let missing = principal.missing(&self.config.required_scopes);
        if missing.is_empty() {
            Ok(())
        } else {
            Err(Failure::InsufficientScope(self.config.required_scopes.clone()))
        }
    }

    /// The scopes a call to `tool` needs beyond what `principal` holds (`[[auth.step_up]]`),
    /// as the whole list the operation needs (required scopes and every matching rule's);
    /// `None` when nothing is missing.
    pub fn step_up(&self, principal: &Principal, tool: &str) -> Option<Vec<String>> {
        let mut matching = (self.config.step_up.iter())
            .filter(|rule| rule.tools.iter().any(|glob| glob.matches(tool)))
            .peekable();
        // No rule names it: nothing beyond the required scopes, which every request was
        // checked for already (the common case costs no allocation).
        matching.peek()?;
        let mut needed: Vec<String> = self.config.required_scopes.clone();
        for rule in matching {
            needed.extend(rule.scopes.iter().cloned());
        }
        let mut seen = BTreeSet::new();
        needed.retain(|s| seen.insert(s.clone()));
        (!principal.missing(&needed).is_empty()).then_some(needed)
    }

    /// The `WWW-Authenticate` value for `failure`.
    pub fn challenge(&self, failure: &Failure) -> String {
        challenge::www_authenticate(&self.metadata_url, &self.advertised_scopes(), failure)
    }

    /// The `WWW-Authenticate` value for `failure` on the endpoint whose resource URL is
    /// `resource` (a profile's: its metadata URL is named); `None`: the main endpoint.
    pub fn challenge_at(&self, resource: Option<&str>, failure: &Failure) -> String {
        match resource {
            Some(resource) => {
                let url = metadata::metadata_url(resource);
                challenge::www_authenticate(&url, &self.advertised_scopes(), failure)
            }
            None => self.challenge(failure),
        }
    }

    /// The scopes a client should ask for when it has none: the required ones, else the supported ones.
    fn advertised_scopes(&self) -> Vec<String> {
        let base = if self.config.required_scopes.is_empty() {
            &self.config.scopes_supported
        } else {
            &self.config.required_scopes
        };
        base.iter().filter(|s| *s != "offline_access").cloned().collect()
    }
}

#[cfg(test)]
#[path = "jwt_tests.rs"]
mod jwt_tests;
#[cfg(test)]
#[path = "key_scopes_tests.rs"]
mod key_scopes_tests;
#[cfg(test)]
mod tests;
