//! W3C trace context: `traceparent`/`tracestate` read and written, span ids made, and the two
//! contexts a request's handling can see: its trace id and the remote parent its HTTP headers
//! named (one scope, set by the tracing layer) and the SERVER span being served (its CLIENT
//! spans' parent).

use std::future::Future;
use std::sync::Arc;
use tokio::task::futures::TaskLocalFuture;

/// One span's place in a trace, as `traceparent` (and `tracestate`) carry it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanContext {
    /// 32 lowercase hex digits.
    pub trace_id: Arc<str>,
    /// 16 lowercase hex digits.
    pub span_id: String,
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
    /// The vendor entries that travel with the context, untouched.
    pub tracestate: Option<Arc<str>>,
}

impl SpanContext {
    /// The context of a valid `traceparent` value (with its `tracestate`, when one came along).
    pub fn from_headers(traceparent: &str, tracestate: Option<&str>) -> Option<SpanContext> {
        let (trace, span, flags) = parse_traceparent(traceparent)?;
        Some(SpanContext {
            trace_id: trace.into(),
            span_id: span.to_string(),
            flags,
            tracestate: tracestate
                .map(str::trim)
                .filter(|s| !s.is_empty() && s.len() <= 512 && s.is_ascii())
                .map(Into::into),
        })
    }

    /// This context as a `traceparent` value (version 00).
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-{:02x}", self.trace_id, self.span_id, self.flags)
    }
}

/// The trace-id, parent-id and flags of a valid W3C `traceparent` value.
pub fn parse_traceparent(value: &str) -> Option<(&str, &str, u8)> {
    let mut parts = value.trim().split('-');
    let (version, trace, parent, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    // Version 00 has exactly four parts; a later version may add more after them.
    if version == "00" && parts.next().is_some() {
        return None;
    }
    let hex =
        |s: &str, len: usize| s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let valid = hex(version, 2)
        && version != "ff"
        && hex(trace, 32)
        && trace.bytes().any(|b| b != b'0')
        && hex(parent, 16)
        && parent.bytes().any(|b| b != b'0')
        && hex(flags, 2);
    let flags = u8::from_str_radix(flags, 16).ok()?;
    valid.then_some((trace, parent, flags))
}

/// `n` random bytes as lowercase hex (never all zero, which W3C ids must not be).
pub fn random_hex<const N: usize>() -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut bytes: [u8; N] = rand::random();
    if bytes.iter().all(|b| *b == 0) {
        bytes[N - 1] = 1;
    }
    let mut id = String::with_capacity(N * 2);
    for b in bytes {
        id.push(char::from(HEX[usize::from(b >> 4)]));
        id.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    id
}

/// A new span id (8 random bytes, hex).
pub fn new_span_id() -> String {
    random_hex::<8>()
}

/// What the tracing layer knows of the HTTP request being handled. One task-local for both:
/// each is entered and left at every poll of the request's future.
#[derive(Debug)]
pub struct RequestTrace {
    /// Its trace id: the `traceparent` header's, else a fresh one.
    pub id: Arc<str>,
    /// The remote parent its `traceparent` header named.
    pub parent: Option<SpanContext>,
}

tokio::task_local! {
    /// The HTTP request being handled.
    static REQUEST: RequestTrace;
    /// The SERVER span whose request is being served.
    static SERVING: SpanContext;
}

/// Run `future` (an HTTP request's handling) with `trace` as its request's.
pub fn with_request<F: Future>(trace: RequestTrace, future: F) -> TaskLocalFuture<RequestTrace, F> {
    REQUEST.scope(trace, future)
}

/// The remote parent the HTTP request being handled named, if any.
pub fn http_parent() -> Option<SpanContext> {
    REQUEST.try_with(|request| request.parent.clone()).ok().flatten()
}

/// The trace id of the HTTP request being handled (`None` outside one).
pub fn request_trace_id() -> Option<Arc<str>> {
    REQUEST.try_with(|request| request.id.clone()).ok()
}

/// Run `future` (one host request's serving) inside the SERVER span `span`.
pub fn serving<F: Future>(span: SpanContext, future: F) -> TaskLocalFuture<SpanContext, F> {
    SERVING.scope(span, future)
}

/// The SERVER span being served, if any (outside one: none, so no CLIENT span).
pub fn current_server() -> Option<SpanContext> {
    SERVING.try_with(Clone::clone).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_bad_values_are_refused() {
        let header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let ctx = SpanContext::from_headers(header, Some(" rojo=1 ")).unwrap();
        assert_eq!(&*ctx.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(ctx.span_id, "00f067aa0ba902b7");
        assert_eq!(ctx.flags, 1);
        assert_eq!(ctx.tracestate.as_deref(), Some("rojo=1"));
        assert_eq!(ctx.traceparent(), header);
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "garbage",
        ] {
            assert_eq!(SpanContext::from_headers(bad, None), None, "{bad}");
        }
        let id = new_span_id();
        assert_eq!(id.len(), 16);
        assert_ne!(id, new_span_id());
    }

    #[tokio::test]
    async fn the_scopes_are_seen_inside_only() {
        let ctx = SpanContext::from_headers("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None);
        let request = RequestTrace {
            id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
            parent: ctx.clone(),
        };
        let seen = with_request(request, async { (http_parent(), request_trace_id()) }).await;
        assert_eq!(
            seen,
            (ctx.clone(), Some("4bf92f3577b34da6a3ce929d0e0e4736".into()))
        );
        assert_eq!(http_parent(), None);
        assert_eq!(request_trace_id(), None);
        let span = ctx.unwrap();
        assert_eq!(
            serving(span.clone(), async { current_server() }).await,
            Some(span)
        );
        assert_eq!(current_server(), None);
    }
}
