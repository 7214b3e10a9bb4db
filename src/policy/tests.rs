//! Tests for policy decisions: who a rule applies to, union of allow minus union of deny,
//! deny by default, no policy allows all, and a property test against a reference.

use super::*;
use crate::util::glob::Glob;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;

fn strings(items: &[&str]) -> Option<Vec<String>> {
    Some(items.iter().map(|s| s.to_string()).collect())
}

fn globs(items: &[&str]) -> Vec<Glob> {
    items.iter().map(|g| Glob::new(g).unwrap()).collect()
}

fn rule(line: usize, allow: &[&str], deny: &[&str]) -> PolicyRule {
    PolicyRule {
        line,
        file: None,
        principals: None,
        groups: None,
        scopes: None,
        allow: globs(allow),
        deny: globs(deny),
        rate_limit: None,
        audit_arguments: false,
    }
}

fn facts<'a>(name: &'a str, groups: &[&'a str], scopes: &[&'a str]) -> PrincipalFacts<'a> {
    PrincipalFacts::new(name, groups.iter().copied(), scopes.iter().copied())
}

#[test]
fn no_policy_allows_everything() {
    let policy = Policy::default();
    assert!(policy.is_open());
    let d = policy.decide(&facts("anyone", &[], &[]), "everything__trigger-x");
    assert_eq!((d.allowed, d.reason), (true, Reason::NoPolicy));
    assert!(d.because.is_empty());
    assert_eq!(
        d.to_string(),
        "allowed: no [[policy]] rule: everything is allowed"
    );
}

#[test]
fn rules_that_apply_to_nobody_deny_everything() {
    let mut only_alice = rule(1, &["*"], &[]);
    only_alice.principals = strings(&["alice"]);
    let policy = Policy::new(vec![only_alice]);
    let d = policy.decide(&facts("bob", &["eng"], &["mcp:tools"]), "everything__echo");
    assert_eq!((d.allowed, d.reason), (false, Reason::NoRuleApplies));
    assert!(policy.visible(&facts("bob", &[], &[]), ["a", "b"]).is_empty());
    assert!(
        policy
            .decide(&facts("alice", &[], &[]), "everything__echo")
            .allowed
    );
}

#[test]
fn a_rule_applies_when_every_given_field_matches() {
    let mut r = rule(4, &["everything__*"], &[]);
    r.principals = strings(&["alice", "carol"]);
    r.groups = strings(&["eng", "ops"]);
    r.scopes = strings(&["mcp:tools", "mcp:write"]);
    let policy = Policy::new(vec![r]);
    let both = ["mcp:tools", "mcp:write"];
    let allowed = |f: &PrincipalFacts<'_>| policy.decide(f, "everything__echo").allowed;
    assert!(allowed(&facts("alice", &["eng"], &both)));
    assert!(allowed(&facts(
        "carol",
        &["x", "ops"],
        &["mcp:write", "other", "mcp:tools"]
    )));
    assert!(
        !allowed(&facts("bob", &["eng"], &both)),
        "principals: the name is one of them"
    );
    assert!(
        !allowed(&facts("alice", &["sales"], &both)),
        "groups: in at least one"
    );
    assert!(!allowed(&facts("alice", &[], &both)));
    assert!(
        !allowed(&facts("alice", &["eng"], &["mcp:tools"])),
        "scopes: every one granted"
    );
    assert!(
        allowed(&facts("alice", &["eng"], &["mcp"])),
        "scopes: a broader scope covers the narrower ones"
    );
    assert!(!allowed(&facts(
        "alice",
        &["eng"],
        &["mcp:tools:read", "mcp:write"]
    )));
    assert!(
        !allowed(&facts("Alice", &["eng"], &both)),
        "names are case-sensitive"
    );
}

#[test]
fn union_of_allow_minus_union_of_deny() {
    let mut eng = rule(
        4,
        &["everything__*", "mcpmux://everything/*"],
        &["everything__trigger-*"],
    );
    eng.groups = strings(&["eng"]);
    let mut admins = rule(10, &["everything__trigger-*", "fs__*"], &[]);
    admins.groups = strings(&["admin"]);
    let mut no_write = rule(14, &[], &["fs__write_*"]);
    no_write.scopes = strings(&["readonly"]);
    let policy = Policy::new(vec![eng, admins, no_write]);
    let names = [
        "everything__echo",
        "everything__trigger-long-running-operation",
        "mcpmux://everything/demo://resource/static/document/a.md",
        "fs__read_file",
        "fs__write_file",
        "other__tool",
    ];
    let eng_only = facts("alice", &["eng"], &[]);
    assert_eq!(
        policy.visible(&eng_only, names),
        [names[0], names[2]],
        "a deny takes away what the same rule allows"
    );
    let both = facts("alice", &["eng", "admin"], &[]);
    assert_eq!(
        policy.visible(&both, names),
        [names[0], names[2], names[3], names[4]],
        "one rule's deny takes away what another allows"
    );
    let d = policy.decide(&both, names[1]);
    assert_eq!((d.allowed, d.reason), (false, Reason::Denied));
    assert_eq!(d.rule(), Some(0));
    assert_eq!(
        d.to_string(),
        "denied: policy[0] (line 4) deny \"everything__trigger-*\""
    );
    let readonly_admin = facts("root", &["admin"], &["readonly"]);
    assert_eq!(policy.visible(&readonly_admin, names), [names[1], names[3]]);
    let d = policy.decide(&readonly_admin, "fs__read_file");
    assert_eq!(d.because.len(), 1);
    assert_eq!(d.to_string(), "allowed: policy[1] (line 10) allow \"fs__*\"");
    let mut included = policy.rules().to_vec();
    included[1].file = Some("team.toml".into());
    let d = Policy::new(included).decide(&readonly_admin, "fs__read_file");
    assert_eq!(
        d.to_string(),
        "allowed: policy[1] (team.toml line 10) allow \"fs__*\"",
        "a rule from an included file is named by that file"
    );
    let d = policy.decide(&readonly_admin, "other__tool");
    assert_eq!((d.allowed, d.reason), (false, Reason::NotAllowed));
    let applying: Vec<usize> = d.because.iter().map(|m| m.rule).collect();
    assert_eq!(applying, [1, 2]);
    assert!(d
        .because
        .iter()
        .all(|m| m.effect == Effect::Applies && m.glob.is_none()));
}

#[test]
fn the_view_reports_rate_limits_and_argument_auditing_of_applying_rules() {
    let mut limited = rule(1, &["*"], &[]);
    limited.rate_limit = Some(crate::config::RateLimit::parse("10/sec").unwrap());
    limited.groups = strings(&["ci"]);
    let mut audited = rule(5, &[], &[]);
    audited.audit_arguments = true;
    audited.principals = strings(&["alice"]);
    let policy = Policy::new(vec![limited, audited]);
    let ci = policy.for_principal(&PrincipalFacts::new("bot", ["ci"], []));
    assert_eq!(ci.applying(), [0]);
    assert_eq!(ci.rate_limits().len(), 1);
    assert!(!ci.audit_arguments());
    let alice = policy.for_principal(&PrincipalFacts::new("alice", [], []));
    assert!(alice.rate_limits().is_empty() && alice.audit_arguments());
}

// ---- the property test ----

/// The reference glob: plain recursion over characters (inputs are short).
fn glob_reference(p: &[char], t: &[char]) -> bool {
    match p.split_first() {
        None => t.is_empty(),
        Some(('*', rest)) => (0..=t.len()).any(|k| glob_reference(rest, &t[k..])),
        Some(('?', rest)) => !t.is_empty() && glob_reference(rest, &t[1..]),
        Some((c, rest)) => t.first() == Some(c) && glob_reference(rest, &t[1..]),
    }
}

fn matches_any(globs: &[Glob], name: &str) -> bool {
    let t: Vec<char> = name.chars().collect();
    globs
        .iter()
        .any(|g| glob_reference(&g.as_str().chars().collect::<Vec<_>>(), &t))
}

/// The reference decision, over sets: the names reachable are the union of the applying rules'
/// allow sets minus the union of their deny sets; no rules reach everything.
fn reference_visible(
    rules: &[PolicyRule],
    who: &PrincipalFacts<'_>,
    universe: &[String],
) -> BTreeSet<String> {
    if rules.is_empty() {
        return universe.iter().cloned().collect();
    }
    let groups: BTreeSet<&str> = who.groups.iter().copied().collect();
    let scopes: BTreeSet<&str> = who.scopes.iter().copied().collect();
    let mut allowed = BTreeSet::new();
    let mut denied = BTreeSet::new();
    for r in rules {
        let name_fails = matches!(&r.principals, Some(p) if !p.contains(&who.name.to_string()));
        let group_fails = matches!(&r.groups, Some(g) if g.iter().all(|g| !groups.contains(g.as_str())));
        let scope_fails = matches!(&r.scopes, Some(s) if s.iter().any(|s| !scopes.contains(s.as_str())));
        if name_fails || group_fails || scope_fails {
            continue;
        }
        allowed.extend(universe.iter().filter(|n| matches_any(&r.allow, n)).cloned());
        denied.extend(universe.iter().filter(|n| matches_any(&r.deny, n)).cloned());
    }
    allowed.difference(&denied).cloned().collect()
}

const PEOPLE: [&str; 4] = ["alice", "bob", "ci-bot", "carol"];
const GROUPS: [&str; 3] = ["eng", "ops", "ci"];
const SCOPES: [&str; 3] = ["mcp:tools", "mcp:write", "mcp:admin"];
const PIECES: [&str; 8] = [
    "everything",
    "__",
    "fs",
    "trigger-",
    "echo",
    "mcpmux://",
    "/",
    "e",
];

fn pick<'a>(rng: &mut StdRng, from: &[&'a str]) -> Vec<&'a str> {
    from.iter().copied().filter(|_| rng.random_bool(0.4)).collect()
}

fn random_name(rng: &mut StdRng) -> String {
    (0..rng.random_range(1..5))
        .map(|_| PIECES[rng.random_range(0..PIECES.len())])
        .collect()
}

fn random_glob(rng: &mut StdRng) -> Glob {
    let mut text = String::new();
    for _ in 0..rng.random_range(1..5) {
        match rng.random_range(0..6) {
            0 | 1 => text.push('*'),
            2 => text.push('?'),
            _ => text.push_str(PIECES[rng.random_range(0..PIECES.len())]),
        }
    }
    Glob::new(&text).unwrap()
}

fn random_who(rng: &mut StdRng, from: &[&str]) -> Option<Vec<String>> {
    let picked = pick(rng, from);
    (rng.random_bool(0.5) && !picked.is_empty()).then(|| picked.iter().map(|s| s.to_string()).collect())
}

fn random_rule(rng: &mut StdRng, line: usize) -> PolicyRule {
    let mut r = rule(line, &[], &[]);
    r.principals = random_who(rng, &PEOPLE);
    r.groups = random_who(rng, &GROUPS);
    r.scopes = random_who(rng, &SCOPES);
    r.allow = (0..rng.random_range(0..4)).map(|_| random_glob(rng)).collect();
    r.deny = (0..rng.random_range(0..3)).map(|_| random_glob(rng)).collect();
    r
}

#[test]
fn visible_agrees_with_decide_and_with_a_reference() {
    let mut rng = StdRng::seed_from_u64(0x15);
    let mut outcomes = BTreeSet::new();
    for _ in 0..1500 {
        let rules: Vec<PolicyRule> = (0..rng.random_range(0..5))
            .map(|i| random_rule(&mut rng, i + 1))
            .collect();
        let policy = Policy::new(rules.clone());
        let universe: Vec<String> = (0..12).map(|_| random_name(&mut rng)).collect();
        for _ in 0..4 {
            let name = PEOPLE[rng.random_range(0..PEOPLE.len())];
            let who = PrincipalFacts::new(name, pick(&mut rng, &GROUPS), pick(&mut rng, &SCOPES));
            let visible = policy.visible(&who, universe.iter().map(String::as_str));
            let expected = reference_visible(&rules, &who, &universe);
            for n in &universe {
                let d = policy.decide(&who, n);
                outcomes.insert(format!("{:?}", d.reason));
                assert_eq!(
                    d.allowed,
                    visible.contains(&n.as_str()),
                    "visible vs decide on {n:?}"
                );
                assert_eq!(d.allowed, expected.contains(n), "{rules:?}\n{who:?} {n:?}: {d:?}");
                for m in &d.because {
                    let r = &rules[m.rule];
                    let from = match m.effect {
                        Effect::Allow => &r.allow,
                        Effect::Deny => &r.deny,
                        Effect::Applies => continue,
                    };
                    let glob = m.glob.as_deref().unwrap_or_default();
                    assert!(from.iter().any(|g| g.as_str() == glob) && matches_any(&globs(&[glob]), n));
                }
            }
        }
    }
    // The random cases reach every kind of decision (or the test proves little).
    assert_eq!(outcomes.len(), 5, "{outcomes:?}");
}

#[test]
fn an_upstream_is_reachable_only_when_an_allow_glob_can_name_something_under_its_namespace() {
    let policy = Policy::new(vec![rule(1, &["time__*", "mcpmux://docs/*", "?ira__read"], &[])]);
    let view = policy.for_principal(&facts("alice", &[], &[]));
    assert!(view.may_allow_under(&["time__", "mcpmux://time/"]));
    assert!(view.may_allow_under(&["docs__", "mcpmux://docs/"]));
    assert!(view.may_allow_under(&["jira__", "mcpmux://jira/"]));
    assert!(!view.may_allow_under(&["linear__", "mcpmux://linear/"]));
    // A rule that applies to nobody opens nothing; no policy opens everything.
    let other = Policy::new(vec![PolicyRule {
        principals: strings(&["bob"]),
        ..rule(1, &["*"], &[])
    }]);
    assert!(!other
        .for_principal(&facts("alice", &[], &[]))
        .may_allow_under(&["time__"]));
    assert!(Policy::new(Vec::new())
        .for_principal(&facts("alice", &[], &[]))
        .may_allow_under(&["x__"]));
}
