//! Spans as an OTLP `ExportTraceServiceRequest` in the binary protobuf encoding (the OTLP/HTTP
//! default, `application/x-protobuf`), written by hand for the few messages and fields mcpmux
//! sets (field numbers from `opentelemetry/proto/trace/v1/trace.proto` and `common/v1`).

use super::spans::{AttrValue, SpanRecord};
use super::trace_context::SpanContext;
use super::trace_names::{SCOPE_NAME, SERVICE_NAME};

/// Protobuf wire types.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;

/// The request body carrying `spans` of service `service_name`.
pub fn encode(service_name: &str, spans: &[SpanRecord]) -> Vec<u8> {
    let mut body = Vec::with_capacity(256 * spans.len() + 64);
    // ExportTraceServiceRequest.resource_spans = 1
    message(&mut body, 1, |rs| {
        // ResourceSpans.resource = 1 { Resource.attributes = 1 }
        message(rs, 1, |resource| {
            key_value(
                resource,
                1,
                SERVICE_NAME,
                &AttrValue::Str(service_name.to_string()),
            )
        });
        // ResourceSpans.scope_spans = 2
        message(rs, 2, |ss| {
            // ScopeSpans.scope = 1 { name = 1, version = 2 }
            message(ss, 1, |scope| {
                string(scope, 1, SCOPE_NAME);
                string(scope, 2, env!("CARGO_PKG_VERSION"));
            });
            for s in spans {
                // ScopeSpans.spans = 2
                message(ss, 2, |out| span(out, s));
            }
        });
    });
    body
}

fn span(out: &mut Vec<u8>, s: &SpanRecord) {
    id(out, 1, &s.context.trace_id);
    id(out, 2, &s.context.span_id);
    if let Some(state) = &s.context.tracestate {
        string(out, 3, state);
    }
    if let Some(parent) = &s.parent_span_id {
        id(out, 4, parent);
    }
    string(out, 5, &s.name);
    varint_field(out, 6, s.kind as u64);
    fixed64(out, 7, s.start_unix_nanos);
    fixed64(out, 8, s.end_unix_nanos);
    for (k, v) in &s.attributes {
        key_value(out, 9, k, v);
    }
    for other in &s.links {
        message(out, 13, |link| link_fields(link, other));
    }
    // Span.status = 15 { message = 2, code = 3 (ERROR = 2) }
    if let Some(text) = &s.error {
        message(out, 15, |status| {
            string(status, 2, text);
            varint_field(status, 3, 2);
        });
    }
}

fn link_fields(out: &mut Vec<u8>, other: &SpanContext) {
    id(out, 1, &other.trace_id);
    id(out, 2, &other.span_id);
    if let Some(state) = &other.tracestate {
        string(out, 3, state);
    }
}

/// A `KeyValue` { key = 1, value = 2: AnyValue { string_value = 1 | int_value = 3 } }.
fn key_value(out: &mut Vec<u8>, field: u32, k: &str, v: &AttrValue) {
    message(out, field, |kv| {
        string(kv, 1, k);
        message(kv, 2, |any| match v {
            AttrValue::Str(s) => string(any, 1, s),
            AttrValue::Int(n) => varint_field(any, 3, *n as u64),
        });
    });
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_field(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, VARINT);
    varint(out, v);
}

fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, FIXED64);
    out.extend_from_slice(&v.to_le_bytes());
}

fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    tag(out, field, LEN);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn string(out: &mut Vec<u8>, field: u32, s: &str) {
    bytes(out, field, s.as_bytes());
}

/// A hex id (trace or span) as its bytes; an id that is not hex (or longer than 32 bytes) is
/// left out.
fn id(out: &mut Vec<u8>, field: u32, hex: &str) {
    let mut decoded = [0u8; 32];
    let n = hex.len() / 2;
    if hex.is_empty() || hex.len() % 2 != 0 || n > decoded.len() {
        return;
    }
    for (i, byte) in decoded.iter_mut().take(n).enumerate() {
        match hex
            .get(2 * i..2 * i + 2)
            .and_then(|pair| u8::from_str_radix(pair, 16).ok())
        {
            Some(b) => *byte = b,
            None => return,
        }
    }
    bytes(out, field, &decoded[..n]);
}

/// A nested message: written by `fill` in place, then its length put before it (no buffer of
/// its own per message: a batch of spans was copied once per level of nesting, with an
/// allocation per message).
fn message(out: &mut Vec<u8>, field: u32, fill: impl FnOnce(&mut Vec<u8>)) {
    tag(out, field, LEN);
    let start = out.len();
    fill(out);
    let (mut prefix, mut n, mut len) = ([0u8; 10], 0, (out.len() - start) as u64);
    while len >= 0x80 {
        prefix[n] = (len as u8) | 0x80;
        len >>= 7;
        n += 1;
    }
    prefix[n] = len as u8;
    out.splice(start..start, prefix[..=n].iter().copied());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::spans::SpanKind;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    use prost::Message;

    #[test]
    fn a_batch_with_long_lengths_at_every_level_decodes_whole() {
        // 600 spans: the lengths of the outer messages need three varint bytes, a long
        // attribute needs two, and an id that is not hex is left out.
        let spans: Vec<SpanRecord> = (0..600)
            .map(|i| SpanRecord {
                context: SpanContext::from_headers(
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                    None,
                )
                .unwrap(),
                parent_span_id: Some("not hex!".into()),
                name: format!("span {i}"),
                kind: SpanKind::Server,
                start_unix_nanos: i,
                end_unix_nanos: i + 1,
                attributes: vec![("long", "x".repeat(300).into())],
                links: Vec::new(),
                error: None,
            })
            .collect();
        let body = encode("edge", &spans);
        let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        let decoded = &request.resource_spans[0].scope_spans[0].spans;
        assert_eq!(decoded.len(), 600);
        assert_eq!(decoded[599].name, "span 599");
        assert!(decoded[599].parent_span_id.is_empty());
        let Some(Value::StringValue(long)) = decoded[0].attributes[0]
            .value
            .as_ref()
            .and_then(|v| v.value.clone())
        else {
            panic!("no string attribute");
        };
        assert_eq!(long.len(), 300);
    }

    #[test]
    fn the_official_types_decode_what_is_written() {
        let record = SpanRecord {
            context: SpanContext::from_headers(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                Some("a=1"),
            )
            .unwrap(),
            parent_span_id: Some("1111111111111111".into()),
            name: "tools/call echo".into(),
            kind: SpanKind::Client,
            start_unix_nanos: 1_700_000_000_000_000_001,
            end_unix_nanos: 1_700_000_000_000_000_999,
            attributes: vec![
                ("mcp.method.name", "tools/call".into()),
                ("server.port", 8080.into()),
                ("negative", (-5).into()),
            ],
            links: vec![SpanContext::from_headers(
                "00-11111111111111111111111111111111-2222222222222222-01",
                None,
            )
            .unwrap()],
            error: Some("-32601".into()),
        };
        let body = encode("edge", &[record]);
        let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        let rs = &request.resource_spans[0];
        let service = &rs.resource.as_ref().unwrap().attributes[0];
        assert_eq!(service.key, "service.name");
        assert_eq!(
            service.value.as_ref().unwrap().value,
            Some(Value::StringValue("edge".into()))
        );
        let scope = &rs.scope_spans[0];
        assert_eq!(scope.scope.as_ref().unwrap().name, "mcpmux");
        let span = &scope.spans[0];
        assert_eq!(span.trace_id, hex("4bf92f3577b34da6a3ce929d0e0e4736"));
        assert_eq!(span.span_id, hex("00f067aa0ba902b7"));
        assert_eq!(span.parent_span_id, hex("1111111111111111"));
        assert_eq!(span.trace_state, "a=1");
        assert_eq!(span.name, "tools/call echo");
        assert_eq!(span.kind, 3);
        assert_eq!(span.start_time_unix_nano, 1_700_000_000_000_000_001);
        assert_eq!(span.end_time_unix_nano, 1_700_000_000_000_000_999);
        let values: Vec<_> = span
            .attributes
            .iter()
            .map(|kv| kv.value.clone().unwrap().value)
            .collect();
        assert_eq!(
            values,
            vec![
                Some(Value::StringValue("tools/call".into())),
                Some(Value::IntValue(8080)),
                Some(Value::IntValue(-5)),
            ]
        );
        assert_eq!(span.links[0].span_id, hex("2222222222222222"));
        let status = span.status.as_ref().unwrap();
        assert_eq!((status.code, status.message.as_str()), (2, "-32601"));
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
