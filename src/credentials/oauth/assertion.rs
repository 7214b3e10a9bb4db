//! The RFC 7523 §2.2 client assertion of `private_key_jwt`: a JWT with `iss` = `sub` = the
//! client id, the authorization server as `aud`, a random `jti` and a short `exp`, signed with
//! the client's private key. The algorithm follows the key: RSA → RS256, EC P-256 → ES256,
//! EC P-384 → ES384, Ed25519 → EdDSA. Keys come as PEM text (PKCS#8; PKCS#1 for RSA, SEC1
//! for EC).

use super::error::OAuthError;
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Serialize;

/// How long an assertion is valid.
pub const ASSERTION_LIFETIME_SECS: u64 = 60;

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    sub: &'a str,
    aud: Audience<'a>,
    iat: u64,
    exp: u64,
    jti: String,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Audience<'a> {
    One(&'a str),
    Many(&'a [String]),
}

/// A signed assertion for `client_id` addressed to `audience` (one value: a string; several:
/// an array), issued at `now`.
pub fn client_assertion(
    pem: &str,
    key_id: Option<&str>,
    client_id: &str,
    audience: &[String],
    now: u64,
) -> Result<String, OAuthError> {
    let (algorithm, key) = signing_key(pem)?;
    let mut header = Header::new(algorithm);
    header.kid = key_id.map(str::to_string);
    let claims = Claims {
        iss: client_id,
        sub: client_id,
        aud: match audience {
            [one] => Audience::One(one),
            many => Audience::Many(many),
        },
        iat: now,
        exp: now + ASSERTION_LIFETIME_SECS,
        jti: super::pkce::random_urlsafe(18),
    };
    jsonwebtoken::encode(&header, &claims, &key)
        .map_err(|e| OAuthError::Invalid(format!("signing the client assertion: {e}")))
}

/// The algorithm and key of a PEM private key.
pub fn signing_key(pem: &str) -> Result<(Algorithm, EncodingKey), OAuthError> {
    let (label, der) = pem_block(pem)?;
    let bad = |what: &str| OAuthError::Invalid(format!("private_key_jwt key: {what}"));
    match label.as_str() {
        "RSA PRIVATE KEY" => Ok((Algorithm::RS256, EncodingKey::from_rsa_der(&der))),
        "PRIVATE KEY" => {
            let info = pkcs8_info(&der).ok_or_else(|| bad("not a PKCS#8 private key"))?;
            if info.algorithm == OID_RSA {
                Ok((Algorithm::RS256, EncodingKey::from_rsa_der(info.private_key)))
            } else if info.algorithm == OID_EC {
                match info.parameters {
                    Some(OID_P256) => Ok((Algorithm::ES256, EncodingKey::from_ec_der(&der))),
                    Some(OID_P384) => Ok((Algorithm::ES384, EncodingKey::from_ec_der(&der))),
                    _ => Err(bad("an EC key on a curve other than P-256 or P-384")),
                }
            } else if info.algorithm == OID_ED25519 {
                Ok((Algorithm::EdDSA, EncodingKey::from_ed_der(&der)))
            } else {
                Err(bad("a key type other than RSA, EC or Ed25519"))
            }
        }
        "EC PRIVATE KEY" => {
            let (curve, pkcs8) = sec1_to_pkcs8(&der).ok_or_else(|| {
                bad("a SEC1 EC key without its curve or public key: convert it to PKCS#8 (openssl pkcs8 -topk8 -nocrypt -in key.pem)")
            })?;
            match curve {
                OID_P256 => Ok((Algorithm::ES256, EncodingKey::from_ec_der(&pkcs8))),
                OID_P384 => Ok((Algorithm::ES384, EncodingKey::from_ec_der(&pkcs8))),
                _ => Err(bad("an EC key on a curve other than P-256 or P-384")),
            }
        }
        "ENCRYPTED PRIVATE KEY" => Err(bad("encrypted: give the key unencrypted (file mode 0600)")),
        other => Err(bad(&format!("a PEM block {other:?}, not a private key"))),
    }
}

const OID_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const OID_EC: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
const OID_ED25519: &[u8] = &[0x2b, 0x65, 0x70];

/// The first PEM block: its label and DER bytes.
fn pem_block(pem: &str) -> Result<(String, Vec<u8>), OAuthError> {
    let bad = || OAuthError::Invalid("private_key_jwt key: no PEM block".to_string());
    let start = pem.find("-----BEGIN ").ok_or_else(bad)?;
    let rest = &pem[start + "-----BEGIN ".len()..];
    let label_end = rest.find("-----").ok_or_else(bad)?;
    let label = rest[..label_end].to_string();
    let body_start = &rest[label_end + 5..];
    let end_marker = format!("-----END {label}-----");
    let body_end = body_start.find(&end_marker).ok_or_else(bad)?;
    let b64: String = body_start[..body_end]
        .lines()
        .filter(|line| !line.contains(':')) // RFC 1421 headers (Proc-Type, DEK-Info)
        .flat_map(|line| line.chars())
        .filter(|c| !c.is_whitespace())
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| OAuthError::Invalid("private_key_jwt key: the PEM body is not base64".to_string()))?;
    Ok((label, der))
}

/// What a PKCS#8 PrivateKeyInfo says (RFC 5208 §5).
struct Pkcs8Info<'a> {
    algorithm: &'a [u8],
    parameters: Option<&'a [u8]>,
    private_key: &'a [u8],
}

fn pkcs8_info(der: &[u8]) -> Option<Pkcs8Info<'_>> {
    let (tag, info, _) = der_next(der)?;
    if tag != 0x30 {
        return None;
    }
    let (tag, _version, rest) = der_next(info)?;
    if tag != 0x02 {
        return None;
    }
    let (tag, alg, rest) = der_next(rest)?;
    if tag != 0x30 {
        return None;
    }
    let (tag, oid, params) = der_next(alg)?;
    if tag != 0x06 {
        return None;
    }
    let parameters = match der_next(params) {
        Some((0x06, oid, _)) => Some(oid),
        _ => None,
    };
    let (tag, private_key, _) = der_next(rest)?;
    if tag != 0x04 {
        return None;
    }
    Some(Pkcs8Info {
        algorithm: oid,
        parameters,
        private_key,
    })
}

/// A SEC1 ECPrivateKey (RFC 5915: version, key, `[0]` curve, `[1]` public key) as the PKCS#8
/// document ring reads: the curve moved to the algorithm identifier, the public key kept.
fn sec1_to_pkcs8(der: &[u8]) -> Option<(&[u8], Vec<u8>)> {
    let (tag, body, _) = der_next(der)?;
    if tag != 0x30 {
        return None;
    }
    let (version_tag, _, rest) = der_next(body)?;
    let version = &body[..body.len() - rest.len()];
    let (key_tag, _, mut rest) = der_next(rest)?;
    let key = &body[version.len()..body.len() - rest.len()];
    if version_tag != 0x02 || key_tag != 0x04 {
        return None;
    }
    let (mut curve, mut public) = (None, None);
    while !rest.is_empty() {
        let (tag, contents, next) = der_next(rest)?;
        match tag {
            0xa0 => {
                curve = der_next(contents)
                    .filter(|(t, _, _)| *t == 0x06)
                    .map(|(_, oid, _)| oid)
            }
            0xa1 => public = Some(&rest[..rest.len() - next.len()]),
            _ => {}
        }
        rest = next;
    }
    let (curve, public) = (curve?, public?);
    let inner = der_tlv(0x30, &[version, key, public].concat());
    let algorithm = der_tlv(0x30, &[der_tlv(0x06, OID_EC), der_tlv(0x06, curve)].concat());
    let pkcs8 = der_tlv(
        0x30,
        &[der_tlv(0x02, &[0]), algorithm, der_tlv(0x04, &inner)].concat(),
    );
    Some((curve, pkcs8))
}

/// A DER element of `tag` around `contents`.
fn der_tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = contents.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> = len.to_be_bytes().into_iter().skip_while(|b| *b == 0).collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(contents);
    out
}

/// One DER element: its tag, its contents and what follows it.
fn der_next(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let count = (first & 0x7f) as usize;
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let len = rest[..count]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | *b as usize);
        (len, &rest[count..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

#[cfg(test)]
#[path = "assertion_tests.rs"]
pub(crate) mod tests;
