//! Telemetry sinks anything above the config may call: OpenTelemetry traces (span names and
//! attribute keys, W3C trace context, spans, the OTLP/HTTP exporter).

pub mod otlp;
pub mod otlp_proto;
pub mod spans;
pub mod trace_context;
pub mod trace_names;
