//! Which profile a request to the main endpoint is served as: the first `[profiles.NAME]` (in
//! file order) whose `match` holds for it, a token claim of its principal or a header of the
//! request, decided per request; none: the whole catalog.

use crate::auth::Principal;
use crate::config::{Config, ProfileMatch};
use std::sync::Arc;

/// The profile a main-endpoint request is served as; `header(name)` reads a request header
/// (lower-case name).
pub fn matched<'h>(
    config: &Config,
    header: impl Fn(&str) -> Option<&'h str>,
    principal: Option<&Principal>,
) -> Option<Arc<str>> {
    let profile = (config.profiles.iter()).find(|profile| match &profile.matcher {
        None => false,
        Some(ProfileMatch::Header { name, value }) => header(name).is_some_and(|v| v.trim() == value),
        Some(ProfileMatch::Claim { claim, value }) => {
            principal.is_some_and(|p| p.claim_values(claim).contains(&value.as_str()))
        }
    })?;
    Some(Arc::from(profile.name.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        let text = r#"
[servers.a]
command = "/bin/sh"
cwd = "/"
[profiles.by-header]
path = "/mcp/h"
match = { header = "X-Mcpmux-Profile", value = "agent" }
[profiles.by-group]
path = "/mcp/g"
match = { claim = "groups", value = "agents" }
[profiles.by-tier]
path = "/mcp/t"
match = { claim = "tier", value = "gold" }
[profiles.plain]
path = "/mcp/p"
"#;
        Config::from_toml_str(text, "profiles.toml", &|_| None).unwrap()
    }

    fn principal(issuer: Option<&str>, groups: &[&str], claims: &[(&str, &[&str])]) -> Principal {
        Principal {
            name: "alice".into(),
            issuer: issuer.map(str::to_string),
            client_id: None,
            groups: groups.iter().map(|g| g.to_string()).collect(),
            scopes: Vec::new(),
            token: None,
            claims: (claims.iter())
                .map(|(n, v)| (n.to_string(), v.iter().map(|s| s.to_string()).collect()))
                .collect(),
            credential: match issuer {
                Some(_) => crate::auth::Credential::Token,
                None => crate::auth::Credential::ApiKey,
            },
            certificate: None,
        }
    }

    fn chosen(headers: &[(&str, &str)], principal: Option<&Principal>) -> Option<String> {
        let header = |name: &str| headers.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        matched(&config(), header, principal).map(|p| p.to_string())
    }

    #[test]
    fn a_header_or_a_claim_chooses_the_first_matching_profile() {
        assert_eq!(chosen(&[], None), None);
        assert_eq!(
            chosen(&[("x-mcpmux-profile", "agent")], None).as_deref(),
            Some("by-header")
        );
        assert_eq!(chosen(&[("x-mcpmux-profile", "other")], None), None);
        // An array claim holding the value, a string claim equal to it.
        let jwt = principal(Some("https://idp"), &[], &[("groups", &["dev", "agents"])]);
        assert_eq!(chosen(&[], Some(&jwt)).as_deref(), Some("by-group"));
        let gold = principal(Some("https://idp"), &[], &[("tier", &["gold"])]);
        assert_eq!(chosen(&[], Some(&gold)).as_deref(), Some("by-tier"));
        // The header's profile comes first in the file.
        assert_eq!(
            chosen(&[("x-mcpmux-profile", "agent")], Some(&jwt)).as_deref(),
            Some("by-header")
        );
        // An API key's groups are its "groups"; a token's groups from another claim are not.
        let key = principal(None, &["agents"], &[]);
        assert_eq!(chosen(&[], Some(&key)).as_deref(), Some("by-group"));
        let roles = principal(Some("https://idp"), &["agents"], &[("roles", &["agents"])]);
        assert_eq!(chosen(&[], Some(&roles)), None);
        // A value is compared whole: no prefix, no other case.
        let near = principal(
            Some("https://idp"),
            &[],
            &[("tier", &["golden"]), ("groups", &["Agents"])],
        );
        assert_eq!(chosen(&[], Some(&near)), None);
    }
}
