//! Telemetry as a sink anything above the config may call: the metrics (names, units, help and
//! labels in [`names`]; recorded through the `metrics` facade, rendered as Prometheus text for
//! `GET /metrics`), what one host request and one upstream leg record ([`op`]), their
//! `error.type` ([`outcome`]), the access log line ([`access`]), the latest failed requests ([`recent`]), and OpenTelemetry traces (span
//! names and attribute keys, W3C trace context, spans, the OTLP/HTTP exporter). Never a token,
//! argument, principal or session id as a label or attribute.

pub mod access;
pub mod logging;
pub mod names;
pub mod op;
pub mod otlp;
pub mod otlp_proto;
pub mod outcome;
pub mod peer;
pub mod recent;
pub mod record;
pub mod series;
pub mod spans;
pub mod trace_context;
pub mod trace_names;

pub use op::{HostOp, UpstreamLeg};
pub use record::Refusal;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;
use std::time::Duration;

/// The content type of the Prometheus text exposition format 0.0.4.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How often recorded histogram samples are folded into their buckets between scrapes (keeps
/// the memory of an unscraped gateway bounded).
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Install the process's metrics recorder (once; later calls return the same handle). `None`
/// when another recorder was installed first (metrics then go there, and `/metrics` is empty).
pub fn install() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Suffix(names::DURATION_SUFFIX.into()),
                    names::DURATION_BUCKETS,
                )
                .ok()?;
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            if let Err(err) = metrics::set_global_recorder(recorder) {
                tracing::warn!(%err, "a metrics recorder was already installed; /metrics shows nothing");
                return None;
            }
            names::describe();
            Some(handle)
        })
        .as_ref()
}

/// Whether mcpmux's recorder is the process's (then metric handles may be kept: `series`).
pub fn installed() -> bool {
    HANDLE.get().is_some_and(Option::is_some)
}

/// Fold recorded samples every [`UPKEEP_EVERY`] until `stop` fires (one task per gateway).
pub async fn upkeep(stop: tokio_util::sync::CancellationToken) {
    let Some(handle) = install() else { return };
    loop {
        tokio::select! {
            _ = tokio::time::sleep(UPKEEP_EVERY) => handle.run_upkeep(),
            _ = stop.cancelled() => return,
        }
    }
}

/// The metrics in the Prometheus text format (empty without a recorder).
pub fn render() -> String {
    install().map(PrometheusHandle::render).unwrap_or_default()
}
