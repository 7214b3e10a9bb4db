//! The OTLP/HTTP span exporter: ended spans wait in a bounded queue (a full queue drops and
//! counts, never blocks a request); one task sends them in batches as OTLP JSON to
//! `{otlp_endpoint}/v1/traces`. A collector that is down or slow costs the spans it did not
//! take (counted) and one warning, then at most one a minute.

use super::spans::SpanRecord;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// Spans that may wait for export; beyond this they are dropped.
pub const QUEUE_SIZE: usize = 2048;
/// Spans sent in one request at most.
pub const MAX_BATCH: usize = 512;
/// How long spans wait for a batch to fill before they are sent anyway.
pub const BATCH_DELAY: Duration = Duration::from_secs(1);
/// How long one export request may take (a slow collector fills the queue meanwhile).
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// After the first warning about dropped spans, at most one per this period.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// What the exporter task receives.
pub enum Queued {
    Span(Box<SpanRecord>),
    /// Send what is queued, then answer.
    Flush(oneshot::Sender<()>),
}

/// The queue's sending side, and the dropped-span count.
pub struct Exporter {
    queue: mpsc::Sender<Queued>,
    drops: Arc<Drops>,
}

/// Spans dropped, and when that was last said in the log.
#[derive(Default)]
struct Drops {
    count: AtomicU64,
    /// Dropped since the last warning.
    unreported: AtomicU64,
    last_warning: Mutex<Option<Instant>>,
}

impl Drops {
    fn add(&self, n: u64, why: &str) {
        self.count.fetch_add(n, Ordering::Relaxed);
        self.unreported.fetch_add(n, Ordering::Relaxed);
        let mut last = self.last_warning.lock();
        if last.is_some_and(|at| at.elapsed() < WARN_EVERY) {
            return;
        }
        *last = Some(Instant::now());
        drop(last);
        let dropped = self.unreported.swap(0, Ordering::Relaxed);
        tracing::warn!(
            dropped,
            total_dropped = self.count.load(Ordering::Relaxed),
            "trace spans dropped: {why} (this warning repeats at most once a minute)"
        );
    }
}

impl Exporter {
    /// Start the task that posts to `url` (the collector's `/v1/traces`).
    pub fn spawn(url: url::Url, service_name: &str) -> Exporter {
        let (queue, received) = mpsc::channel(QUEUE_SIZE);
        let drops = Arc::new(Drops::default());
        let client = reqwest::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .connect_timeout(EXPORT_TIMEOUT)
            .build()
            .unwrap_or_default();
        let sender = Sender {
            client,
            url,
            service_name: service_name.to_string(),
            drops: drops.clone(),
        };
        tokio::spawn(sender.run(received));
        Exporter { queue, drops }
    }

    /// Queue a span; a full queue (or a stopped exporter) drops it and counts it.
    pub fn queue(&self, item: Queued) {
        if self.queue.try_send(item).is_err() {
            self.drops
                .add(1, "the export queue is full (the collector is slow or down)");
        }
    }

    /// Spans dropped so far.
    pub fn dropped(&self) -> u64 {
        self.drops.count.load(Ordering::Relaxed)
    }

    /// Send what is queued, waiting at most `timeout`.
    pub async fn flush(&self, timeout: Duration) -> bool {
        let (done, answered) = oneshot::channel();
        let asked = async { self.queue.send(Queued::Flush(done)).await.is_ok() && answered.await.is_ok() };
        tokio::time::timeout(timeout, asked).await.unwrap_or(false)
    }
}

/// The exporter task's state.
struct Sender {
    client: reqwest::Client,
    url: url::Url,
    service_name: String,
    drops: Arc<Drops>,
}

impl Sender {
    async fn run(self, mut received: mpsc::Receiver<Queued>) {
        let mut batch: Vec<SpanRecord> = Vec::with_capacity(MAX_BATCH);
        let mut tick = tokio::time::interval(BATCH_DELAY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                item = received.recv() => match item {
                    Some(Queued::Span(span)) => {
                        batch.push(*span);
                        if batch.len() >= MAX_BATCH {
                            self.send(&mut batch).await;
                        }
                    }
                    Some(Queued::Flush(done)) => {
                        self.send(&mut batch).await;
                        let _ = done.send(());
                    }
                    None => {
                        self.send(&mut batch).await;
                        return;
                    }
                },
                _ = tick.tick() => self.send(&mut batch).await,
            }
        }
    }

    /// Post `batch` (emptying it); what the collector does not take is dropped and counted.
    async fn send(&self, batch: &mut Vec<SpanRecord>) {
        if batch.is_empty() {
            return;
        }
        let body = super::otlp_proto::encode(&self.service_name, batch);
        let count = batch.len() as u64;
        batch.clear();
        let sent = self
            .client
            .post(self.url.clone())
            .header(http::header::CONTENT_TYPE, "application/x-protobuf")
            .body(body)
            .send()
            .await;
        match sent {
            Ok(response) if response.status().is_success() => {}
            Ok(response) => {
                let why = format!("the collector answered {}", response.status());
                self.drops.add(count, &why);
            }
            Err(err) => {
                let why = format!("the collector at {} is unreachable ({err})", self.url);
                self.drops.add(count, &why);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::spans::SpanKind;
    use crate::telemetry::trace_context::SpanContext;

    fn record() -> Box<SpanRecord> {
        Box::new(SpanRecord {
            context: SpanContext::from_headers(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                Some("a=1"),
            )
            .unwrap(),
            parent_span_id: Some("1111111111111111".into()),
            name: "tools/call echo".into(),
            kind: SpanKind::Client,
            start_unix_nanos: 1,
            end_unix_nanos: 2,
            attributes: vec![
                ("mcp.method.name", "tools/call".into()),
                ("server.port", 80.into()),
            ],
            links: Vec::new(),
            error: Some("-32601".into()),
        })
    }

    #[tokio::test]
    async fn an_unreachable_collector_costs_a_count_not_a_wait() {
        // A port nothing listens on: bound, then closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = url::Url::parse(&format!("http://127.0.0.1:{port}/v1/traces")).unwrap();
        let exporter = Exporter::spawn(url, "test");
        for _ in 0..3 {
            exporter.queue(Queued::Span(record()));
        }
        assert!(exporter.flush(Duration::from_secs(10)).await);
        assert_eq!(exporter.dropped(), 3);
    }
}
