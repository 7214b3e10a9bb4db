//! Per-principal policy: which exposed tool and prompt names and resource URIs a principal may see
//! and call. One function decides, for lists and calls alike, so listing never disagrees with calling.
//!
//! A principal reaches exactly the union of `allow` of the `[[policy]]` rules that apply to it,
//! minus the union of their `deny`. With no rule at all, everything is allowed; with rules of which
//! none applies, nothing is (deny by default). A rule applies when the principal matches every
//! one of its `principals` (the name is one of them), `groups` (it is in at least one) and
//! `scopes` (it holds all of them; a broader scope covers a narrower one, see `util::scope`)
//! that is given.

pub mod explain;
pub mod rate_limit;

use crate::config::{Config, PolicyRule, RateLimit};
use std::fmt;
use std::sync::Arc;

/// What policy knows of a principal, however authentication represents it: its name (a JWT's
/// `sub` or an API key's name), its groups and its granted scopes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrincipalFacts<'a> {
    pub name: &'a str,
    pub groups: Vec<&'a str>,
    pub scopes: Vec<&'a str>,
}

impl<'a> PrincipalFacts<'a> {
    pub fn new(
        name: &'a str,
        groups: impl IntoIterator<Item = &'a str>,
        scopes: impl IntoIterator<Item = &'a str>,
    ) -> PrincipalFacts<'a> {
        PrincipalFacts {
            name,
            groups: groups.into_iter().collect(),
            scopes: scopes.into_iter().collect(),
        }
    }
}

/// A principal as policy reads it, whatever type authentication gives it: a session keeps its
/// principal as one, to work out what it sees when the policy changes.
pub trait Viewer: Send + Sync {
    fn facts(&self) -> PrincipalFacts<'_>;

    /// The name of the `[[auth.api_keys]]` key it authenticated with, if it did: its groups and
    /// scopes are the configuration's, so a reload may change them before its next request.
    fn api_key(&self) -> Option<&str> {
        None
    }

    /// The name its upstream grants and per-principal upstream connections are kept under
    /// (`Principal::grant_principal`), if it is an authenticated principal.
    fn grant_principal(&self) -> Option<String> {
        None
    }
}

/// The `[[policy]]` rules of one configuration (cheap to clone; rebuild it when the
/// configuration is re-read).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    rules: Vec<PolicyRule>,
}

/// What was decided for one name, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub reason: Reason,
    /// The rules that made the decision: for [`Reason::Allowed`] each applying rule whose `allow`
    /// matched, for [`Reason::Denied`] each applying rule whose `deny` matched, for
    /// [`Reason::NotAllowed`] each applying rule (none of whose `allow` matched); empty otherwise.
    pub because: Vec<RuleMatch>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// There is no `[[policy]]` rule: everything is allowed.
    NoPolicy,
    /// No rule applies to the principal: nothing is allowed.
    NoRuleApplies,
    /// Rules apply, but no `allow` of theirs matches the name.
    NotAllowed,
    /// An applying rule allows the name and none denies it.
    Allowed,
    /// An applying rule denies the name (whichever allows it).
    Denied,
}

/// One rule's part in a decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleMatch {
    /// The rule's position in the configuration's `[[policy]]` list (0-based: `policy[0]`).
    pub rule: usize,
    /// The line of its `[[policy]]` table, and the file when that is an included one.
    pub line: usize,
    pub file: Option<Arc<str>>,
    pub effect: Effect,
    /// The first of the rule's `allow` (or `deny`) globs that matched; `None` for [`Effect::Applies`].
    pub glob: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    Allow,
    Deny,
    /// The rule applies but neither allows nor denies the name.
    Applies,
}

impl Policy {
    pub fn from_config(config: &Config) -> Policy {
        Policy::new(config.policy.clone())
    }

    pub fn new(rules: Vec<PolicyRule>) -> Policy {
        Policy { rules }
    }

    pub fn rules(&self) -> &[PolicyRule] {
        &self.rules
    }

    /// Whether there is no rule at all (everything is allowed).
    pub fn is_open(&self) -> bool {
        self.rules.is_empty()
    }

    /// The decision for one exposed tool or prompt name or resource URI.
    pub fn decide(&self, facts: &PrincipalFacts<'_>, name: &str) -> Decision {
        self.for_principal(facts).decide(name)
    }

    /// The names `facts` may see, in their order: exactly those [`Policy::decide`] allows.
    pub fn visible<'n>(
        &self,
        facts: &PrincipalFacts<'_>,
        names: impl IntoIterator<Item = &'n str>,
    ) -> Vec<&'n str> {
        let view = self.for_principal(facts);
        names.into_iter().filter(|name| view.allows(name)).collect()
    }

    /// The rules that apply to `facts`, worked out once for many decisions (a list, a request).
    pub fn for_principal(&self, facts: &PrincipalFacts<'_>) -> PrincipalView<'_> {
        let applying = (self.rules.iter().enumerate())
            .filter(|(_, rule)| applies(rule, facts))
            .map(|(i, _)| i)
            .collect();
        PrincipalView {
            policy: self,
            applying,
        }
    }
}

/// Whether `rule` applies to `facts`: every field it gives matches.
pub fn applies(rule: &PolicyRule, facts: &PrincipalFacts<'_>) -> bool {
    let name_ok = (rule.principals.as_ref()).is_none_or(|names| names.iter().any(|n| n == facts.name));
    let groups_ok =
        (rule.groups.as_ref()).is_none_or(|groups| groups.iter().any(|g| facts.groups.contains(&g.as_str())));
    let scopes_ok = (rule.scopes.as_ref())
        .is_none_or(|scopes| scopes.iter().all(|s| crate::util::scope::holds(&facts.scopes, s)));
    name_ok && groups_ok && scopes_ok
}

/// One principal's view of a [`Policy`]: the rules that apply to it.
#[derive(Clone, Debug)]
pub struct PrincipalView<'p> {
    policy: &'p Policy,
    applying: Vec<usize>,
}

impl PrincipalView<'_> {
    /// The decision for `name`; [`Policy::decide`] and [`Policy::visible`] both come here.
    pub fn decide(&self, name: &str) -> Decision {
        let rules = &self.policy.rules;
        if rules.is_empty() {
            return Decision::new(true, Reason::NoPolicy, Vec::new());
        }
        if self.applying.is_empty() {
            return Decision::new(false, Reason::NoRuleApplies, Vec::new());
        }
        let first_match = |i: usize, globs: &[crate::util::glob::Glob], effect| {
            let glob = globs.iter().find(|g| g.matches(name))?;
            Some(RuleMatch {
                rule: i,
                line: rules[i].line,
                file: rules[i].file.clone(),
                effect,
                glob: Some(glob.as_str().to_string()),
            })
        };
        let denied: Vec<RuleMatch> = (self.applying.iter())
            .filter_map(|&i| first_match(i, &rules[i].deny, Effect::Deny))
            .collect();
        if !denied.is_empty() {
            return Decision::new(false, Reason::Denied, denied);
        }
        let allowed: Vec<RuleMatch> = (self.applying.iter())
            .filter_map(|&i| first_match(i, &rules[i].allow, Effect::Allow))
            .collect();
        if !allowed.is_empty() {
            return Decision::new(true, Reason::Allowed, allowed);
        }
        let applying = (self.applying.iter())
            .map(|&i| RuleMatch {
                rule: i,
                line: rules[i].line,
                file: rules[i].file.clone(),
                effect: Effect::Applies,
                glob: None,
            })
            .collect();
        Decision::new(false, Reason::NotAllowed, applying)
    }

    /// Whether `name` is allowed: `self.decide(name).allowed`, without gathering the reasons
    /// (no allocation: every call and every listed name asks this).
    pub fn allows(&self, name: &str) -> bool {
        let rules = &self.policy.rules;
        if rules.is_empty() {
            return true;
        }
        let hit = |globs: &[crate::util::glob::Glob]| globs.iter().any(|g| g.matches(name));
        let denied = (self.applying.iter()).any(|&i| hit(&rules[i].deny));
        !denied && (self.applying.iter()).any(|&i| hit(&rules[i].allow))
    }

    /// Whether some name starting with one of `prefixes` may be allowed (an upstream's
    /// namespace: whether the principal may use anything of it at all).
    pub fn may_allow_under(&self, prefixes: &[&str]) -> bool {
        let rules = &self.policy.rules;
        if rules.is_empty() {
            return true;
        }
        let opens = |g: &crate::util::glob::Glob| prefixes.iter().any(|p| g.may_match_after(p));
        (self.applying.iter()).any(|&i| rules[i].allow.iter().any(opens))
    }

    /// The indices of the rules that apply, in file order.
    pub fn applying(&self) -> &[usize] {
        &self.applying
    }

    /// The `rate_limit` of each applying rule that has one, with the rule's index.
    pub fn rate_limits(&self) -> Vec<(usize, RateLimit)> {
        (self.applying.iter())
            .filter_map(|&i| self.policy.rules[i].rate_limit.map(|limit| (i, limit)))
            .collect()
    }

    /// Whether an applying rule says `audit_arguments = true`.
    pub fn audit_arguments(&self) -> bool {
        (self.applying.iter()).any(|&i| self.policy.rules[i].audit_arguments)
    }
}

impl Decision {
    pub fn new(allowed: bool, reason: Reason, because: Vec<RuleMatch>) -> Decision {
        Decision {
            allowed,
            reason,
            because,
        }
    }

    /// The index of the first rule that made the decision, if a rule did (for an audit line).
    pub fn rule(&self) -> Option<usize> {
        self.because.first().map(|m| m.rule)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reason::NoPolicy => "no [[policy]] rule: everything is allowed",
            Reason::NoRuleApplies => "no [[policy]] rule applies to the principal (deny by default)",
            Reason::NotAllowed => "no allow glob of the rules that apply matches (deny by default)",
            Reason::Allowed => "allowed by a rule that applies, denied by none",
            Reason::Denied => "denied by a rule that applies",
        })
    }
}

impl RuleMatch {
    /// Where the rule is written: `line 4`, or `team.toml line 4` in an included file.
    pub fn site(&self) -> String {
        crate::config::rule_site(self.file.as_deref(), self.line)
    }
}

impl fmt::Display for RuleMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "policy[{}] ({})", self.rule, self.site())?;
        match (&self.effect, &self.glob) {
            (Effect::Allow, Some(glob)) => write!(f, " allow {glob:?}"),
            (Effect::Deny, Some(glob)) => write!(f, " deny {glob:?}"),
            _ => f.write_str(" applies"),
        }
    }
}

/// A short text: the decision, then the rules that made it, e.g.
/// `denied: policy[0] (line 4) deny "everything__trigger-*"`.
impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.allowed { "allowed" } else { "denied" })?;
        if self.because.is_empty() || self.reason == Reason::NotAllowed {
            write!(f, ": {}", self.reason)?;
        }
        for (i, m) in self.because.iter().enumerate() {
            f.write_str(if i == 0 { ": " } else { ", " })?;
            write!(f, "{m}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
