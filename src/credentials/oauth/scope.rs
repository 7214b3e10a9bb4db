//! Which scope to ask for (the MCP spec's scope selection strategy): the challenge's `scope`,
//! else the protected resource metadata's `scopes_supported`, else none (the parameter is
//! omitted); the configured scopes are always added; `offline_access` only when the
//! authorization server lists it (SEP-2207). Step-up after a 403 `insufficient_scope` asks
//! for the union of what was granted and what the challenge names, a bounded number of times.

use super::challenge::Challenge;
use super::discovery::Discovery;

/// How many step-up authorizations one request may cause after the first sign-in (so at most
/// three authorization requests in all, as the conformance suite's `scope-retry-limit` allows).
pub const MAX_STEP_UP_ATTEMPTS: u32 = 2;

/// The scope for a first authorization, `None` to omit the parameter.
pub fn choose_scope(challenge: Option<&Challenge>, d: &Discovery, configured: &[String]) -> Option<String> {
    let mut scopes: Vec<String> = match challenge.and_then(|c| c.scope.as_deref()) {
        Some(scope) => split(scope),
        None => d.scopes_supported.clone().unwrap_or_default(),
    };
    for scope in configured.iter().flat_map(|s| split(s)) {
        push_unique(&mut scopes, scope);
    }
    if scopes.is_empty() {
        return None;
    }
    let as_offers_offline = d
        .as_metadata
        .scopes_supported
        .as_ref()
        .is_some_and(|s| s.iter().any(|s| s == "offline_access"));
    if as_offers_offline {
        push_unique(&mut scopes, "offline_access".to_string());
    }
    Some(scopes.join(" "))
}

/// The scope of a step-up authorization: what was granted, plus what the challenge asks for.
pub fn step_up_scope(granted: Option<&str>, challenge: &Challenge) -> Option<String> {
    let mut scopes = granted.map(split).unwrap_or_default();
    for scope in challenge.scope.as_deref().map(split).unwrap_or_default() {
        push_unique(&mut scopes, scope);
    }
    (!scopes.is_empty()).then(|| scopes.join(" "))
}

fn split(scope: &str) -> Vec<String> {
    scope.split_whitespace().map(str::to_string).collect()
}

fn push_unique(scopes: &mut Vec<String>, scope: String) {
    if !scopes.contains(&scope) {
        scopes.push(scope);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::oauth::discovery::AsMetadata;

    fn discovery(prm_scopes: Option<&[&str]>, as_scopes: Option<&[&str]>) -> Discovery {
        let list = |s: Option<&[&str]>| s.map(|s| s.iter().map(|s| s.to_string()).collect());
        Discovery {
            resource: "http://localhost:1/mcp".into(),
            prm: None,
            issuer: "http://localhost:2".into(),
            as_metadata: AsMetadata {
                issuer: "http://localhost:2".into(),
                authorization_endpoint: None,
                token_endpoint: "http://localhost:2/token".into(),
                registration_endpoint: None,
                scopes_supported: list(as_scopes),
                token_endpoint_auth_methods_supported: None,
                code_challenge_methods_supported: None,
                grant_types_supported: None,
                client_id_metadata_document_supported: false,
                raw: None,
            },
            scopes_supported: list(prm_scopes),
        }
    }

    fn challenge(scope: Option<&str>) -> Challenge {
        Challenge {
            scope: scope.map(str::to_string),
            ..Challenge::default()
        }
    }

    #[test]
    fn the_challenge_wins_over_scopes_supported() {
        let d = discovery(Some(&["mcp:basic", "mcp:read", "mcp:write"]), None);
        assert_eq!(
            choose_scope(Some(&challenge(Some("mcp:basic"))), &d, &[]).as_deref(),
            Some("mcp:basic")
        );
        assert_eq!(
            choose_scope(Some(&challenge(None)), &d, &[]).as_deref(),
            Some("mcp:basic mcp:read mcp:write")
        );
        assert_eq!(
            choose_scope(None, &d, &[]).as_deref(),
            Some("mcp:basic mcp:read mcp:write")
        );
    }

    #[test]
    fn no_scope_anywhere_omits_the_parameter() {
        let d = discovery(None, Some(&["offline_access"]));
        assert_eq!(choose_scope(None, &d, &[]), None);
        assert_eq!(choose_scope(Some(&challenge(None)), &d, &[]), None);
    }

    #[test]
    fn configured_scopes_are_added_and_offline_access_only_when_the_as_lists_it() {
        let d = discovery(Some(&["mcp:basic"]), Some(&["mcp:basic", "offline_access"]));
        assert_eq!(
            choose_scope(None, &d, &["extra mcp:basic".to_string()]).as_deref(),
            Some("mcp:basic extra offline_access")
        );
        let d = discovery(Some(&["mcp:basic", "mcp:read"]), Some(&["mcp:basic", "mcp:read"]));
        assert_eq!(choose_scope(None, &d, &[]).as_deref(), Some("mcp:basic mcp:read"));
    }

    #[test]
    fn step_up_is_the_union_of_granted_and_challenged() {
        let c = challenge(Some("mcp:basic mcp:write"));
        assert_eq!(
            step_up_scope(Some("mcp:basic"), &c).as_deref(),
            Some("mcp:basic mcp:write")
        );
        assert_eq!(step_up_scope(None, &c).as_deref(), Some("mcp:basic mcp:write"));
        assert_eq!(step_up_scope(None, &challenge(None)), None);
    }
}
