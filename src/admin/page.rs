//! The admin page (`GET /admin`): a read-only view of the upstreams, sessions, catalog (each
//! tool's schema) and recent errors, kept live by a server-sent event stream
//! (`GET /admin/events`: the overview every second, the catalog whenever it changes). Plain
//! HTML, CSS and JavaScript served from the binary (no build step); a strict Content Security
//! Policy, and every text from upstreams or hosts is put in the page as text, never as markup.

use super::feed;
use crate::core::hub::Hub;
use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use futures_util::StreamExt;
use http::{header, HeaderValue, StatusCode};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const PAGE_PATH: &str = "/admin";
pub const EVENTS_PATH: &str = "/admin/events";
const SCRIPT_PATH: &str = "/admin/app.js";
const STYLE_PATH: &str = "/admin/app.css";

/// How often the overview is sent.
pub const REFRESH: Duration = Duration::from_secs(1);
/// Admin event streams open at once; beyond, a new one is refused with 503.
pub const MAX_STREAMS: usize = 16;

const PAGE: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/app.js");
const STYLE: &str = include_str!("page/app.css");
/// Only the page's own script, style and event stream; no framing, no inline code.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

struct PageState {
    hub: Arc<Hub>,
    streams: Arc<AtomicUsize>,
}

/// The admin page's routes.
pub fn router(hub: Arc<Hub>) -> axum::Router {
    let state = Arc::new(PageState {
        hub,
        streams: Arc::new(AtomicUsize::new(0)),
    });
    axum::Router::new()
        .route(
            PAGE_PATH,
            get(|| async { asset("text/html; charset=utf-8", PAGE) }),
        )
        .route(
            SCRIPT_PATH,
            get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            STYLE_PATH,
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
        .route(EVENTS_PATH, get(events))
        .with_state(state)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    secure(headers);
    response
}

fn secure(headers: &mut http::HeaderMap) {
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

/// Counts an open stream; the count goes down when the stream is dropped.
struct StreamSlot(Arc<AtomicUsize>);

impl StreamSlot {
    fn take(count: &Arc<AtomicUsize>) -> Option<StreamSlot> {
        let taken = count.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < MAX_STREAMS).then_some(n + 1)
        });
        taken.ok().map(|_| StreamSlot(count.clone()))
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn frame(event: &str, json: &str) -> Bytes {
    // serde_json never writes a raw newline, so one `data:` line carries the whole object.
    Bytes::from(format!("event: {event}\ndata: {json}\n\n"))
}

/// The event stream: `catalog` first and whenever the catalog changes, `overview` every
/// [`REFRESH`]; it ends when the gateway begins to stop.
async fn events(State(page): State<Arc<PageState>>) -> Response {
    let Some(slot) = StreamSlot::take(&page.streams) else {
        let text = format!("too many admin streams are open (at most {MAX_STREAMS})\n");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::CONTENT_TYPE, "text/plain")],
            text,
        )
            .into_response();
    };
    let hub = page.hub.clone();
    let stopping = hub.not_ready.clone();
    let frames = async_stream::stream! {
        let _slot = slot;
        let mut last_epoch = None;
        let mut tick = tokio::time::interval(REFRESH);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stopping.cancelled() => break,
            }
            let catalog = hub.catalog.snapshot();
            if last_epoch != Some(catalog.epoch) {
                last_epoch = Some(catalog.epoch);
                if let Ok(json) = serde_json::to_string(&feed::catalog(&hub, &catalog)) {
                    yield frame("catalog", &json);
                }
            }
            drop(catalog);
            if let Ok(json) = serde_json::to_string(&feed::overview(&hub)) {
                yield frame("overview", &json);
            }
        }
    };
    let mut response = Response::new(Body::from_stream(frames.map(Ok::<_, Infallible>)));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    secure(headers);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_beyond_the_bound_are_refused_and_a_closed_one_frees_its_place() {
        let count = Arc::new(AtomicUsize::new(0));
        let open: Vec<StreamSlot> = (0..MAX_STREAMS)
            .filter_map(|_| StreamSlot::take(&count))
            .collect();
        assert_eq!(open.len(), MAX_STREAMS);
        assert!(StreamSlot::take(&count).is_none());
        drop(open);
        assert_eq!(count.load(Ordering::Acquire), 0);
        assert!(StreamSlot::take(&count).is_some());
    }

    #[test]
    fn an_event_is_one_data_line() {
        let json = serde_json::to_string(&serde_json::json!({"a": "line\nbreak"})).unwrap_or_default();
        let text = frame("overview", &json);
        assert_eq!(text.iter().filter(|&&b| b == b'\n').count(), 3, "{text:?}");
    }
}
