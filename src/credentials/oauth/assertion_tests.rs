use super::*;
use jsonwebtoken::{DecodingKey, Validation};
use ring::signature::{EcdsaKeyPair, Ed25519KeyPair, KeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

const RSA8: &str = include_str!("testdata/rsa8.pem");
const RSA1: &str = include_str!("testdata/rsa1.pem");
const EC8: &str = include_str!("testdata/ec8.pem");
const ED: &str = include_str!("testdata/ed.pem");
const SEC1: &str = include_str!("testdata/sec1.pem");

/// The public key of a test key, for verifying.
pub(crate) fn public_key(pem: &str) -> DecodingKey {
    let (label, der) = pem_block(pem).expect("pem");
    match signing_key(pem).expect("key").0 {
        Algorithm::RS256 => {
            let pair = if label == "RSA PRIVATE KEY" {
                RsaKeyPair::from_der(&der)
            } else {
                RsaKeyPair::from_pkcs8(&der)
            }
            .expect("rsa");
            DecodingKey::from_rsa_der(pair.public().as_ref())
        }
        Algorithm::ES256 => {
            let rng = ring::rand::SystemRandom::new();
            let der = if label == "EC PRIVATE KEY" {
                sec1_to_pkcs8(&der).expect("sec1").1
            } else {
                der
            };
            let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng).expect("ec");
            DecodingKey::from_ec_der(pair.public_key().as_ref())
        }
        Algorithm::EdDSA => {
            let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der).expect("ed");
            DecodingKey::from_ed_der(pair.public_key().as_ref())
        }
        other => panic!("no test key for {other:?}"),
    }
}

/// The claims of `jwt` after checking its signature with `pem`'s public key, its algorithm,
/// issuer and audience.
pub(crate) fn verified_claims(
    jwt: &str,
    pem: &str,
    alg: Algorithm,
    client_id: &str,
    audience: &str,
) -> serde_json::Value {
    let mut validation = Validation::new(alg);
    validation.set_audience(&[audience]);
    validation.set_issuer(&[client_id]);
    validation.set_required_spec_claims(&["exp", "iss", "sub", "aud"]);
    let data = jsonwebtoken::decode::<serde_json::Value>(jwt, &public_key(pem), &validation)
        .expect("a valid assertion");
    assert_eq!(data.header.alg, alg);
    data.claims
}

#[test]
fn the_algorithm_follows_the_key_type() {
    for (pem, alg) in [
        (RSA8, Algorithm::RS256),
        (RSA1, Algorithm::RS256),
        (EC8, Algorithm::ES256),
        (SEC1, Algorithm::ES256),
        (ED, Algorithm::EdDSA),
    ] {
        assert_eq!(signing_key(pem).expect("key").0, alg);
    }
}

#[test]
fn every_key_type_signs_a_verifiable_rfc_7523_assertion() {
    let audience = vec![
        "https://as.example".to_string(),
        "https://as.example/token".to_string(),
    ];
    for (pem, alg) in [
        (RSA8, Algorithm::RS256),
        (RSA1, Algorithm::RS256),
        (EC8, Algorithm::ES256),
        (SEC1, Algorithm::ES256),
        (ED, Algorithm::EdDSA),
    ] {
        let jwt = client_assertion(
            pem,
            Some("key-1"),
            "my-client",
            &audience,
            super::super::now_unix(),
        )
        .expect("signed");
        let header = jsonwebtoken::decode_header(&jwt).expect("header");
        assert_eq!(header.kid.as_deref(), Some("key-1"));
        let claims = verified_claims(&jwt, pem, alg, "my-client", "https://as.example");
        assert_eq!(claims["sub"], "my-client");
        assert_eq!(claims["aud"], serde_json::json!(audience));
        let (iat, exp) = (
            claims["iat"].as_u64().expect("iat"),
            claims["exp"].as_u64().expect("exp"),
        );
        assert_eq!(exp - iat, ASSERTION_LIFETIME_SECS);
        assert!(claims["jti"].as_str().is_some_and(|j| j.len() >= 16));
    }
}

#[test]
fn one_audience_is_a_string_and_every_jti_is_fresh() {
    let aud = vec!["https://as.example".to_string()];
    let a = client_assertion(EC8, None, "c", &aud, super::super::now_unix()).expect("a");
    let b = client_assertion(EC8, None, "c", &aud, super::super::now_unix()).expect("b");
    let (ca, cb) = (
        verified_claims(&a, EC8, Algorithm::ES256, "c", "https://as.example"),
        verified_claims(&b, EC8, Algorithm::ES256, "c", "https://as.example"),
    );
    assert_eq!(ca["aud"], "https://as.example");
    assert_ne!(ca["jti"], cb["jti"]);
    assert_eq!(jsonwebtoken::decode_header(&a).expect("header").kid, None);
}

#[test]
fn unusable_keys_are_refused_with_a_reason() {
    let err = |pem: &str| signing_key(pem).err().expect("refused").to_string();
    assert!(err("not a pem").contains("no PEM block"));
    assert!(
        err("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----").contains("not a private key")
    );
    assert!(err("-----BEGIN PRIVATE KEY-----\n!!!\n-----END PRIVATE KEY-----").contains("not base64"));
    assert!(err("-----BEGIN PRIVATE KEY-----\nMAMCAQA=\n-----END PRIVATE KEY-----").contains("PKCS#8"));
    // A well-formed key the signer rejects fails when signing, not with a panic.
    let bogus_rsa = "-----BEGIN RSA PRIVATE KEY-----\nMAMCAQA=\n-----END RSA PRIVATE KEY-----";
    assert!(client_assertion(bogus_rsa, None, "c", &["a".to_string()], 0).is_err());
}

#[test]
fn a_sec1_key_without_its_public_key_is_refused_with_a_hint() {
    // SEQUENCE { INTEGER 1, OCTET STRING (32 bytes), [0] { OID P-256 } }: no [1] public key.
    let mut der = vec![0x30, 0x31, 0x02, 0x01, 0x01, 0x04, 0x20];
    der.extend([7u8; 32]);
    der.extend([0xa0, 0x0a, 0x06, 0x08]);
    der.extend(OID_P256);
    let pem = format!(
        "-----BEGIN EC PRIVATE KEY-----\n{}\n-----END EC PRIVATE KEY-----",
        base64::engine::general_purpose::STANDARD.encode(&der)
    );
    let err = signing_key(&pem).err().expect("refused").to_string();
    assert!(err.contains("openssl pkcs8 -topk8"), "{err}");
}
