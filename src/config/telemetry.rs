//! The `[telemetry]` table, tracing part: where spans are exported (`otlp_endpoint`, an OTLP/HTTP
//! collector's base URL; traces are off without it) and the `service.name` they carry.

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
    /// An OpenTelemetry collector's OTLP/HTTP base URL (e.g. "http://127.0.0.1:4318"); spans are
    /// posted to its /v1/traces. Traces are off without it.
    otlp_endpoint: Option<Spanned<String>>,
    /// The service.name resource attribute of every span. Default "mcpmux".
    service_name: Option<Spanned<String>>,
}

/// `[telemetry]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// The collector's OTLP/HTTP base URL (`http://127.0.0.1:4318`); spans are posted to its
    /// `/v1/traces`. `None`: no spans are made.
    pub otlp_endpoint: Option<url::Url>,
    /// The `service.name` resource attribute of every span.
    pub service_name: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
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

pub(super) fn build_telemetry(
    ctx: &Ctx<'_>,
    raw: Option<&RawTelemetry>,
) -> Result<TelemetryConfig, ConfigError> {
    let Some(raw) = raw else {
        return Ok(TelemetryConfig::default());
    };
    let otlp_endpoint = match &raw.otlp_endpoint {
        Some(value) => {
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
            Some(url)
        }
        None => None,
    };
    let service_name = match &raw.service_name {
        Some(value) => {
            let name = ctx.expand(value, "telemetry.service_name")?;
            if name.trim().is_empty() {
                return Err(ctx.invalid(&value.span(), "telemetry.service_name must not be empty"));
            }
            name
        }
        None => DEFAULT_SERVICE_NAME.to_string(),
    };
    Ok(TelemetryConfig {
        otlp_endpoint,
        service_name,
    })
}

#[cfg(test)]
mod tests {
    use crate::Config;

    fn from_toml(text: &str) -> Result<Config, crate::config::ConfigError> {
        Config::from_toml_str(text, "config.toml", &|_| None)
    }

    #[test]
    fn telemetry_keys_parse_with_defaults_and_bad_values_name_their_line() {
        let plain = from_toml("").unwrap();
        assert_eq!(plain.telemetry.otlp_endpoint, None);
        assert_eq!(plain.telemetry.service_name, "mcpmux");
        assert_eq!(plain.telemetry.traces_url(), None);

        let set =
            from_toml("[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318\"\nservice_name = \"edge\"\n")
                .unwrap();
        assert_eq!(
            set.telemetry.traces_url().map(|u| u.to_string()).as_deref(),
            Some("http://127.0.0.1:4318/v1/traces")
        );
        assert_eq!(set.telemetry.service_name, "edge");

        let err = from_toml("[telemetry]\notlp_endpoint = \"grpc://x:4317\"\n").unwrap_err();
        assert!(err.to_string().contains(":2:"), "{err}");
        let err = from_toml("[telemetry]\nsampling = 1\n").unwrap_err();
        assert!(err.to_string().contains("unknown key"), "{err}");
    }
}
