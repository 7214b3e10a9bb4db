//! The `[telemetry]` table: how logs are written (`log_format`: `"text"`, the default, or
//! `"json"`, one JSON object a line), the access log (`access_log`: one line per host request, on
//! by default), and where spans are exported (`otlp_endpoint`, an OTLP/HTTP collector's base URL;
//! traces are off without it) with the `service.name` they carry.

use super::spanned::Spanned;
use super::{ConfigError, Ctx};
use schemars::JsonSchema;
use serde::Deserialize;

/// `service.name` when `service_name` is not given.
pub const DEFAULT_SERVICE_NAME: &str = "mcpmux";

/// `[telemetry]`: what mcpmux reports of its work.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTelemetry {
    /// How log lines are written to stderr: "text" (the default; coloured only on a terminal) or
    /// "json" (one JSON object a line). Changing it takes a restart.
    #[schemars(extend("enum" = ["text", "json"]))]
    log_format: Option<Spanned<String>>,
    /// One INFO line per host request under the target mcpmux::access (method, exposed name,
    /// upstream, duration, outcome, session, principal, client, trace id). Default true.
    access_log: Option<Spanned<bool>>,
    /// An OpenTelemetry collector's OTLP/HTTP base URL (e.g. "http://127.0.0.1:4318"); spans are
    /// posted to its /v1/traces. Traces are off without it.
    otlp_endpoint: Option<Spanned<String>>,
    /// The service.name resource attribute of every span. Default "mcpmux".
    service_name: Option<Spanned<String>>,
}

/// `[telemetry]` (its defaults when the table is absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TelemetryConfig {
    pub log_format: LogFormat,
    /// One INFO line per host request under the `mcpmux::access` target (`RUST_LOG` still
    /// filters it).
    pub access_log: bool,
    /// The collector's OTLP/HTTP base URL (`http://127.0.0.1:4318`); spans are posted to its
    /// `/v1/traces`. `None`: no spans are made.
    pub otlp_endpoint: Option<url::Url>,
    /// The `service.name` resource attribute of every span.
    pub service_name: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            log_format: LogFormat::Text,
            access_log: true,
            otlp_endpoint: None,
            service_name: DEFAULT_SERVICE_NAME.to_string(),
        }
    }
}

impl TelemetryConfig {
    /// Where spans are posted: the endpoint's `/v1/traces` (a path the endpoint already has is
    /// kept in front of it).
    pub fn traces_url(&self) -> Option<url::Url> {
        let base = self.otlp_endpoint.as_ref()?;
        let path = format!("{}/v1/traces", base.path().trim_end_matches('/'));
        let mut url = base.clone();
        url.set_path(&path);
        Some(url)
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
    if let Some(value) = &raw.otlp_endpoint {
        let text = ctx.expand(value, "telemetry.otlp_endpoint")?;
        let url = url::Url::parse(&text).map_err(|err| {
            ctx.invalid(
                &value.span(),
                format!("telemetry.otlp_endpoint {text:?} is not a URL ({err})"),
            )
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ctx.invalid(
                &value.span(),
                "telemetry.otlp_endpoint must be an http:// or https:// URL (OTLP/HTTP)",
            ));
        }
        telemetry.otlp_endpoint = Some(url);
    }
    if let Some(value) = &raw.service_name {
        let name = ctx.expand(value, "telemetry.service_name")?;
        if name.trim().is_empty() {
            return Err(ctx.invalid(&value.span(), "telemetry.service_name must not be empty"));
        }
        telemetry.service_name = name;
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
    fn defaults_are_text_with_an_access_log_and_no_traces() {
        let config = load("").unwrap();
        assert_eq!(config.telemetry, TelemetryConfig::default());
        assert_eq!(config.telemetry.log_format, LogFormat::Text);
        assert!(config.telemetry.access_log);
        assert_eq!(config.telemetry.otlp_endpoint, None);
        assert_eq!(config.telemetry.service_name, "mcpmux");
        assert_eq!(config.telemetry.traces_url(), None);
    }

    #[test]
    fn json_and_no_access_log() {
        let config = load("[telemetry]\nlog_format = \"json\"\naccess_log = false\n").unwrap();
        assert_eq!(config.telemetry.log_format, LogFormat::Json);
        assert!(!config.telemetry.access_log);
    }

    #[test]
    fn an_otlp_endpoint_gives_the_traces_url_and_a_service_name() {
        let set = load("[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318\"\nservice_name = \"edge\"\n")
            .unwrap();
        assert_eq!(
            set.telemetry.traces_url().map(|u| u.to_string()).as_deref(),
            Some("http://127.0.0.1:4318/v1/traces")
        );
        assert_eq!(set.telemetry.service_name, "edge");
    }

    #[test]
    fn bad_values_and_unknown_keys_are_refused_with_their_line() {
        let err = load("[telemetry]\n\nlog_format = \"xml\"\n").unwrap_err();
        assert!(
            err.contains(":3") && err.contains("\"text\" or \"json\""),
            "{err}"
        );
        let err = load("[telemetry]\notlp_endpoint = \"grpc://x:4317\"\n").unwrap_err();
        assert!(err.contains(":2:") && err.contains("OTLP/HTTP"), "{err}");
        let err = load("[telemetry]\nservice_name = \" \"\n").unwrap_err();
        assert!(err.contains(":2:") && err.contains("must not be empty"), "{err}");
        let err = load("[telemetry]\nlog_colour = true\n").unwrap_err();
        assert!(err.contains("unknown key") && err.contains("log_colour"), "{err}");
    }
}
