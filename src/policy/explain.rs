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

/// Who `policy explain` takes the principal to be: its groups and scopes (with what
/// `[auth.scope_implies]` makes them imply), and lines saying where they came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subject {
    pub groups: Vec<String>,
    pub scopes: Vec<String>,
    /// Printed under the verdict: that the name is an API key's, and which flag replaced what.
    pub notes: Vec<String>,
}

/// The groups and scopes of `principal` under `config`. A name that is an `[[auth.api_keys]]`
/// key's gets the key's configured groups and the scopes it holds, as the gateway gives them to
/// every request with that key; a `--groups` or `--scopes` given (`Some`) replaces that part
/// (a what-if, said in a note: the live gateway uses the configured ones). Any other name (a
/// JWT's `sub`) has exactly the groups and scopes given.
pub fn subject(
    config: &Config,
    principal: &str,
    groups: Option<&[String]>,
    scopes: Option<&[String]>,
) -> Subject {
    let auth = config.auth.as_ref();
    // The scopes the principal would hold once authenticated: `[auth.scope_implies]` applied.
    let implied = |given: &[String]| match auth {
        Some(auth) => auth.with_implied(given.to_vec()),
        None => given.to_vec(),
    };
    let Some((auth, key)) = auth.and_then(|auth| Some((auth, auth.api_key(principal)?))) else {
        return Subject {
            groups: groups.unwrap_or_default().to_vec(),
            scopes: implied(scopes.unwrap_or_default()),
            notes: Vec::new(),
        };
    };
    let (key_groups, key_scopes) = (key.groups.clone(), auth.key_scopes(key));
    let default = if key.scopes.is_none() {
        " (none given: auth.required_scopes)"
    } else {
        ""
    };
    let mut notes = vec![format!(
        "{principal} is an API key ([[auth.api_keys]] at {}): groups {}; scopes {}{default}",
        key.at,
        list(&key_groups),
        list(&key_scopes),
    )];
    let mut replaced = |flag: &str, what: &str, configured: &[String]| {
        notes.push(format!(
            "{flag} replaces the key's {what} ({}) here: the gateway gives the key its configured ones",
            list(configured)
        ));
    };
    let groups = match groups {
        Some(given) => {
            replaced("--groups", "groups", &key_groups);
            given.to_vec()
        }
        None => key_groups,
    };
    let scopes = match scopes {
        Some(given) => {
            replaced("--scopes", "scopes", &key_scopes);
            implied(given)
        }
        None => key_scopes,
    };
    Subject {
        groups,
        scopes,
        notes,
    }
}

/// Load the configuration, decide, print the explanation on stdout (a configuration error on
/// stderr), and return the exit status: [`ALLOWED`], [`DENIED`] or [`CONFIG_ERROR`].
/// `groups` and `scopes` are `None` when their flag was not given (see [`subject`]).
pub fn command(
    config: &Path,
    principal: &str,
    groups: Option<&[String]>,
    scopes: Option<&[String]>,
    name: &str,
) -> u8 {
    let config = match Config::load(config) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("error: {err}");
            return CONFIG_ERROR;
        }
    };
    let (allowed, text) = verdict(&config, principal, groups, scopes, name);
    print!("{text}");
    if allowed {
        ALLOWED
    } else {
        DENIED
    }
}

/// Whether `config`'s policy lets `principal` (with `groups` and `scopes` as [`subject`] takes
/// them) call `name`, and the explanation of that decision.
fn verdict(
    config: &Config,
    principal: &str,
    groups: Option<&[String]>,
    scopes: Option<&[String]>,
    name: &str,
) -> (bool, String) {
    let subject = subject(config, principal, groups, scopes);
    let facts = PrincipalFacts::new(
        principal,
        subject.groups.iter().map(String::as_str),
        subject.scopes.iter().map(String::as_str),
    );
    let policy = Policy::from_config(config);
    let decision = policy.decide(&facts, name);
    let text = explain(&policy, &facts, name, &decision, &subject.notes);
    (decision.allowed, text)
}

/// The explanation of `decision` (made by `policy` for `facts` and `name`), one line each:
/// `allowed` or `denied` with the name and principal, the reason, the rules that made the
/// decision (index, line, the glob that matched), then each rule that does not apply and why;
/// `notes` (where the groups and scopes came from) go under the verdict.
pub fn explain(
    policy: &Policy,
    facts: &PrincipalFacts<'_>,
    name: &str,
    decision: &Decision,
    notes: &[String],
) -> String {
    let mut out = String::new();
    let verdict = if decision.allowed { "allowed" } else { "denied" };
    let _ = writeln!(
        out,
        "{verdict}: {name:?} for principal {:?} (groups: {}; scopes: {})",
        facts.name,
        list(&facts.groups),
        list(&facts.scopes),
    );
    for note in notes {
        let _ = writeln!(out, "  {note}");
    }
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

fn list<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        let items: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
        items.join(", ")
    }
}

#[cfg(test)]
#[path = "explain_tests.rs"]
mod tests;
