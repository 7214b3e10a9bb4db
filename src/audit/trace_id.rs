//! The trace id of a host request: the W3C `traceparent` trace-id the request carried, else one
//! made for it. The tracing layer puts it in the request's scope
//! ([`trace_context::with_request`]); the pipeline reads it for the audit log (and the request's
//! span).

use crate::telemetry::trace_context;
use std::sync::Arc;

/// The trace id of the request being handled; a fresh one outside a request's scope (a legacy
/// SSE message is served by its link's worker, after its POST was answered).
pub fn current() -> Arc<str> {
    trace_context::request_trace_id().unwrap_or_else(|| generate().into())
}

/// The trace-id of a `traceparent` header (`00-<32 hex>-<16 hex>-<2 hex>`), when it is valid;
/// else a fresh one.
pub fn from_traceparent(header: Option<&str>) -> Arc<str> {
    header
        .and_then(parse_traceparent)
        .map_or_else(|| generate().into(), Into::into)
}

/// The trace-id of a valid W3C `traceparent` value.
pub fn parse_traceparent(value: &str) -> Option<&str> {
    trace_context::parse_traceparent(value).map(|(trace, _, _)| trace)
}

/// A new random trace id (16 bytes, lowercase hex, as W3C trace-ids are).
pub fn generate() -> String {
    trace_context::random_hex::<16>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_traceparent_gives_its_trace_id_and_anything_else_a_fresh_one() {
        let header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            &*from_traceparent(Some(header)),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "garbage",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad}");
        }
        let fresh = from_traceparent(None);
        assert_eq!(fresh.len(), 32);
        assert_ne!(fresh, from_traceparent(None));
    }

    #[tokio::test]
    async fn the_scope_sets_the_current_trace_id() {
        let id: Arc<str> = "4bf92f3577b34da6a3ce929d0e0e4736".into();
        let request = trace_context::RequestTrace {
            id: id.clone(),
            parent: None,
        };
        let seen = trace_context::with_request(request, async { current() }).await;
        assert_eq!(seen, id);
        assert_ne!(current(), id);
    }
}
