//! Spans in the making: the [`Tracer`] (one per gateway with `telemetry.otlp_endpoint`) starts
//! SERVER and CLIENT spans; an [`ActiveSpan`] collects its attributes and, when it ends, goes to
//! the exporter's bounded queue (a full queue drops it and counts it, never waits).

use super::otlp::{Exporter, Queued};
use super::trace_context::{new_span_id, SpanContext};
use super::trace_names::{CANCELLED, ERROR_TYPE};
use crate::config::TelemetryConfig;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What kind of span (OTLP's `SpanKind` numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// A host request mcpmux serves.
    Server = 2,
    /// A request mcpmux sends an upstream.
    Client = 3,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Str(String),
    Int(i64),
}

impl From<&str> for AttrValue {
    fn from(s: &str) -> Self {
        AttrValue::Str(s.to_string())
    }
}

impl From<String> for AttrValue {
    fn from(s: String) -> Self {
        AttrValue::Str(s)
    }
}

impl From<i64> for AttrValue {
    fn from(n: i64) -> Self {
        AttrValue::Int(n)
    }
}

/// One ended span, as the exporter sends it.
#[derive(Debug, Clone)]
pub struct SpanRecord {
    pub context: SpanContext,
    pub parent_span_id: Option<String>,
    pub name: String,
    pub kind: SpanKind,
    pub start_unix_nanos: u64,
    pub end_unix_nanos: u64,
    pub attributes: Vec<(&'static str, AttrValue)>,
    /// Other contexts this span is linked to (the HTTP request's, when `_meta` named the parent).
    pub links: Vec<SpanContext>,
    /// `Some(message)`: the span's status is ERROR.
    pub error: Option<String>,
}

/// Starts spans and hands the ended ones to the exporter.
pub struct Tracer {
    exporter: Exporter,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer").finish_non_exhaustive()
    }
}

impl Tracer {
    /// The tracer of `config`, with its exporter task running; `None` (traces off) without
    /// `otlp_endpoint`. Needs a tokio runtime.
    pub fn start(config: &TelemetryConfig) -> Option<Arc<Tracer>> {
        let url = config.traces_url()?;
        let exporter = Exporter::spawn(url, &config.service_name);
        Some(Arc::new(Tracer { exporter }))
    }

    /// A SERVER span for a host request in trace `trace_id`, child of `parent` (a span id of
    /// that trace) when the host named one.
    pub fn server(
        self: &Arc<Self>,
        name: String,
        trace: (Arc<str>, Option<Arc<str>>),
        parent: Option<String>,
    ) -> ActiveSpan {
        let (trace_id, tracestate) = trace;
        let context = SpanContext {
            trace_id,
            span_id: new_span_id(),
            flags: 1,
            tracestate,
        };
        ActiveSpan::new(self.clone(), context, parent, name, SpanKind::Server)
    }

    /// Spans dropped so far: the queue was full, or the collector did not take them.
    pub fn dropped(&self) -> u64 {
        self.exporter.dropped()
    }

    /// Send what is queued now, waiting at most `timeout`; whether it was sent (or dropped).
    pub async fn flush(&self, timeout: Duration) -> bool {
        self.exporter.flush(timeout).await
    }
}

/// A span that has started and not ended: ending it (or dropping it) queues it for export.
/// Dropped without [`ActiveSpan::end`], it ends with `error.type = cancelled`.
#[derive(Debug)]
pub struct ActiveSpan {
    tracer: Arc<Tracer>,
    record: Option<Box<SpanRecord>>,
}

impl ActiveSpan {
    fn new(
        tracer: Arc<Tracer>,
        context: SpanContext,
        parent_span_id: Option<String>,
        name: String,
        kind: SpanKind,
    ) -> Self {
        ActiveSpan {
            tracer,
            record: Some(Box::new(SpanRecord {
                context,
                parent_span_id,
                name,
                kind,
                start_unix_nanos: now_nanos(),
                end_unix_nanos: 0,
                attributes: Vec::with_capacity(8),
                links: Vec::new(),
                error: None,
            })),
        }
    }

    /// This span's context (what a child names as its parent).
    pub fn context(&self) -> Option<&SpanContext> {
        self.record.as_ref().map(|r| &r.context)
    }

    /// Set attribute `key` (one of [`super::trace_names`]).
    pub fn set(&mut self, key: &'static str, value: impl Into<AttrValue>) {
        if let Some(record) = self.record.as_mut() {
            let value = value.into();
            match record.attributes.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = value,
                None => record.attributes.push((key, value)),
            }
        }
    }

    /// Link this span to `other` (another context it relates to).
    pub fn link(&mut self, other: SpanContext) {
        if let Some(record) = self.record.as_mut() {
            record.links.push(other);
        }
    }

    /// The operation failed with `error_type` (and this message, when there is one).
    pub fn fail(&mut self, error_type: impl Into<String>, message: Option<String>) {
        let error_type = error_type.into();
        self.set(ERROR_TYPE, error_type.clone());
        if let Some(record) = self.record.as_mut() {
            record.error = Some(message.unwrap_or(error_type));
        }
    }

    /// End the span now: it goes to the export queue.
    pub fn end(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        if let Some(mut record) = self.record.take() {
            record.end_unix_nanos = now_nanos().max(record.start_unix_nanos);
            self.tracer.exporter.queue(Queued::Span(record));
        }
    }
}

impl Drop for ActiveSpan {
    fn drop(&mut self) {
        if self.record.is_some() {
            self.fail(CANCELLED, None);
            self.finish();
        }
    }
}

impl Tracer {
    /// A CLIENT span, child of `parent` (the SERVER span being served), in the same trace.
    pub fn client(self: &Arc<Self>, parent: &SpanContext, name: String) -> ActiveSpan {
        let context = SpanContext {
            span_id: new_span_id(),
            ..parent.clone()
        };
        ActiveSpan::new(
            self.clone(),
            context,
            Some(parent.span_id.clone()),
            name,
            SpanKind::Client,
        )
    }
}

fn now_nanos() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
}
