//! JWT access tokens: the algorithm on an allow-list (asymmetric only, never `none` or HS*), the
//! signature by the issuer's key set, `iss`, `aud` (any accepted audience), `exp`/`nbf` with
//! [`LEEWAY_SECS`] of clock skew; the principal from `sub`, scopes and groups.

use super::challenge::Failure;
use super::jwks::{Jwks, KeyError};
use super::{InboundToken, Principal};
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};

/// Allowed clock skew on `exp` and `nbf`.
pub const LEEWAY_SECS: u64 = 60;
/// The signature algorithms accepted.
pub const ALLOWED: [Algorithm; 7] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Verifies one issuer's tokens.
pub struct JwtVerifier {
    issuer: String,
    audience: Vec<String>,
    groups_claim: String,
    jwks: Jwks,
}

impl JwtVerifier {
    pub fn new(
        issuer: String,
        jwks_uri: Option<String>,
        audience: Vec<String>,
        groups_claim: String,
    ) -> Self {
        JwtVerifier {
            jwks: Jwks::new(issuer.clone(), jwks_uri),
            issuer,
            audience,
            groups_claim,
        }
    }

    pub async fn verify(&self, token: &str) -> Result<Principal, Failure> {
        self.verify_for(token, None).await
    }

    /// [`JwtVerifier::verify`], with `also` accepted as an audience too (a profile's resource
    /// URL, on that profile's paths).
    pub async fn verify_for(&self, token: &str, also: Option<&str>) -> Result<Principal, Failure> {
        let invalid = |why: String| Failure::InvalidToken(why);
        // The header's `alg` is read before any check, and only an allowed one goes further
        // (a raw `none` fails to parse here already).
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| invalid(format!("malformed token: {e}")))?;
        if !ALLOWED.contains(&header.alg) {
            return Err(invalid(format!("the algorithm {:?} is not accepted", header.alg)));
        }
        let keys = match self.jwks.keys_for(header.kid.as_deref(), header.alg).await {
            Ok(keys) => keys,
            Err(KeyError::NoMatch) => {
                return Err(invalid(
                    "no signing key of the issuer matches the token's kid".into(),
                ))
            }
            Err(KeyError::Unavailable(why)) => return Err(Failure::Unavailable(why)),
        };
        let mut validation = Validation::new(header.alg);
        validation.leeway = LEEWAY_SECS;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.issuer]);
        let mut audience: Vec<&str> = self.audience.iter().map(String::as_str).collect();
        audience.extend(also);
        validation.set_audience(&audience);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let mut last = String::from("no key verifies the signature");
        for key in keys {
            match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation) {
                Ok(data) => return self.principal(token, data.claims),
                Err(e) => {
                    use jsonwebtoken::errors::ErrorKind;
                    last = match e.kind() {
                        ErrorKind::InvalidSignature => "the signature does not verify".into(),
                        ErrorKind::ExpiredSignature => "the token has expired".into(),
                        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".into(),
                        ErrorKind::InvalidIssuer => "the token's issuer (iss) is not accepted".into(),
                        ErrorKind::InvalidAudience => {
                            "the token's audience (aud) is not this resource".into()
                        }
                        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no {claim} claim"),
                        other => format!("{other:?}"),
                    };
                    if !matches!(e.kind(), ErrorKind::InvalidSignature) {
                        break; // the signature verified: the claims are what fails
                    }
                }
            }
        }
        Err(invalid(last))
    }

    fn principal(&self, token: &str, claims: Map<String, Value>) -> Result<Principal, Failure> {
        let text = |key: &str| claims.get(key).and_then(Value::as_str).map(str::to_string);
        let name = text("sub")
            .filter(|s| !s.is_empty())
            .ok_or_else(|| Failure::InvalidToken("the token has no sub claim".into()))?;
        let scopes = match (claims.get("scope"), claims.get("scp")) {
            (Some(Value::String(s)), _) => s
                .split(' ')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            (_, Some(value)) => strings(value),
            _ => Vec::new(),
        };
        Ok(Principal {
            name,
            issuer: text("iss"),
            client_id: text("client_id").or_else(|| text("azp")),
            groups: claims.get(&self.groups_claim).map(strings).unwrap_or_default(),
            scopes,
            token: Some(InboundToken::new(token, claims.get("exp").and_then(unix_seconds))),
            claims: string_claims(&claims),
            credential: super::Credential::Token,
            certificate: None,
        })
    }
}

/// A NumericDate claim (`exp`): whole seconds, a fraction dropped.
pub(super) fn unix_seconds(value: &Value) -> Option<u64> {
    value
        .as_u64()
        .or_else(|| value.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
}

/// A claim that is a list of strings, or one string of space-separated values.
/// The most claims a principal keeps for profile matching, and values of one claim.
const MAX_KEPT_CLAIMS: usize = 64;
const MAX_CLAIM_VALUES: usize = 256;

/// The claims that are a string or an array of strings, as written (a string is one value, not
/// split), at most [`MAX_KEPT_CLAIMS`] of them with [`MAX_CLAIM_VALUES`] values each.
pub(super) fn string_claims(claims: &Map<String, Value>) -> Vec<(String, Vec<String>)> {
    let values = |value: &Value| match value {
        Value::String(s) => Some(vec![s.clone()]),
        Value::Array(items) if items.iter().all(Value::is_string) => Some(
            (items.iter().take(MAX_CLAIM_VALUES))
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
        ),
        _ => None,
    };
    (claims.iter())
        .filter_map(|(name, value)| Some((name.clone(), values(value)?)))
        .take(MAX_KEPT_CLAIMS)
        .collect()
}

pub(super) fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => s
            .split(' ')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}
