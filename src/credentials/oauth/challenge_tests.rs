use super::*;

fn parse(value: &str) -> Challenge {
    parse_www_authenticate(value).unwrap_or_else(|| panic!("no Bearer challenge in {value}"))
}

#[test]
fn quoted_params_of_a_bearer_challenge() {
    let c = parse(
        r#"Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="http://localhost:3000/.well-known/oauth-protected-resource/mcp""#,
    );
    assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
    assert_eq!(c.scope.as_deref(), Some("mcp:basic mcp:write"));
    assert_eq!(
        c.resource_metadata.as_deref(),
        Some("http://localhost:3000/.well-known/oauth-protected-resource/mcp")
    );
    assert!(c.is_insufficient_scope());
}

#[test]
fn bare_values_odd_spacing_and_case() {
    let c = parse("bearer   resource_metadata=https://rs.example/prm ,SCOPE=read,error=invalid_token");
    assert_eq!(c.resource_metadata.as_deref(), Some("https://rs.example/prm"));
    assert_eq!(c.scope.as_deref(), Some("read"));
    assert_eq!(c.error.as_deref(), Some("invalid_token"));
}

#[test]
fn the_bearer_challenge_among_several_schemes() {
    let c = parse(r#"Basic realm="x, y", Bearer scope="a  b", realm="z", Negotiate abc=="#);
    assert_eq!(c.scope.as_deref(), Some("a b"));
    assert_eq!(c.resource_metadata, None);
    let c = parse(r#"Negotiate abc==, Bearer resource_metadata="https://rs/prm""#);
    assert_eq!(c.resource_metadata.as_deref(), Some("https://rs/prm"));
    // Another scheme's params after the Bearer challenge are not the Bearer's.
    let c = parse(r#"Bearer realm="r", DPoP scope="other""#);
    assert_eq!(c.scope, None);
}

#[test]
fn escapes_in_a_quoted_string_and_a_bare_bearer() {
    let c = parse(r#"Bearer error_description="say \"hi\", ok", scope="x""#);
    assert_eq!(c.scope.as_deref(), Some("x"));
    assert_eq!(parse("Bearer"), Challenge::default());
    assert_eq!(parse("Bearer scope=\"\"").scope, None);
}

#[test]
fn no_bearer_challenge_is_none() {
    assert_eq!(parse_www_authenticate(r#"Basic realm="api""#), None);
    assert_eq!(parse_www_authenticate(""), None);
    assert_eq!(parse_www_authenticate("=,=\"unterminated"), None);
}
