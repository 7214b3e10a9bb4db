//! `mode = "client_credentials"` (SEP-1046): one token for mcpmux itself at an upstream, shared
//! by every principal, fetched on first use and again before it expires or when the upstream
//! refuses it. The token endpoint is configured, or discovered from the upstream's challenge.

use super::bearer::{Bearer, Refusal, Renewal, SignInNeeded};
use super::grant::ClientRegistration;
use super::oauth::{self, ClientAuth};
use super::token_cell::{now_unix, TokenCell};
use crate::config::{ClientCredentials, ClientProof};
use http::HeaderValue;
use std::sync::Arc;

/// The client-credentials identity of one upstream.
pub struct ServiceBearer {
    upstream: String,
    url: url::Url,
    config: ClientCredentials,
    http: reqwest::Client,
    cell: TokenCell,
    /// One renewal at a time; the others wait for its token.
    renewing: tokio::sync::Mutex<Found>,
}

/// What discovery found (kept: it is asked once).
#[derive(Default)]
struct Found {
    token_endpoint: Option<String>,
    resource: Option<String>,
    auth_methods: Option<Vec<String>>,
    /// The authorization server's issuer (an RFC 7523 assertion's audience).
    issuer: Option<String>,
}

impl ServiceBearer {
    pub fn new(
        upstream: &str,
        url: url::Url,
        config: ClientCredentials,
        http: reqwest::Client,
    ) -> Arc<ServiceBearer> {
        Arc::new(ServiceBearer {
            upstream: upstream.to_string(),
            url,
            config,
            http,
            cell: TokenCell::default(),
            renewing: tokio::sync::Mutex::new(Found::default()),
        })
    }

    /// Fetch a token (the caller holds the renewal lock, `found`).
    async fn fetch(&self, found: &mut Found) -> Result<HeaderValue, SignInNeeded> {
        let refused = |reason: String| SignInNeeded {
            reason: format!("client credentials for upstream {:?}: {reason}", self.upstream),
            by_person: false,
        };
        if found.token_endpoint.is_none() {
            match &self.config.token_endpoint {
                Some(endpoint) => found.token_endpoint = Some(endpoint.clone()),
                None => {
                    let challenge = super::probe::challenge_of(&self.http, &self.url).await;
                    let d = oauth::discover(&self.http, &self.url, challenge.as_ref())
                        .await
                        .map_err(|e| refused(e.to_string()))?;
                    found.token_endpoint = Some(d.as_metadata.token_endpoint.clone());
                    found.auth_methods = d.as_metadata.token_endpoint_auth_methods_supported.clone();
                    found.resource = Some(d.resource.clone());
                    found.issuer = Some(d.issuer.clone());
                }
            }
        }
        let endpoint = found.token_endpoint.clone().unwrap_or_default();
        let (auth, secret, method) = match &self.config.proof {
            ClientProof::Secret(secret) => {
                let method = oauth::registration::auth_method_for(found.auth_methods.as_deref(), true);
                let auth = match method {
                    "client_secret_post" => ClientAuth::Post,
                    _ => ClientAuth::Basic,
                };
                (auth, Some(secret.expose().to_string()), method)
            }
            ClientProof::PrivateKeyJwt(path) => {
                let pem = tokio::fs::read_to_string(path)
                    .await
                    .map_err(|e| refused(format!("cannot read private_key_jwt {}: {e}", path.display())))?;
                (
                    ClientAuth::PrivateKeyJwt { pem, key_id: None },
                    None,
                    "private_key_jwt",
                )
            }
        };
        let client = ClientRegistration {
            client_id: self.config.client_id.clone(),
            client_secret: secret,
            auth_method: method.to_string(),
            issuer: found.issuer.clone(),
        };
        let scope = (!self.config.scopes.is_empty()).then(|| self.config.scopes.join(" "));
        let resource = self.config.resource.clone().or_else(|| found.resource.clone());
        let grant = oauth::client_credentials(
            &self.http,
            &endpoint,
            &client,
            auth,
            scope.as_deref(),
            resource.as_deref(),
        )
        .await
        .map_err(|e| refused(e.to_string()))?;
        tracing::info!(upstream = %self.upstream, expires_at = ?grant.expires_at, "client credentials: token obtained");
        self.cell.hold(&grant)
    }
}

impl Bearer for ServiceBearer {
    fn grant_id(&self) -> Option<String> {
        self.cell.grant_id()
    }

    fn current(&self) -> Option<HeaderValue> {
        self.cell.fresh(now_unix())
    }

    fn renew<'a>(&'a self, refusal: Refusal<'a>) -> Renewal<'a> {
        Box::pin(async move {
            let mut found = self.renewing.lock().await;
            // Another request renewed it while this one waited.
            if let Some(header) = self.cell.fresh(now_unix()) {
                if refusal.stale.is_none_or(|stale| *stale != header)
                    && refusal.status.is_none_or(|s| s == 401)
                {
                    return Ok(header);
                }
            }
            if refusal.status == Some(403) {
                // More scope: a client-credentials client has what it is configured with.
                return Err(SignInNeeded {
                    reason: format!(
                        "upstream {:?} asks for more scope than the client credentials give (set auth.scopes)",
                        self.upstream
                    ),
                    by_person: false,
                });
            }
            self.cell.clear();
            self.fetch(&mut found).await
        })
    }
}
