//! The trace id of a host request: the W3C `traceparent` trace-id the request carried, else one
//! made for it. The tracing layer puts it in a task-local for the request's handling; the
//! pipeline reads it for the audit log (and the request's span).

use std::future::Future;
use std::sync::Arc;
use tokio::task::futures::TaskLocalFuture;

tokio::task_local! {
    static TRACE_ID: Arc<str>;
}

/// Run `future` (a request's handling) with `id` as its trace id.
pub fn scope<F: Future>(id: Arc<str>, future: F) -> TaskLocalFuture<Arc<str>, F> {
    TRACE_ID.scope(id, future)
}

/// The trace id of the request being handled; a fresh one outside a request's scope (a legacy
/// SSE message is served by its link's worker, after its POST was answered).
pub fn current() -> Arc<str> {
    TRACE_ID
        .try_with(Arc::clone)
        .unwrap_or_else(|_| generate().into())
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
    valid.then_some(trace)
}

/// A new random trace id (16 bytes, lowercase hex, as W3C trace-ids are).
pub fn generate() -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes: [u8; 16] = rand::random();
    let mut id = String::with_capacity(32);
    for b in bytes {
        id.push(char::from(HEX[usize::from(b >> 4)]));
        id.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    id
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
        let seen = scope(id.clone(), async { current() }).await;
        assert_eq!(seen, id);
        assert_ne!(current(), id);
    }
}
