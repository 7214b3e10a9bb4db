//! The `[pinning]` table: whether upstream tool definitions are pinned (`mode`: `"off"`, the
//! default, `"warn"` or `"block"`) and where the lock file lives (`path`, relative to the
//! configuration file; default `mcpmux.lock` beside it). Both change with a reload.

use super::spanned::Spanned;
use super::{ConfigError, Ctx};
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::PathBuf;

/// The lock file when `[pinning] path` is not given, beside the configuration file.
pub const DEFAULT_LOCK_PATH: &str = "mcpmux.lock";

/// `[pinning]`: upstream tool definitions pinned on first sight, and what a change does.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPinning {
    /// "off" (the default: nothing is pinned), "warn" (a tool whose definition changed since it
    /// was pinned is logged, counted and audited) or "block" (also left out of lists, and its
    /// calls refused, until `mcpmux pins approve`). A server's tools are pinned on first sight.
    #[schemars(extend("enum" = ["off", "warn", "block"]))]
    mode: Option<Spanned<String>>,
    /// The lock file holding the pinned definitions (JSON; relative to this file). Default
    /// "mcpmux.lock" beside the configuration file.
    path: Option<Spanned<String>>,
}

/// What a changed tool definition does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PinMode {
    /// Nothing is pinned or checked.
    #[default]
    Off,
    /// Pinned on first sight; a drift is logged, counted and audited.
    Warn,
    /// As `Warn`, and a drifted tool is left out of lists and its calls refused until approved.
    Block,
}

impl PinMode {
    /// As written in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            PinMode::Off => "off",
            PinMode::Warn => "warn",
            PinMode::Block => "block",
        }
    }
}

/// `[pinning]` (its defaults when absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinningConfig {
    pub mode: PinMode,
    /// The lock file; [`super::Config::load`] makes it absolute against the folder of the file
    /// that wrote it (the default, against the configuration file's).
    pub path: PathBuf,
}

impl Default for PinningConfig {
    fn default() -> Self {
        PinningConfig {
            mode: PinMode::Off,
            path: PathBuf::from(DEFAULT_LOCK_PATH),
        }
    }
}

pub(super) fn build_pinning(ctx: &Ctx<'_>, raw: Option<&RawPinning>) -> Result<PinningConfig, ConfigError> {
    let mut pinning = PinningConfig::default();
    let Some(raw) = raw else { return Ok(pinning) };
    if let Some(value) = &raw.mode {
        pinning.mode = match ctx.expand(value, "pinning.mode")?.as_str() {
            "off" => PinMode::Off,
            "warn" => PinMode::Warn,
            "block" => PinMode::Block,
            other => {
                let msg = format!("pinning.mode must be \"off\", \"warn\" or \"block\", not {other:?}");
                return Err(ctx.invalid(&value.span(), msg));
            }
        };
    }
    if let Some(value) = &raw.path {
        let path = ctx.expand(value, "pinning.path")?;
        if path.trim().is_empty() {
            return Err(ctx.invalid(&value.span(), "pinning.path must not be empty"));
        }
        // Relative to the file that wrote it (an included one's).
        pinning.path = match ctx.sources.dir_at(value.span().start) {
            Some(dir) => super::paths::join(dir, std::path::Path::new(&path)),
            None => PathBuf::from(path),
        };
    }
    Ok(pinning)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::path::Path;

    fn parse(text: &str) -> Result<Config, String> {
        Config::from_toml_str(text, "p.toml", &|_| None).map_err(|e| e.to_string())
    }

    #[test]
    fn pinning_is_off_by_default_with_a_lock_beside_the_file() {
        let config = parse("").unwrap();
        assert_eq!(config.pinning, PinningConfig::default());
        assert_eq!(config.pinning.mode, PinMode::Off);
        let mut config = parse("[pinning]\nmode = \"warn\"\n").unwrap();
        assert_eq!(config.pinning.mode, PinMode::Warn);
        config.resolve_paths(Path::new("/etc/mcpmux"));
        assert_eq!(config.pinning.path, PathBuf::from("/etc/mcpmux/mcpmux.lock"));
    }

    #[test]
    fn a_lock_path_follows_the_file_that_wrote_it() {
        let dir = std::env::temp_dir().join(format!("mcpmux-pinning-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("mcpmux.toml");
        std::fs::write(&file, "[pinning]\nmode = \"block\"\npath = \"state/pins.lock\"\n").unwrap();
        let config = Config::load(&file).unwrap();
        let base = std::path::absolute(&dir).unwrap();
        assert_eq!(config.pinning.mode, PinMode::Block);
        assert_eq!(config.pinning.path, base.join("state/pins.lock"));
        std::fs::write(
            &file,
            "[pinning]\nmode = \"block\"\npath = \"/var/lib/pins.lock\"\n",
        )
        .unwrap();
        assert_eq!(
            Config::load(&file).unwrap().pinning.path,
            PathBuf::from("/var/lib/pins.lock")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_values_and_unknown_keys_are_refused_with_their_line() {
        let err = parse("[pinning]\n\nmode = \"strict\"\n").unwrap_err();
        assert!(
            err.contains("p.toml:3") && err.contains("\"off\", \"warn\" or \"block\""),
            "{err}"
        );
        let err = parse("[pinning]\npath = \" \"\n").unwrap_err();
        assert!(
            err.contains("p.toml:2") && err.contains("must not be empty"),
            "{err}"
        );
        let err = parse("[pinning]\nfile = \"x\"\n").unwrap_err();
        assert!(err.contains("unknown key") && err.contains("file"), "{err}");
    }
}
