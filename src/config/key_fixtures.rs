//! Keys and a parser for the tests of the configuration's key tables (`[cluster]`, `[vault]`).

use crate::config::Config;

pub(super) const KEY_A: &str = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
pub(super) const KEY_B: &str = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=";

/// `text` parsed with `${MCPMUX_CLUSTER_KEY}` and `${MCPMUX_VAULT_KEY}` set to [`KEY_A`],
/// `${OLD}` to [`KEY_B`] and `${BAD_KEY}` to something that is no key.
pub(super) fn parse(text: &str) -> Result<Config, String> {
    let env = |var: &str| match var {
        "MCPMUX_CLUSTER_KEY" | "MCPMUX_VAULT_KEY" => Some(KEY_A.to_string()),
        "OLD" => Some(KEY_B.to_string()),
        "BAD_KEY" => Some("hunter2-is-not-a-key".to_string()),
        _ => None,
    };
    Config::from_toml_str(text, "t.toml", &env).map_err(|e| e.to_string())
}
