//! An API key holds the scopes it is given (by default `required_scopes`), no more: a
//! `[[policy]]` rule or an `[[auth.step_up]]` asking for another scope refuses it.

use super::*;
use crate::policy::{Policy, PrincipalFacts, Reason};

const BOT: &str = "bot-key-1";
const READER: &str = "reader-key-2";

/// The set-up: ci-bot has groups only; reader is given `mcp:read`.
fn config(extra: &str) -> Config {
    let text = format!(
        "[auth]\nscopes_supported = [\"mcp:tools\", \"mcp:read\", \"mcp:write\"]\nrequired_scopes = [\"mcp:tools\"]\n\
         [[auth.api_keys]]\nname = \"ci-bot\"\nkey = \"{BOT}\"\ngroups = [\"ci\"]\n\
         [[auth.api_keys]]\nname = \"reader\"\nkey = \"{READER}\"\ngroups = [\"ci\"]\nscopes = [\"mcp:tools\", \"mcp:read\"]\n\
         [[auth.step_up]]\ntools = [\"fs__write_*\"]\nscopes = [\"mcp:write\"]\n\
         [[policy]]\nscopes = [\"mcp:read\"]\nallow = [\"everything__get-tiny-image\"]\n{extra}"
    );
    Config::from_toml_str(&text, "t.toml", &|_| None).unwrap()
}

async fn principal(auth: &Authenticator, key: &str) -> Arc<Principal> {
    auth.verify(key).await.unwrap()
}

fn decide(policy: &Policy, principal: &Principal, name: &str) -> crate::policy::Decision {
    let facts = PrincipalFacts::new(
        &principal.name,
        principal.groups.iter().map(String::as_str),
        principal.scopes.iter().map(String::as_str),
    );
    policy.decide(&facts, name)
}

#[tokio::test]
async fn a_key_without_scopes_holds_only_the_required_ones_and_is_admitted() {
    let c = config("");
    let auth = Authenticator::from_config(&c).unwrap();
    let bot = principal(&auth, BOT).await;
    assert_eq!(bot.scopes, ["mcp:tools"]);
    assert!(auth.check_required(&bot).is_ok(), "the default admits the key");
    let reader = principal(&auth, READER).await;
    assert_eq!(reader.scopes, ["mcp:tools", "mcp:read"]);
}

#[tokio::test]
async fn a_policy_rule_for_a_scope_does_not_apply_to_a_key_lacking_it() {
    let c = config("");
    let auth = Authenticator::from_config(&c).unwrap();
    let policy = Policy::from_config(&c);
    let bot = principal(&auth, BOT).await;
    let refused = decide(&policy, &bot, "everything__get-tiny-image");
    assert!(!refused.allowed);
    assert_eq!(refused.reason, Reason::NoRuleApplies);
    let reader = principal(&auth, READER).await;
    assert!(decide(&policy, &reader, "everything__get-tiny-image").allowed);
}

#[tokio::test]
async fn step_up_refuses_a_key_lacking_the_scope_and_passes_one_given_it() {
    let c = config("");
    let auth = Authenticator::from_config(&c).unwrap();
    let bot = principal(&auth, BOT).await;
    assert_eq!(
        auth.step_up(&bot, "fs__write_file"),
        Some(vec!["mcp:tools".to_string(), "mcp:write".to_string()])
    );
    let c = config(
        "[[auth.api_keys]]\nname = \"writer\"\nkey = \"w-3\"\nscopes = [\"mcp:tools\", \"mcp:write\"]\n",
    );
    let auth = Authenticator::from_config(&c).unwrap();
    let writer = principal(&auth, "w-3").await;
    assert_eq!(auth.step_up(&writer, "fs__write_file"), None);
    assert_eq!(
        auth.step_up(&*principal(&auth, READER).await, "fs__write_file"),
        Some(vec!["mcp:tools".to_string(), "mcp:write".to_string()]),
        "mcp:read is not mcp:write"
    );
}

#[tokio::test]
async fn a_keys_scopes_imply_what_scope_implies_says_and_nothing_else() {
    let c = config(
        "[[auth.api_keys]]\nname = \"ops\"\nkey = \"o-4\"\nscopes = [\"mcp:admin\"]\n\
         [auth.scope_implies]\n\"mcp:admin\" = [\"mcp:tools\", \"mcp:read\"]\n",
    );
    let auth = Authenticator::from_config(&c).unwrap();
    let ops = principal(&auth, "o-4").await;
    assert_eq!(ops.scopes, ["mcp:admin", "mcp:read", "mcp:tools"]);
    assert!(decide(&Policy::from_config(&c), &ops, "everything__get-tiny-image").allowed);
    assert!(
        auth.step_up(&ops, "fs__write_file").is_some(),
        "mcp:admin implies no mcp:write here"
    );
}
