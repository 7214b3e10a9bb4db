//! The `[vault]` table: where upstream grants live (`path`, relative to the configuration file;
//! default `mcpmux-vault` beside it) and the keys that seal them (`key`, `previous_keys`). Keys
//! are base64 of 32 random bytes (`mcpmux keygen`), refused at their line and never echoed;
//! without `key` the vault seals with the `[cluster]` key, else with one it generates once.

use super::spanned::Spanned;
use super::{ClusterConfig, ConfigError, Ctx};
use crate::seal::ClusterKey;
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::PathBuf;

/// The vault file when `[vault] path` is not given, beside the configuration file.
pub const DEFAULT_VAULT_PATH: &str = "mcpmux-vault";

/// `[vault]`: where upstream grants live, sealed (AEAD) at rest.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawVault {
    /// The vault file (mode 0600; relative to this file). Default "mcpmux-vault" beside the
    /// configuration file.
    pub(super) path: Option<Spanned<String>>,
    /// The key that seals grants: base64 of 32 bytes (`mcpmux keygen`; write "${VAR}").
    /// Default: the [cluster] key, else a key generated once and kept in the file
    /// "<path>.key" (mode 0600).
    key: Option<Spanned<String>>,
    /// Keys that still open what they sealed (a rotation), never used to seal; a grant opened
    /// with one is sealed again with `key` on its next write.
    previous_keys: Option<Vec<Spanned<String>>>,
}

/// `[vault]` (its defaults when absent; its keys print as `***` in Debug).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VaultConfig {
    /// The vault file; [`super::Config::load`] makes it absolute against the folder of the file
    /// that wrote it (the default, against the configuration file's).
    pub path: PathBuf,
    /// `[vault] key`: seals (and opens).
    pub key: Option<ClusterKey>,
    /// `[vault] previous_keys`: open only.
    pub previous_keys: Vec<ClusterKey>,
    /// The `[cluster]` key, which seals when `key` is not given.
    pub cluster_key: Option<ClusterKey>,
    /// The `[cluster]` previous keys, which open when the cluster key seals.
    pub cluster_previous_keys: Vec<ClusterKey>,
    /// `[cluster] store`: the records live there instead of in `path` (every replica shares them).
    pub store: Option<crate::util::secret_url::SecretUrl>,
}

impl Default for VaultConfig {
    fn default() -> Self {
        VaultConfig {
            path: PathBuf::from(DEFAULT_VAULT_PATH),
            key: None,
            previous_keys: Vec::new(),
            cluster_key: None,
            cluster_previous_keys: Vec::new(),
            store: None,
        }
    }
}

pub(super) fn build_vault(
    ctx: &Ctx<'_>,
    raw: Option<&RawVault>,
    cluster: Option<&ClusterConfig>,
) -> Result<VaultConfig, ConfigError> {
    let mut vault = VaultConfig {
        cluster_key: cluster.map(|c| c.key.clone()),
        cluster_previous_keys: cluster.map(|c| c.previous_keys.clone()).unwrap_or_default(),
        store: cluster.and_then(|c| c.store.clone()),
        ..VaultConfig::default()
    };
    let Some(raw) = raw else {
        return Ok(vault);
    };
    if let Some(value) = &raw.path {
        let path = ctx.expand(value, "vault.path")?;
        if path.trim().is_empty() {
            return Err(ctx.invalid(&value.span(), "vault.path must not be empty"));
        }
        // Relative to the file that wrote it (an included one's).
        vault.path = match ctx.sources.dir_at(value.span().start) {
            Some(dir) => super::paths::join(dir, std::path::Path::new(&path)),
            None => PathBuf::from(path),
        };
    }
    if let Some(value) = &raw.key {
        vault.key = Some(super::cluster::cluster_key(ctx, value, "vault.key")?);
    }
    for (i, value) in raw.previous_keys.iter().flatten().enumerate() {
        let name = format!("vault.previous_keys[{i}]");
        vault
            .previous_keys
            .push(super::cluster::cluster_key(ctx, value, &name)?);
    }
    Ok(vault)
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::seal::ClusterKey;
    use std::path::{Path, PathBuf};

    use super::super::key_fixtures::{parse, KEY_A, KEY_B};

    #[test]
    fn the_vault_table_as_the_issue_writes_it() {
        let config = parse(
            "[vault]\npath = \"grants/vault\"\nkey = \"${MCPMUX_VAULT_KEY}\"\nprevious_keys = [\"${OLD}\"]\n",
        )
        .unwrap();
        let vault = config.vault;
        assert_eq!(vault.path, PathBuf::from("grants/vault"));
        assert_eq!(vault.key, Some(ClusterKey::parse(KEY_A).unwrap()));
        assert_eq!(vault.previous_keys, vec![ClusterKey::parse(KEY_B).unwrap()]);
        assert_eq!(vault.cluster_key, None);
        let shown = format!("{vault:?}");
        assert!(!shown.contains(KEY_A) && !shown.contains(KEY_B), "{shown}");
    }

    #[test]
    fn without_the_table_the_vault_is_beside_the_config_and_takes_the_cluster_key() {
        let config = parse("").unwrap();
        assert_eq!(config.vault.path, PathBuf::from(super::DEFAULT_VAULT_PATH));
        assert_eq!(config.vault.key, None);
        assert_eq!(config.vault.cluster_key, None);
        let clustered = parse(&format!(
            "[cluster]\nkey = \"{KEY_A}\"\nprevious_keys = [\"{KEY_B}\"]\n"
        ))
        .unwrap();
        assert_eq!(
            clustered.vault.cluster_key,
            Some(ClusterKey::parse(KEY_A).unwrap())
        );
        assert_eq!(
            clustered.vault.cluster_previous_keys,
            vec![ClusterKey::parse(KEY_B).unwrap()]
        );
        // Paths follow the configuration file, the default one too.
        let mut config = parse("").unwrap();
        config.resolve_paths(Path::new("/etc/mcpmux"));
        assert_eq!(config.vault.path, PathBuf::from("/etc/mcpmux/mcpmux-vault"));
        let mut config = parse("[vault]\npath = \"/var/lib/mcpmux/vault\"\n").unwrap();
        config.resolve_paths(Path::new("/etc/mcpmux"));
        assert_eq!(config.vault.path, PathBuf::from("/var/lib/mcpmux/vault"));
    }

    #[test]
    fn a_vault_path_in_a_loaded_file_follows_that_file() {
        let dir = std::env::temp_dir().join(format!("mcpmux-vault-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("m.toml");
        std::fs::write(&file, "[vault]\npath = \"state/v\"\n").unwrap();
        let config = Config::load(&file).unwrap();
        let base = std::path::absolute(&dir).unwrap();
        assert_eq!(config.vault.path, base.join("state/v"));
        std::fs::write(&file, "").unwrap();
        assert_eq!(Config::load(&file).unwrap().vault.path, base.join("mcpmux-vault"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_bad_key_is_refused_at_its_line_without_echoing_it() {
        let err = parse("[vault]\n\nkey = \"${BAD_KEY}\"\n").unwrap_err();
        assert!(err.starts_with("t.toml:3: vault.key is not base64"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
        let short = "AQEBAQEBAQEBAQEBAQEBAQ==";
        let err = parse(&format!("[vault]\nprevious_keys = [\n  \"{short}\"]\n")).unwrap_err();
        assert!(
            err.starts_with("t.toml:3: vault.previous_keys[0] is base64 of 16 bytes"),
            "{err}"
        );
        assert!(!err.contains(short), "{err}");
        let err = parse("[vault]\nkey = \"${UNSET_KEY}\"\n").unwrap_err();
        assert!(err.contains("UNSET_KEY") && err.contains("vault.key"), "{err}");
        let err = parse("[vault]\npath = \"\"\n").unwrap_err();
        assert!(err.starts_with("t.toml:2: vault.path must not be empty"), "{err}");
        let err = parse("[vault]\nsecret = 1\n").unwrap_err();
        assert!(err.contains("unknown key `secret`"), "{err}");
    }
}
