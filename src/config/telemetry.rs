//! The `[telemetry]` table's logging keys: `log_format` (`"text"`, the default, or `"json"`: one
//! JSON object a line) and `access_log` (one line per host request; on by default).

use super::{ConfigError, Ctx};
use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTelemetry {
    log_format: Option<Spanned<String>>,
    access_log: Option<Spanned<bool>>,
}

/// `[telemetry]` (its defaults when the table is absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TelemetryConfig {
    pub log_format: LogFormat,
    /// One INFO line per host request under the `mcpmux::access` target (`RUST_LOG` still
    /// filters it).
    pub access_log: bool,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            log_format: LogFormat::Text,
            access_log: true,
        }
    }
}

/// How log lines are written to stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable; coloured only when stderr is a terminal.
    #[default]
    Text,
    /// One JSON object a line.
    Json,
}

pub(super) fn build_telemetry(
    ctx: &Ctx<'_>,
    raw: Option<&RawTelemetry>,
) -> Result<TelemetryConfig, ConfigError> {
    let mut telemetry = TelemetryConfig::default();
    let Some(raw) = raw else { return Ok(telemetry) };
    if let Some(format) = &raw.log_format {
        telemetry.log_format = match ctx.expand(format, "telemetry.log_format")?.as_str() {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => {
                let msg = format!("telemetry.log_format must be \"text\" or \"json\", not {other:?}");
                return Err(ctx.invalid(&format.span(), msg));
            }
        };
    }
    if let Some(access_log) = &raw.access_log {
        telemetry.access_log = *access_log.get_ref();
    }
    Ok(telemetry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn load(text: &str) -> Result<Config, String> {
        Config::from_toml_str(text, "t.toml", &|_| None).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_text_with_an_access_log() {
        let config = load("").unwrap();
        assert_eq!(config.telemetry, TelemetryConfig::default());
        assert_eq!(config.telemetry.log_format, LogFormat::Text);
        assert!(config.telemetry.access_log);
    }

    #[test]
    fn json_and_no_access_log() {
        let config = load("[telemetry]\nlog_format = \"json\"\naccess_log = false\n").unwrap();
        assert_eq!(config.telemetry.log_format, LogFormat::Json);
        assert!(!config.telemetry.access_log);
    }

    #[test]
    fn an_unknown_format_or_key_is_refused_with_its_line() {
        let err = load("[telemetry]\n\nlog_format = \"xml\"\n").unwrap_err();
        assert!(
            err.contains(":3") && err.contains("\"text\" or \"json\""),
            "{err}"
        );
        let err = load("[telemetry]\nlog_colour = true\n").unwrap_err();
        assert!(err.contains("unknown key") && err.contains("log_colour"), "{err}");
    }
}
