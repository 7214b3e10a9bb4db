//! List/call agreement as a property, over real upstreams (server-everything and the test
//! server) and principals of three kinds (a JWT from a real authorization server, an opaque token
//! through introspection, API keys): random `[[policy]]` rule sets are put in force one after
//! another with SIGHUP, and after each, for every principal, every list holds exactly the names
//! an independent model of the rules allows, and every name of the catalog is usable exactly when
//! it is listed (a hidden one is refused exactly like one that does not exist).

use crate::auth::{mint, mint_at, start_idp};
use crate::support::mcp::RawSession;
use crate::support::serve::ServeProcess;
use crate::support::*;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const ROUNDS: usize = 30;
const SCOPES: [&str; 2] = ["mcp:tools", "mcp:write"];
const GROUPS: [&str; 4] = ["eng", "ops", "ci", "root"];

/// A principal as the rules see it, and the credential it sends.
struct Who {
    name: &'static str,
    groups: Vec<&'static str>,
    scopes: Vec<&'static str>,
    session: RawSession,
}

/// One random rule, as the test writes it and models it.
#[derive(Debug)]
struct Rule {
    principals: Option<Vec<&'static str>>,
    groups: Option<Vec<&'static str>>,
    scopes: Option<Vec<&'static str>>,
    allow: Vec<String>,
    deny: Vec<String>,
}

/// The catalog as a principal without rules sees it.
struct Catalog {
    tools: BTreeSet<String>,
    prompts: BTreeSet<String>,
    resources: BTreeSet<String>,
    templates: BTreeSet<String>,
}

impl Catalog {
    fn every_name(&self) -> Vec<&String> {
        (self.tools.iter())
            .chain(&self.prompts)
            .chain(&self.resources)
            .chain(&self.templates)
            .collect()
    }
}

/// The model: `*` any run of characters, `?` one, the rest literal (written here on its own,
/// by recursion, to check the gateway's matcher rather than reuse it).
fn glob(pattern: &[char], text: &[char]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some(('*', rest)) => (0..=text.len()).any(|i| glob(rest, &text[i..])),
        Some((c, rest)) => text
            .split_first()
            .is_some_and(|(t, more)| (*c == '?' || c == t) && glob(rest, more)),
    }
}

fn matches_any(globs: &[String], name: &str) -> bool {
    let text: Vec<char> = name.chars().collect();
    globs.iter().any(|g| glob(&g.chars().collect::<Vec<_>>(), &text))
}

/// Whether the model lets `who` see `name` under `rules` (no rule at all: everything).
fn model_allows(rules: &[Rule], who: &Who, name: &str) -> bool {
    if rules.is_empty() {
        return true;
    }
    let applying: Vec<&Rule> = (rules.iter())
        .filter(|r| r.principals.as_ref().is_none_or(|p| p.contains(&who.name)))
        .filter(|r| {
            r.groups
                .as_ref()
                .is_none_or(|g| g.iter().any(|g| who.groups.contains(g)))
        })
        .filter(|r| {
            r.scopes
                .as_ref()
                .is_none_or(|s| s.iter().all(|s| who.scopes.contains(s)))
        })
        .collect();
    applying.iter().any(|r| matches_any(&r.allow, name))
        && !applying.iter().any(|r| matches_any(&r.deny, name))
}

fn some_of(rng: &mut StdRng, from: &[&'static str]) -> Option<Vec<&'static str>> {
    if rng.random_bool(0.5) {
        return None;
    }
    let picked: Vec<&'static str> = from.iter().copied().filter(|_| rng.random_bool(0.5)).collect();
    (!picked.is_empty()).then_some(picked)
}

/// A glob made from a name of the catalog: the name, a prefix or suffix with a star, a `?` in
/// place of a character, or a lone star.
fn random_glob(rng: &mut StdRng, names: &[&String]) -> String {
    let name: Vec<char> = names.choose(rng).map(|n| n.chars().collect()).unwrap_or_default();
    let cut = rng.random_range(1..=name.len().max(1)).min(name.len());
    let text: String = match rng.random_range(0..6) {
        0 => "*".into(),
        1 => name.iter().collect(),
        2 | 3 => name[..cut].iter().chain(['*'].iter()).collect(),
        4 => ['*'].iter().chain(name[cut.saturating_sub(1)..].iter()).collect(),
        _ => {
            let mut chars = name.clone();
            if let Some(c) = chars.get_mut(cut.saturating_sub(1)) {
                *c = '?';
            }
            chars.into_iter().collect()
        }
    };
    if text.is_empty() {
        "*".into()
    } else {
        text
    }
}

fn random_rules(rng: &mut StdRng, names: &[&String]) -> Vec<Rule> {
    (0..rng.random_range(0..5))
        .map(|_| Rule {
            principals: some_of(rng, &["alice", "bob", "ci", "root"]),
            groups: some_of(rng, &GROUPS),
            scopes: some_of(rng, &SCOPES),
            allow: (0..rng.random_range(0..4))
                .map(|_| random_glob(rng, names))
                .collect(),
            deny: (0..rng.random_range(0..3))
                .map(|_| random_glob(rng, names))
                .collect(),
        })
        .collect()
}

fn toml_rules(rules: &[Rule]) -> String {
    let list = |v: &[String]| {
        format!(
            "[{}]",
            v.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ")
        )
    };
    let strs = |v: &[&str]| list(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let mut out = String::new();
    for r in rules {
        out.push_str("\n[[policy]]\n");
        if let Some(p) = &r.principals {
            out.push_str(&format!("principals = {}\n", strs(p)));
        }
        if let Some(g) = &r.groups {
            out.push_str(&format!("groups = {}\n", strs(g)));
        }
        if let Some(s) = &r.scopes {
            out.push_str(&format!("scopes = {}\n", strs(s)));
        }
        out.push_str(&format!("allow = {}\ndeny = {}\n", list(&r.allow), list(&r.deny)));
    }
    out
}

async fn listed(s: &RawSession, method: &str, field: &str, key: &str) -> BTreeSet<String> {
    let (items, _) = s.list_all(method, field).await;
    (items.iter())
        .filter_map(|i| i[key].as_str().map(str::to_string))
        .collect()
}

async fn catalog(s: &RawSession) -> Catalog {
    Catalog {
        tools: listed(s, "tools/list", "tools", "name").await,
        prompts: listed(s, "prompts/list", "prompts", "name").await,
        resources: listed(s, "resources/list", "resources", "uri").await,
        templates: listed(s, "resources/templates/list", "resourceTemplates", "uriTemplate").await,
    }
}

/// A reply's error with `name` taken out, to compare a refusal with the unknown name's.
fn error_shape(reply: &Value, name: &str) -> Value {
    serde_json::from_str(&reply["error"].to_string().replace(name, "NAME")).unwrap_or(Value::Null)
}

/// Tools that are quick and harmless with these arguments (the catalog also holds tools that
/// crash, hang or run for seconds: those are checked by listing only).
fn callable(tool: &str) -> Option<Value> {
    match tool {
        "everything__echo" => Some(json!({"message": "x"})),
        "everything__get-sum" => Some(json!({"a": 1, "b": 2})),
        "everything__get-env" | "everything__get-tiny-image" => Some(json!({})),
        t if t.starts_with("t__gen_") => Some(json!({})),
        _ => None,
    }
}

async fn open(url: &str, token: &str) -> RawSession {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match RawSession::try_open_as(url, token).await {
            Ok(session) => return session,
            Err(e) => assert!(Instant::now() < deadline, "cannot open a session: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Checks one principal under `rules`; returns how many names it could use.
async fn check(who: &Who, rules: &[Rule], all: &Catalog, round: usize) -> usize {
    let context = |what: &str| format!("round {round}, {} ({what}); rules: {rules:#?}", who.name);
    let seen = catalog(&who.session).await;
    for (kind, universe, got) in [
        ("tools", &all.tools, &seen.tools),
        ("prompts", &all.prompts, &seen.prompts),
        ("resources", &all.resources, &seen.resources),
        ("templates", &all.templates, &seen.templates),
    ] {
        let want: BTreeSet<String> = (universe.iter())
            .filter(|n| model_allows(rules, who, n))
            .cloned()
            .collect();
        assert_eq!(got, &want, "{}", context(kind));
    }
    let s = &who.session;
    let unknown_tool = s
        .call("tools/call", json!({"name": "t__no-such", "arguments": {}}))
        .await;
    let unknown_tool = error_shape(&unknown_tool, "t__no-such");
    for tool in &all.tools {
        let Some(arguments) = callable(tool) else { continue };
        let reply = s
            .call("tools/call", json!({"name": tool, "arguments": arguments}))
            .await;
        let refused = reply.get("error").is_some() && error_shape(&reply, tool) == unknown_tool;
        assert_eq!(!refused, seen.tools.contains(tool), "{}: {reply}", context(tool));
    }
    let unknown_prompt = s.call("prompts/get", json!({"name": "t__no-such"})).await;
    let unknown_prompt = error_shape(&unknown_prompt, "t__no-such");
    for prompt in &all.prompts {
        let reply = s
            .call("prompts/get", json!({"name": prompt, "arguments": {}}))
            .await;
        let refused = reply.get("error").is_some() && error_shape(&reply, prompt) == unknown_prompt;
        assert_eq!(
            !refused,
            seen.prompts.contains(prompt),
            "{}: {reply}",
            context(prompt)
        );
    }
    // A URI no upstream can serve is answered by mcpmux itself, as a hidden one is (an unlisted
    // URI of a known upstream is forwarded and answered by that upstream).
    let missing = "mcpmux://no-such-upstream/x";
    let unknown_read = error_shape(&s.call("resources/read", json!({"uri": missing})).await, missing);
    // Every resource of the test server, and a few of server-everything's hundred.
    let sample = (all.resources.iter())
        .filter(|u| u.starts_with("mcpmux://t/") || u.ends_with("/1") || u.ends_with("/2"));
    for uri in sample {
        let reply = s.call("resources/read", json!({"uri": uri})).await;
        let refused = reply.get("error").is_some() && error_shape(&reply, uri) == unknown_read;
        assert_eq!(
            !refused,
            seen.resources.contains(uri),
            "{}: {reply}",
            context(uri)
        );
    }
    seen.tools.len() + seen.prompts.len() + seen.resources.len() + seen.templates.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_and_calls_agree_for_random_rules_and_principals_of_three_kinds() {
    let _suite = crate::suite::enter(module_path!());
    let (_idp, issuer) = start_idp();
    let dir = scratch_dir("policy-property");
    let (cmd, args) = peers().everything_stdio_cmd();
    let base = format!(
        "[servers.everything]\ncommand = {cmd:?}\nargs = {}\n\n{}\n\
         [auth]\nissuer = \"{issuer}\"\nscopes_supported = [\"mcp:tools\", \"mcp:write\"]\n\
         introspection = {{ endpoint = \"{issuer}/introspect-opaque\", client_id = \"mcpmux\", client_secret = \"s3cret\" }}\n\
         [[auth.api_keys]]\nname = \"ci\"\nkey = \"ci-key-0123456789\"\ngroups = [\"ci\"]\n\
         [[auth.api_keys]]\nname = \"root\"\nkey = \"root-key-0123456789\"\ngroups = [\"root\"]\n\
         scopes = [\"mcp:tools\", \"mcp:write\"]\n",
        toml_list(&args),
        test_server_toml(
            "t",
            &["--only-generated", "--tools", "5", "--prompts", "3", "--resources", "4", "--templates", "2", "--page-size", "2"],
            None
        ),
    );
    let mut gateway = ServeProcess::start(&dir, "", &base, &dir, &[]);
    let url = gateway.url();
    let root = open(&url, "root-key-0123456789").await;
    // The whole catalog, before any rule: wait until both upstreams are in it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let all = loop {
        let all = catalog(&root).await;
        let both = |set: &BTreeSet<String>| {
            set.iter().any(|n| n.starts_with("everything__")) && set.iter().any(|n| n.starts_with("t__"))
        };
        if both(&all.tools) && both(&all.prompts) {
            break all;
        }
        assert!(
            Instant::now() < deadline,
            "upstreams not ready:\n{}",
            gateway.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let alice_token = mint(
        &issuer,
        json!({"aud": url, "sub": "alice", "scope": "mcp:tools mcp:write", "groups": ["eng"]}),
    )
    .await;
    let bob_token = mint_at(
        &issuer,
        "mint-opaque",
        json!({"aud": url, "sub": "bob", "scope": "mcp:tools", "groups": ["ops"]}),
    )
    .await;
    let everything_scope = SCOPES.to_vec();
    let people = [
        (
            "alice",
            vec!["eng"],
            everything_scope.clone(),
            open(&url, &alice_token).await,
        ),
        (
            "bob",
            vec!["ops"],
            vec!["mcp:tools"],
            open(&url, &bob_token).await,
        ),
        // An API key holds the scopes it is given: none for ci (there are no required ones).
        ("ci", vec!["ci"], vec![], open(&url, "ci-key-0123456789").await),
        ("root", vec!["root"], everything_scope, root),
    ];
    let people: Vec<Who> = (people.into_iter())
        .map(|(name, groups, scopes, session)| Who {
            name,
            groups,
            scopes,
            session,
        })
        .collect();

    let seed: u64 = std::env::var("MCPMUX_PROPERTY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("policy property: seed {seed} (MCPMUX_PROPERTY_SEED={seed} repeats this run)");
    let mut rng = StdRng::seed_from_u64(seed);
    let names: Vec<&String> = (all.every_name().into_iter())
        .filter(|n| !n.contains(',') && !n.contains('[') && !n.contains(']') && !n.contains('\\'))
        .collect();
    let base_file = std::fs::read_to_string(&gateway.config).unwrap();
    let (mut used, mut hidden) = (0, 0);
    for round in 1..=ROUNDS {
        let rules = random_rules(&mut rng, &names);
        // The round in a comment: each version of the file is told apart by its digest.
        let text = format!("{base_file}\n# round {round}\n{}", toml_rules(&rules));
        std::fs::write(&gateway.config, text).unwrap();
        gateway.signal(libc::SIGHUP);
        gateway.wait_reload("configuration reloaded").await;
        for who in &people {
            let n = check(who, &rules, &all, round).await;
            used += n;
            hidden += all.every_name().len() - n;
        }
    }
    eprintln!("policy property: seed {seed}, {ROUNDS} rule sets, {used} names visible, {hidden} hidden");
    assert!(
        used > 0 && hidden > 0,
        "the random rules never both allowed and hid something"
    );
    gateway.signal(libc::SIGTERM);
    assert!(gateway.wait_exit(Duration::from_secs(30)).await.success());
}
