//! A server's `auth = { mode = ... }`: how mcpmux signs in to that upstream (outbound identity),
//! built from the raw table and checked. The providers themselves live in `credentials`.

use super::raw::RawServer;
use super::server::ServerCtx;
use super::spanned::Spanned;
use super::{ConfigError, Secret};
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::PathBuf;

/// `auth = {...}` of a `url` server.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUpstreamAuth {
    /// How mcpmux signs in to this upstream: "oauth" (an OAuth 2.1 client of it, one grant per
    /// principal), "token_exchange" (RFC 8693: the host's validated token exchanged for one
    /// for this upstream; needs [auth]), "client_credentials" (one token for mcpmux itself), or
    /// "forward" (the host's own bearer token is sent: an explicit, warned-about opt-in).
    #[schemars(extend("enum" = ["oauth", "token_exchange", "client_credentials", "forward"]))]
    pub(super) mode: Spanned<String>,
    /// A pre-registered client id ("oauth": else a Client ID Metadata Document or dynamic
    /// registration; required for "token_exchange" and "client_credentials").
    pub(super) client_id: Option<Spanned<String>>,
    /// The client's secret (use `${VAR}`).
    pub(super) client_secret: Option<Spanned<String>>,
    /// "client_credentials": a PEM private key (RSA, P-256 or Ed25519) to authenticate with an
    /// RFC 7523 client assertion instead of a secret; relative to this file.
    pub(super) private_key_jwt: Option<Spanned<String>>,
    /// The authorization server's token endpoint ("token_exchange": required;
    /// "client_credentials": discovered from the upstream when absent).
    pub(super) token_endpoint: Option<Spanned<String>>,
    /// "token_exchange": the `audience` asked for (the upstream's identifier at the IdP).
    pub(super) audience: Option<Spanned<String>>,
    /// The RFC 8707 `resource` asked for. Default: the upstream's URL ("oauth",
    /// "client_credentials"); none for "token_exchange".
    pub(super) resource: Option<Spanned<String>>,
    /// Scopes asked for. Default: what the upstream's challenge or metadata names.
    pub(super) scopes: Option<Vec<Spanned<String>>>,
    /// "oauth": the https URL of mcpmux's Client ID Metadata Document as the authorization
    /// server fetches it (a copy of GET /oauth/client.json hosted where the AS can reach it).
    /// Default: /oauth/client.json on gateway.public_url's origin when that is public https.
    pub(super) client_metadata_url: Option<Spanned<String>>,
}

/// How mcpmux authenticates to one upstream.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum UpstreamAuth {
    /// Only the configured `headers` (the default).
    #[default]
    Headers,
    /// The MCP authorization flow, mcpmux as the OAuth client; one grant per principal.
    OAuth(OAuthClient),
    /// RFC 8693 token exchange of the host's validated token, per principal.
    TokenExchange(TokenExchange),
    /// One client-credentials token for mcpmux itself, shared by every principal.
    ClientCredentials(ClientCredentials),
    /// The host's own bearer token, passed on (explicit opt-in).
    Forward,
}

impl UpstreamAuth {
    /// The mode as written in the configuration.
    pub fn mode(&self) -> &'static str {
        match self {
            UpstreamAuth::Headers => "headers",
            UpstreamAuth::OAuth(_) => "oauth",
            UpstreamAuth::TokenExchange(_) => "token_exchange",
            UpstreamAuth::ClientCredentials(_) => "client_credentials",
            UpstreamAuth::Forward => "forward",
        }
    }

    /// Whether each principal has an identity of its own at the upstream (its connections are
    /// the principal's alone).
    pub fn per_principal(&self) -> bool {
        matches!(
            self,
            UpstreamAuth::OAuth(_) | UpstreamAuth::TokenExchange(_) | UpstreamAuth::Forward
        )
    }
}

/// `mode = "oauth"`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct OAuthClient {
    /// A pre-registered client (id and optional secret), else CIMD or dynamic registration.
    pub client_id: Option<String>,
    pub client_secret: Option<Secret>,
    pub scopes: Vec<String>,
    pub resource: Option<String>,
    /// Where mcpmux's Client ID Metadata Document is, when set explicitly.
    pub client_metadata_url: Option<String>,
}

/// `mode = "token_exchange"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenExchange {
    pub token_endpoint: String,
    pub client_id: String,
    pub client_secret: Option<Secret>,
    pub audience: Option<String>,
    pub resource: Option<String>,
    pub scopes: Vec<String>,
}

/// `mode = "client_credentials"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCredentials {
    pub client_id: String,
    pub proof: ClientProof,
    /// Discovered from the upstream when `None`.
    pub token_endpoint: Option<String>,
    pub resource: Option<String>,
    pub scopes: Vec<String>,
}

/// How a client proves itself at the token endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientProof {
    Secret(Secret),
    /// An RFC 7523 assertion signed with the PEM key at this (absolute) path.
    PrivateKeyJwt(PathBuf),
}

/// Keys each mode accepts (besides `mode`).
const OAUTH_KEYS: &[&str] = &[
    "client_id",
    "client_secret",
    "scopes",
    "resource",
    "client_metadata_url",
];
const EXCHANGE_KEYS: &[&str] = &[
    "token_endpoint",
    "client_id",
    "client_secret",
    "audience",
    "resource",
    "scopes",
];
const CREDENTIALS_KEYS: &[&str] = &[
    "client_id",
    "client_secret",
    "private_key_jwt",
    "token_endpoint",
    "resource",
    "scopes",
];

impl ServerCtx<'_> {
    /// The server's `auth`, checked: only on `url` servers; per mode, only its keys.
    pub(super) fn upstream_auth(&self, raw: &RawServer) -> Result<UpstreamAuth, ConfigError> {
        let Some(table) = &raw.auth else {
            return Ok(UpstreamAuth::Headers);
        };
        if raw.url.is_none() {
            return Err(self.fail(
                Some(&table.mode.span()),
                "`auth` is only valid for `url` (HTTP) servers (a stdio server gets its credentials through `env`)",
            ));
        }
        let mode = self.expand(&table.mode, "auth.mode")?;
        let allowed: &[&str] = match mode.as_str() {
            "oauth" => OAUTH_KEYS,
            "token_exchange" => EXCHANGE_KEYS,
            "client_credentials" => CREDENTIALS_KEYS,
            "forward" => &[],
            other => {
                let msg = format!(
                    "unknown auth.mode {other:?} (expected \"oauth\", \"token_exchange\", \"client_credentials\" or \"forward\")"
                );
                return Err(self.fail(Some(&table.mode.span()), msg));
            }
        };
        for (key, span) in present_keys(table) {
            if !allowed.contains(&key) {
                let msg = format!("auth.{key} does not apply to auth.mode = {mode:?}");
                return Err(self.fail(Some(&span), msg));
            }
        }
        if raw.headers.as_ref().is_some_and(|h| {
            h.0.iter()
                .any(|(k, _)| k.get_ref().eq_ignore_ascii_case("authorization"))
        }) {
            return Err(self.fail(
                Some(&table.mode.span()),
                "set either an Authorization header in `headers` or `auth`, not both",
            ));
        }
        let text = |v: &Option<Spanned<String>>, key: &str| -> Result<Option<String>, ConfigError> {
            v.as_ref()
                .map(|v| self.nonempty(v, &format!("auth.{key}")))
                .transpose()
        };
        let url = |v: &Option<Spanned<String>>, key: &str| -> Result<Option<String>, ConfigError> {
            let Some(v) = v else { return Ok(None) };
            let value = self.nonempty(v, &format!("auth.{key}"))?;
            match url::Url::parse(&value) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => Ok(Some(value)),
                _ => Err(self.fail(
                    Some(&v.span()),
                    format!("auth.{key} {value:?} must be an http:// or https:// URL with a host"),
                )),
            }
        };
        let scopes = match &table.scopes {
            Some(list) => {
                let scopes = self.expand_list(list, "auth.scopes")?;
                if let Some(at) = scopes.iter().position(|s| s.is_empty() || s.contains(' ')) {
                    let msg = "auth.scopes entries must be single non-empty scope names";
                    return Err(self.fail(Some(&list[at].span()), msg));
                }
                scopes
            }
            None => Vec::new(),
        };
        let secret = text(&table.client_secret, "client_secret")?.map(Secret::new);
        let resource = url(&table.resource, "resource")?;
        match mode.as_str() {
            "oauth" => {
                let client_id = text(&table.client_id, "client_id")?;
                if client_id.is_none() && secret.is_some() {
                    let msg = "auth.client_secret needs auth.client_id (a pre-registered client)";
                    return Err(self.fail(Some(&table.mode.span()), msg));
                }
                let client_metadata_url = url(&table.client_metadata_url, "client_metadata_url")?;
                if let (Some(v), Some(url)) = (&table.client_metadata_url, &client_metadata_url) {
                    if !url.starts_with("https://") {
                        let msg = "auth.client_metadata_url must be an https:// URL (authorization servers fetch it)";
                        return Err(self.fail(Some(&v.span()), msg));
                    }
                }
                Ok(UpstreamAuth::OAuth(OAuthClient {
                    client_id,
                    client_secret: secret,
                    scopes,
                    resource,
                    client_metadata_url,
                }))
            }
            "token_exchange" => {
                let need = |v: Option<String>, key: &str| {
                    v.ok_or_else(|| {
                        self.fail(
                            Some(&table.mode.span()),
                            format!("auth.mode = \"token_exchange\" needs auth.{key}"),
                        )
                    })
                };
                let token_endpoint = need(url(&table.token_endpoint, "token_endpoint")?, "token_endpoint")?;
                let client_id = need(text(&table.client_id, "client_id")?, "client_id")?;
                let audience = text(&table.audience, "audience")?;
                if audience.is_none() && resource.is_none() {
                    let msg = "auth.mode = \"token_exchange\" needs auth.audience or auth.resource (whom the exchanged token is for)";
                    return Err(self.fail(Some(&table.mode.span()), msg));
                }
                Ok(UpstreamAuth::TokenExchange(TokenExchange {
                    token_endpoint,
                    client_id,
                    client_secret: secret,
                    audience,
                    resource,
                    scopes,
                }))
            }
            "client_credentials" => {
                let client_id = text(&table.client_id, "client_id")?.ok_or_else(|| {
                    self.fail(
                        Some(&table.mode.span()),
                        "auth.mode = \"client_credentials\" needs auth.client_id",
                    )
                })?;
                let proof = match (secret, &table.private_key_jwt) {
                    (Some(secret), None) => ClientProof::Secret(secret),
                    (None, Some(path)) => {
                        ClientProof::PrivateKeyJwt(self.file_path(path, "auth.private_key_jwt")?)
                    }
                    (Some(_), Some(path)) => {
                        return Err(self.fail(
                            Some(&path.span()),
                            "set one of auth.client_secret or auth.private_key_jwt, not both",
                        ))
                    }
                    (None, None) => return Err(self.fail(
                        Some(&table.mode.span()),
                        "auth.mode = \"client_credentials\" needs auth.client_secret or auth.private_key_jwt",
                    )),
                };
                Ok(UpstreamAuth::ClientCredentials(ClientCredentials {
                    client_id,
                    proof,
                    token_endpoint: url(&table.token_endpoint, "token_endpoint")?,
                    resource,
                    scopes,
                }))
            }
            _ => Ok(UpstreamAuth::Forward),
        }
    }

    /// A non-empty string value.
    fn nonempty(&self, value: &Spanned<String>, key: &str) -> Result<String, ConfigError> {
        match self.expand(value, key)? {
            text if text.is_empty() => {
                Err(self.fail(Some(&value.span()), format!("{key} must not be empty")))
            }
            text => Ok(text),
        }
    }
}

/// The optional keys written in `table`, with where.
fn present_keys(table: &RawUpstreamAuth) -> Vec<(&'static str, std::ops::Range<usize>)> {
    let one = |key: &'static str, v: &Option<Spanned<String>>| v.as_ref().map(|v| (key, v.span()));
    [
        one("client_id", &table.client_id),
        one("client_secret", &table.client_secret),
        one("private_key_jwt", &table.private_key_jwt),
        one("token_endpoint", &table.token_endpoint),
        one("audience", &table.audience),
        one("resource", &table.resource),
        one("client_metadata_url", &table.client_metadata_url),
        table
            .scopes
            .as_ref()
            .and_then(|s| s.first())
            .map(|v| ("scopes", v.span())),
    ]
    .into_iter()
    .flatten()
    .collect()
}
