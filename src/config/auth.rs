//! The `[auth]` table (who may use the gateway: an OAuth 2.1 authorization server's JWT access
//! tokens, API keys, step-up scopes) and `gateway.public_url`, built from the raw TOML and checked.

use super::spanned::Spanned;
use super::{ConfigError, Ctx, Secret};
use crate::util::glob::Glob;
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

/// `[auth]`: how hosts authenticate. Without it the gateway authenticates nobody.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthConfig {
    /// The authorization server (`iss` of accepted JWTs); `None` accepts API keys only.
    pub issuer: Option<String>,
    /// Where the signing keys are; `None` discovers it from the issuer's metadata.
    pub jwks_uri: Option<String>,
    /// Accepted `aud` values (any one of them); default `[gateway.public_url]`.
    pub audience: Vec<String>,
    /// Published in the protected resource metadata and in the 401 challenge.
    pub scopes_supported: Vec<String>,
    /// Scopes every request needs.
    pub required_scopes: Vec<String>,
    /// The JWT claim holding the principal's groups.
    pub groups_claim: String,
    pub api_keys: Vec<ApiKey>,
    pub step_up: Vec<StepUp>,
    /// Opaque tokens checked at the authorization server (RFC 7662).
    pub introspection: Option<Introspection>,
    /// `[auth.scope_implies]`: scopes that imply others beyond the `:` segment rule of
    /// `util::scope` (an `admin` that implies `write`), each with what it implies directly.
    pub scope_implies: BTreeMap<String, Vec<String>>,
}

impl AuthConfig {
    /// `granted` with every scope `[auth.scope_implies]` makes it imply, directly or through
    /// another implied scope (granted scopes first, in their order, then the implied ones sorted).
    pub fn with_implied(&self, granted: Vec<String>) -> Vec<String> {
        if self.scope_implies.is_empty() {
            return granted;
        }
        let mut implied = BTreeSet::new();
        let mut todo: Vec<&String> = granted.iter().collect();
        while let Some(scope) = todo.pop() {
            // A key also applies to what it covers by segments: `mcp` implying `x` makes
            // `mcp` grant `x`, and so does anything broader than a key.
            let rules = (self.scope_implies.iter()).filter(|(key, _)| crate::util::scope::covers(scope, key));
            for implied_scope in rules.flat_map(|(_, v)| v) {
                if !granted.contains(implied_scope) && implied.insert(implied_scope.clone()) {
                    todo.push(implied_scope);
                }
            }
        }
        let mut out = granted;
        out.extend(implied);
        out
    }

    /// The scopes an API key holds: exactly those it was given (`scopes = [...]`, by default
    /// `required_scopes`, so it is admitted and no more), with what `[auth.scope_implies]` makes
    /// them imply. A key is a credential like any other: least privilege.
    pub fn key_scopes(&self, key: &ApiKey) -> Vec<String> {
        let given = key.scopes.as_ref().unwrap_or(&self.required_scopes);
        self.with_implied(given.clone())
    }

    /// The configured API key named `name`, if there is one.
    pub fn api_key(&self, name: &str) -> Option<&ApiKey> {
        self.api_keys.iter().find(|key| key.name == name)
    }
}

/// `auth.introspection`: the RFC 7662 endpoint and the gateway's client credentials for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Introspection {
    pub endpoint: String,
    pub client_id: String,
    pub client_secret: Secret,
    /// How long an answer is kept at most (`cache_secs`, default 60; 0 asks every time, so a
    /// token revoked at the authorization server is refused on its next request). Never longer
    /// than the token's own lifetime.
    pub cache_for: std::time::Duration,
}

/// The most `auth.introspection.cache_secs` may be.
const MAX_INTROSPECTION_CACHE_SECS: u64 = 3600;

/// One `[[auth.api_keys]]`: a principal named `name` whose key hashes to `sha256`.
#[derive(Clone)]
pub struct ApiKey {
    pub name: String,
    /// SHA-256 of the key (the key itself is never kept).
    pub sha256: [u8; 32],
    pub groups: Vec<String>,
    /// The scopes the key was given (`scopes = [...]`); `None`: the default, `required_scopes`.
    /// What the key holds is [`AuthConfig::key_scopes`].
    pub scopes: Option<Vec<String>>,
    /// Where the table is written (`FILE:LINE` of its `name`), for people (`policy explain`).
    pub at: String,
}

/// Two keys are the same when they grant the same thing: where they are written is left out
/// (moving a table in the file changes nothing a request sees).
impl PartialEq for ApiKey {
    fn eq(&self, other: &ApiKey) -> bool {
        (self.name == other.name)
            && (self.sha256 == other.sha256)
            && (self.groups == other.groups)
            && (self.scopes == other.scopes)
    }
}

impl Eq for ApiKey {}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKey")
            .field("name", &self.name)
            .field("sha256", &"***")
            .field("groups", &self.groups)
            .field("scopes", &self.scopes)
            .field("at", &self.at)
            .finish()
    }
}

/// One `[[auth.step_up]]`: using a tool, prompt or resource matching `tools` (globs over exposed
/// names and URIs) needs `scopes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepUp {
    pub tools: Vec<Glob>,
    pub scopes: Vec<String>,
}

/// `[auth]`: how hosts authenticate.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuth {
    /// The OAuth 2.1 authorization server (`iss` of accepted JWT access tokens), an http(s)
    /// URL. Default: none (API keys only).
    issuer: Option<Spanned<String>>,
    /// Where the JWT signing keys are (a JWKS URL). Default: discovered from the issuer's
    /// metadata.
    jwks_uri: Option<Spanned<String>>,
    /// Accepted `aud` values of JWTs (any one of them). Default: [gateway.public_url].
    audience: Option<Vec<Spanned<String>>>,
    /// Scopes published in the protected resource metadata and the 401 challenge.
    scopes_supported: Option<Vec<Spanned<String>>>,
    /// Scopes every request needs.
    required_scopes: Option<Vec<Spanned<String>>>,
    /// The JWT claim holding the principal's groups. Default "groups".
    groups_claim: Option<Spanned<String>>,
    /// Opaque tokens checked at the authorization server (RFC 7662 token introspection).
    introspection: Option<RawIntrospection>,
    /// API keys, one `[[auth.api_keys]]` table each (sent as a bearer token).
    #[serde(default)]
    api_keys: Vec<RawApiKey>,
    /// Scopes needed to use some tools, prompts or resources (`[[auth.step_up]]`).
    #[serde(default)]
    step_up: Vec<RawStepUp>,
    /// Scopes that imply others: { admin = ["write", "read"] }.
    scope_implies: Option<Spanned<BTreeMap<String, Vec<Spanned<String>>>>>,
}

/// `[auth.introspection]`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawIntrospection {
    /// The RFC 7662 introspection endpoint, an http(s) URL.
    endpoint: Spanned<String>,
    /// The gateway's client id at the authorization server.
    client_id: Spanned<String>,
    /// The gateway's client secret (write "${VAR}" to keep it out of the file).
    client_secret: Spanned<String>,
    /// Seconds an introspection answer is kept at most (0 asks every time; at most 3600).
    /// Default 60.
    #[schemars(range(max = 3600))]
    cache_secs: Option<Spanned<u64>>,
}

/// One `[[auth.api_keys]]`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawApiKey {
    /// The principal the key authenticates (what `[[policy]]` principals name).
    name: Spanned<String>,
    /// SHA-256 of the key, 64 hexadecimal digits (preferred over `key`). One of `sha256` and
    /// `key`.
    sha256: Option<Spanned<String>>,
    /// The key itself (write "${VAR}"). One of `sha256` and `key`.
    key: Option<Spanned<String>>,
    /// Groups of the principal (for `[[policy]]` groups).
    groups: Option<Vec<Spanned<String>>>,
    /// Scopes the key holds (for `[[policy]]` scopes and `[[auth.step_up]]`), with what
    /// `[auth.scope_implies]` makes them imply; they must cover `required_scopes`. Default:
    /// `required_scopes` (the key is admitted and holds nothing more).
    scopes: Option<Vec<Spanned<String>>>,
}

/// One `[[auth.step_up]]`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawStepUp {
    /// Globs over exposed tool/prompt names and resource URIs that need `scopes`.
    tools: Spanned<Vec<Spanned<String>>>,
    /// Scopes a principal must hold to use them.
    scopes: Spanned<Vec<Spanned<String>>>,
}

/// An `http://` or `https://` URL with a host and no fragment.
pub(super) fn http_url(text: &str) -> bool {
    url::Url::parse(text)
        .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some() && u.fragment().is_none())
}

/// A scope token (RFC 6749 §3.3): printable ASCII without space, `"` or `\`.
fn valid_scope(scope: &str) -> bool {
    !scope.is_empty()
        && scope
            .bytes()
            .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

/// `gateway.public_url`, or its default `http://{listen}{path}`.
pub(super) fn public_url(
    ctx: &Ctx<'_>,
    raw: Option<&Spanned<String>>,
    listen: std::net::SocketAddr,
    path: &str,
    tls: bool,
) -> Result<String, ConfigError> {
    let Some(v) = raw else {
        return Ok(format!("{}://{listen}{path}", super::scheme(tls)));
    };
    let url = ctx.expand(v, "gateway.public_url")?;
    if !http_url(&url) {
        let msg = format!("gateway.public_url {url:?} must be an http:// or https:// URL with a host");
        return Err(ctx.invalid(&v.span(), msg));
    }
    Ok(url)
}

fn scopes(
    ctx: &Ctx<'_>,
    values: Option<&Vec<Spanned<String>>>,
    key: &str,
) -> Result<Vec<String>, ConfigError> {
    let Some(values) = values else {
        return Ok(Vec::new());
    };
    let out = ctx.expand_list(values, key)?;
    for (i, scope) in out.iter().enumerate() {
        if !valid_scope(scope) {
            let msg = format!(
                "{key}[{i}] {scope:?} is not a scope (printable ASCII without spaces, '\"' or '\\\\')"
            );
            return Err(ctx.invalid(&values[i].span(), msg));
        }
    }
    Ok(out)
}

fn sha256_hex(ctx: &Ctx<'_>, v: &Spanned<String>, key: &str) -> Result<[u8; 32], ConfigError> {
    let text = ctx.expand(v, key)?;
    let bad = || {
        ctx.invalid(
            &v.span(),
            format!("{key} must be 64 hexadecimal digits (the SHA-256 of the key)"),
        )
    };
    if text.len() != 64 {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16).map_err(|_| bad())?;
    }
    Ok(out)
}

pub(super) fn build_auth(ctx: &Ctx<'_>, raw: &RawAuth, public_url: &str) -> Result<AuthConfig, ConfigError> {
    // A rule about the whole table, which has no one line.
    let whole = |msg: &str| ConfigError::Invalid {
        message: format!("{}: {msg}", ctx.source()),
    };
    let url_key = |v: &Option<Spanned<String>>, key: &str| -> Result<Option<String>, ConfigError> {
        let Some(v) = v else { return Ok(None) };
        let url = ctx.expand(v, key)?;
        if !http_url(&url) {
            return Err(ctx.invalid(
                &v.span(),
                format!("{key} {url:?} must be an http:// or https:// URL with a host"),
            ));
        }
        Ok(Some(url))
    };
    let issuer = url_key(&raw.issuer, "auth.issuer")?;
    let jwks_uri = url_key(&raw.jwks_uri, "auth.jwks_uri")?;
    if let (None, Some(v)) = (&issuer, &raw.jwks_uri) {
        return Err(ctx.invalid(
            &v.span(),
            "auth.jwks_uri needs auth.issuer (the `iss` tokens must carry)",
        ));
    }
    let audience = match &raw.audience {
        None => vec![public_url.to_string()],
        Some(values) => {
            let out = ctx.expand_list(values, "auth.audience")?;
            if let Some(i) = out.iter().position(String::is_empty) {
                return Err(ctx.invalid(&values[i].span(), format!("auth.audience[{i}] must not be empty")));
            }
            if out.is_empty() {
                return Err(whole(
                    "auth.audience must not be empty (leave it out for [gateway.public_url])",
                ));
            }
            out
        }
    };
    let groups_claim = match &raw.groups_claim {
        None => "groups".to_string(),
        Some(v) => {
            let claim = ctx.expand(v, "auth.groups_claim")?;
            if claim.is_empty() {
                return Err(ctx.invalid(&v.span(), "auth.groups_claim must not be empty"));
            }
            claim
        }
    };
    let mut api_keys: Vec<ApiKey> = Vec::with_capacity(raw.api_keys.len());
    for (i, key) in raw.api_keys.iter().enumerate() {
        let at = format!("auth.api_keys[{i}]");
        let name = ctx.expand(&key.name, &format!("{at}.name"))?;
        if name.is_empty() {
            return Err(ctx.invalid(&key.name.span(), format!("{at}.name must not be empty")));
        }
        if api_keys.iter().any(|k| k.name == name) {
            return Err(ctx.invalid(
                &key.name.span(),
                format!("{at}.name {name:?} is used by another API key"),
            ));
        }
        let sha256 = match (&key.sha256, &key.key) {
            (Some(hex), None) => sha256_hex(ctx, hex, &format!("{at}.sha256"))?,
            (None, Some(v)) => {
                let secret = Secret::new(ctx.expand(v, &format!("{at}.key"))?);
                if secret.expose().is_empty() {
                    return Err(ctx.invalid(&v.span(), format!("{at}.key must not be empty")));
                }
                let digest = ring::digest::digest(&ring::digest::SHA256, secret.expose().as_bytes());
                let mut out = [0u8; 32];
                out.copy_from_slice(digest.as_ref());
                out
            }
            _ => {
                let msg = format!("{at} needs exactly one of `sha256` (of the key) or `key`");
                return Err(ctx.invalid(&key.name.span(), msg));
            }
        };
        if let Some(other) = api_keys.iter().find(|k| k.sha256 == sha256) {
            let msg = format!("{at} has the same key as {:?}", other.name);
            return Err(ctx.invalid(&key.name.span(), msg));
        }
        let groups = match &key.groups {
            Some(values) => ctx.expand_list(values, &format!("{at}.groups"))?,
            None => Vec::new(),
        };
        let scopes = match &key.scopes {
            Some(values) => Some(scopes(ctx, Some(values), &format!("{at}.scopes"))?),
            None => None,
        };
        let site = ctx.at(&key.name.span());
        api_keys.push(ApiKey {
            name,
            sha256,
            groups,
            scopes,
            at: site,
        });
    }
    let mut step_up = Vec::with_capacity(raw.step_up.len());
    for (i, rule) in raw.step_up.iter().enumerate() {
        let at = format!("auth.step_up[{i}]");
        let texts = ctx.expand_list(rule.tools.get_ref(), &format!("{at}.tools"))?;
        if texts.is_empty() {
            return Err(ctx.invalid(
                &rule.tools.span(),
                format!("{at}.tools must list tool name globs"),
            ));
        }
        let mut tools = Vec::with_capacity(texts.len());
        for (j, text) in texts.iter().enumerate() {
            let glob = Glob::new(text).map_err(|e| {
                ctx.invalid(
                    &rule.tools.get_ref()[j].span(),
                    format!("{at}.tools[{j}] {text:?}: {e}"),
                )
            })?;
            tools.push(glob);
        }
        let scopes = scopes(ctx, Some(rule.scopes.get_ref()), &format!("{at}.scopes"))?;
        if scopes.is_empty() {
            return Err(ctx.invalid(&rule.scopes.span(), format!("{at}.scopes must not be empty")));
        }
        step_up.push(StepUp { tools, scopes });
    }
    let introspection = match &raw.introspection {
        None => None,
        Some(raw) => {
            let endpoint = ctx.expand(&raw.endpoint, "auth.introspection.endpoint")?;
            if !http_url(&endpoint) {
                let msg = format!(
                    "auth.introspection.endpoint {endpoint:?} must be an http:// or https:// URL with a host"
                );
                return Err(ctx.invalid(&raw.endpoint.span(), msg));
            }
            let client_id = ctx.expand(&raw.client_id, "auth.introspection.client_id")?;
            if client_id.is_empty() {
                return Err(ctx.invalid(
                    &raw.client_id.span(),
                    "auth.introspection.client_id must not be empty",
                ));
            }
            let client_secret =
                Secret::new(ctx.expand(&raw.client_secret, "auth.introspection.client_secret")?);
            let cache_secs = match &raw.cache_secs {
                None => 60,
                Some(v) if *v.get_ref() > MAX_INTROSPECTION_CACHE_SECS => {
                    let msg = format!(
                        "auth.introspection.cache_secs must be at most {MAX_INTROSPECTION_CACHE_SECS}"
                    );
                    return Err(ctx.invalid(&v.span(), msg));
                }
                Some(v) => *v.get_ref(),
            };
            Some(Introspection {
                endpoint,
                client_id,
                client_secret,
                cache_for: std::time::Duration::from_secs(cache_secs),
            })
        }
    };
    let mut scope_implies = BTreeMap::new();
    if let Some(table) = &raw.scope_implies {
        for (scope, implied) in table.get_ref() {
            let at = format!("auth.scope_implies.{scope:?}");
            if !valid_scope(scope) {
                let msg = format!(
                    "{at}: {scope:?} is not a scope (printable ASCII without spaces, '\"' or '\\\\')"
                );
                return Err(ctx.invalid(&table.span(), msg));
            }
            scope_implies.insert(scope.clone(), scopes(ctx, Some(implied), &at)?);
        }
    }
    if issuer.is_none() && api_keys.is_empty() && introspection.is_none() {
        let msg = "[auth] needs `issuer` (JWT access tokens), `introspection` (opaque tokens) or at least one [[auth.api_keys]]";
        return Err(whole(msg));
    }
    let auth = AuthConfig {
        issuer,
        jwks_uri,
        audience,
        scopes_supported: scopes(ctx, raw.scopes_supported.as_ref(), "auth.scopes_supported")?,
        required_scopes: scopes(ctx, raw.required_scopes.as_ref(), "auth.required_scopes")?,
        groups_claim,
        api_keys,
        step_up,
        introspection,
        scope_implies,
    };
    // A key whose scopes miss a required one would be refused on every request: say so now.
    for (i, (key, raw_key)) in auth.api_keys.iter().zip(&raw.api_keys).enumerate() {
        let (Some(_), Some(values)) = (&key.scopes, &raw_key.scopes) else {
            continue;
        };
        let missing = crate::util::scope::lacking(&auth.key_scopes(key), &auth.required_scopes);
        if !missing.is_empty() {
            let span = values.first().map_or_else(|| raw_key.name.span(), |v| v.span());
            let msg = format!(
                "auth.api_keys[{i}].scopes lacks {missing:?} of auth.required_scopes: every request \
                 with the key {:?} would be refused (add them, or leave `scopes` out for the required ones)",
                key.name
            );
            return Err(ctx.invalid(&span, msg));
        }
    }
    Ok(auth)
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
