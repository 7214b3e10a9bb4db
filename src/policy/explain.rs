//! `mcpmux policy explain`: the decision for one principal and one exposed name or URI, with the
//! rules that made it and why each other rule does not apply; the exit status says which.

use super::{applies, Decision, Effect, Policy, PrincipalFacts, Reason};
use crate::config::{Config, PolicyRule};
use std::fmt::Write as _;
use std::path::Path;

/// Exit status: the name is allowed.
pub const ALLOWED: u8 = 0;
/// Exit status: the name is denied.
pub const DENIED: u8 = 1;
/// Exit status: the configuration could not be read.
pub const CONFIG_ERROR: u8 = 2;

/// The values of a repeatable list option (`--groups`, `--scopes`): each may hold several items
/// separated by commas or whitespace; empty items are dropped.
pub fn split_list(values: &[String]) -> Vec<String> {
    (values.iter())
        .flat_map(|v| v.split(|c: char| c == ',' || c.is_whitespace()))
        .filter(|item| !item.is_empty())
        .map(str::to_string)
        .collect()
}

/// Load the configuration, decide, print the explanation on stdout (a configuration error on
/// stderr), and return the exit status: [`ALLOWED`], [`DENIED`] or [`CONFIG_ERROR`].
pub fn command(config: &Path, principal: &str, groups: &[String], scopes: &[String], name: &str) -> u8 {
    let config = match Config::load(config) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("error: {err}");
            return CONFIG_ERROR;
        }
    };
    // The scopes the principal would hold once authenticated: `[auth.scope_implies]` applied.
    let scopes = match &config.auth {
        Some(auth) => auth.with_implied(scopes.to_vec()),
        None => scopes.to_vec(),
    };
    let facts = PrincipalFacts::new(
        principal,
        groups.iter().map(String::as_str),
        scopes.iter().map(String::as_str),
    );
    let policy = Policy::from_config(&config);
    let decision = policy.decide(&facts, name);
    print!("{}", explain(&policy, &facts, name, &decision));
    if decision.allowed {
        ALLOWED
    } else {
        DENIED
    }
}

/// The explanation of `decision` (made by `policy` for `facts` and `name`), one line each:
/// `allowed` or `denied` with the name and principal, the reason, the rules that made the
/// decision (index, line, the glob that matched), then each rule that does not apply and why.
pub fn explain(policy: &Policy, facts: &PrincipalFacts<'_>, name: &str, decision: &Decision) -> String {
    let mut out = String::new();
    let verdict = if decision.allowed { "allowed" } else { "denied" };
    let _ = writeln!(
        out,
        "{verdict}: {name:?} for principal {:?} (groups: {}; scopes: {})",
        facts.name,
        list(&facts.groups),
        list(&facts.scopes),
    );
    let _ = writeln!(out, "  {}", decision.reason);
    let rules = policy.rules();
    for m in &decision.because {
        let rule = &rules[m.rule];
        let _ = match (&m.effect, &m.glob) {
            (Effect::Allow, Some(glob)) => {
                writeln!(out, "  policy[{}] ({}) allows it: {glob:?}", m.rule, m.site())
            }
            (Effect::Deny, Some(glob)) => {
                writeln!(out, "  policy[{}] ({}) denies it: {glob:?}", m.rule, m.site())
            }
            _ => {
                let allow: Vec<String> = rule.allow.iter().map(|g| format!("{:?}", g.as_str())).collect();
                let allow = if allow.is_empty() {
                    "nothing".to_string()
                } else {
                    allow.join(", ")
                };
                writeln!(
                    out,
                    "  policy[{}] ({}) applies but allows only: {allow}",
                    m.rule,
                    m.site()
                )
            }
        };
    }
    if decision.reason != Reason::NoPolicy {
        for (i, rule) in rules.iter().enumerate().filter(|(_, r)| !applies(r, facts)) {
            let _ = writeln!(
                out,
                "  policy[{i}] ({}) does not apply: {}",
                rule.site(),
                why_not(rule, facts)
            );
        }
    }
    out
}

/// The fields of `rule` that `facts` does not match.
fn why_not(rule: &PolicyRule, facts: &PrincipalFacts<'_>) -> String {
    let mut misses = Vec::new();
    if let Some(names) = rule
        .principals
        .as_ref()
        .filter(|n| !n.iter().any(|n| n == facts.name))
    {
        misses.push(format!(
            "principals {} do not include {:?}",
            quoted(names),
            facts.name
        ));
    }
    if let Some(groups) =
        (rule.groups.as_ref()).filter(|g| !g.iter().any(|g| facts.groups.contains(&g.as_str())))
    {
        misses.push(format!("the principal is in none of groups {}", quoted(groups)));
    }
    if let Some(scopes) = rule.scopes.as_ref() {
        let missing: Vec<String> = (scopes.iter())
            .filter(|s| !crate::util::scope::holds(&facts.scopes, s))
            .cloned()
            .collect();
        if !missing.is_empty() {
            misses.push(format!("scopes {} not granted", quoted(&missing)));
        }
    }
    misses.join("; ")
}

fn quoted(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
    format!("[{}]", items.join(", "))
}

fn list(items: &[&str]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}
