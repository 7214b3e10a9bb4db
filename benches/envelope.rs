//! Microbenchmarks of the hot codec path (divan, with allocations counted by divan's counting
//! global allocator): envelope parsing, raw-object edits, the id/name rewrites of a forwarded
//! `tools/call` and of its response, and serving a `tools/list` page from a merged catalog.
//! `cargo bench --bench envelope`.

use divan::black_box;
use mcpmux::protocol::message::{self, parse_body, parse_message, Message, RequestId, ResponsePayload};
use mcpmux::protocol::{sse, RawObject};

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

const CALL: &str = r#"{"jsonrpc":"2.0","id":1000000017,"method":"tools/call","params":{"name":"e__echo","arguments":{"message":"x-s3-c17"},"_meta":{"progressToken":"p-17"}}}"#;
const RESULT: &str = r#"{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"Echo: x-s3-c17"}],"isError":false}}"#;

fn batch(n: usize) -> String {
    let items: Vec<String> = (0..n)
        .map(|i| CALL.replace("1000000017", &i.to_string()))
        .collect();
    format!("[{}]", items.join(","))
}

/// A `tools/list` response with `n` tools shaped like real ones (description and input schema).
fn tools_list(n: usize) -> String {
    let tools: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"name":"gen_{i:03}","description":"Generated tool number {i}","inputSchema":{{"type":"object","properties":{{"message":{{"type":"string"}}}},"required":["message"]}}}}"#
            )
        })
        .collect();
    format!(
        r#"{{"jsonrpc":"2.0","id":7,"result":{{"tools":[{}]}}}}"#,
        tools.join(",")
    )
}

mod parse {
    use super::*;

    #[divan::bench]
    fn tools_call_request() -> Message {
        parse_message(black_box(CALL)).unwrap_or_else(|e| panic!("{e}"))
    }

    #[divan::bench]
    fn tools_call_result() -> Message {
        parse_message(black_box(RESULT)).unwrap_or_else(|e| panic!("{e}"))
    }

    #[divan::bench(args = [8, 64])]
    fn batch_body(bencher: divan::Bencher, n: usize) {
        let text = batch(n);
        bencher.bench(|| parse_body(black_box(&text)).map(|_| ()));
    }

    #[divan::bench(args = [100, 1000])]
    fn tools_list_response(bencher: divan::Bencher, n: usize) {
        let text = tools_list(n);
        bencher.bench(|| parse_message(black_box(&text)).map(|_| ()));
    }
}

mod raw_object {
    use super::*;

    const PARAMS: &str =
        r#"{"name":"e__echo","arguments":{"message":"x-s3-c17"},"_meta":{"progressToken":"p-17"}}"#;

    #[divan::bench]
    fn parse_read_rename_serialise() -> String {
        let mut obj = RawObject::parse(black_box(PARAMS)).unwrap_or_default();
        let name = obj.get_str("name").unwrap_or_default();
        obj.set_str("name", name.strip_prefix("e__").unwrap_or(&name));
        obj.to_json()
    }

    #[divan::bench]
    fn read_progress_token() -> Option<String> {
        let obj = RawObject::parse(black_box(PARAMS)).unwrap_or_default();
        obj.get_object("_meta").and_then(|m| m.get_str("progressToken"))
    }
}

mod rewrite {
    use super::*;

    /// Host → upstream: parse the POST body, un-namespace `params.name`, give the request the
    /// upstream connection's id, and serialise the stdio line.
    #[divan::bench]
    fn forward_tools_call() -> String {
        let Ok(message::Body::Single(Message::Request { method, params, .. })) = parse_body(black_box(CALL))
        else {
            panic!("not a request");
        };
        let mut obj = RawObject::parse_opt(params.as_deref()).unwrap_or_default();
        let name = obj.get_str("name").unwrap_or_default();
        obj.set_str("name", name.strip_prefix("e__").unwrap_or(&name));
        Message::Request {
            id: RequestId::number(42),
            method,
            params: Some(obj.to_raw()),
        }
        .to_json()
    }

    /// Upstream → host: parse the upstream's line, restore the host's id and frame it as an SSE
    /// event on the call's stream.
    #[divan::bench]
    fn return_tools_call_result() -> String {
        let Ok(Message::Response { payload, .. }) = parse_message(black_box(RESULT)) else {
            panic!("not a response");
        };
        let host_id = RequestId::number(1_000_000_017);
        let json = Message::Response {
            id: Some(host_id),
            payload,
        }
        .to_json();
        sse::encode_event(Some("0-1"), None, &json)
    }

    /// The same response when it is an error (the payload stays raw).
    #[divan::bench]
    fn return_error() -> String {
        let msg = Message::Response {
            id: Some(RequestId::number(3)),
            payload: ResponsePayload::Error(message::error_object(-32001, "timed out", None)),
        };
        msg.to_json()
    }
}

mod list {
    use super::*;
    use mcpmux::catalog::{CatalogStore, ListKind, Naming};
    use mcpmux::config::UpstreamId;
    use mcpmux::protocol::modern_result::{own_result_members, CacheHint};
    use mcpmux::seal::Sealer;

    /// A catalog of `upstreams` × `per` tools shaped like [`tools_list`]'s.
    fn catalog(upstreams: usize, per: usize) -> CatalogStore {
        let namings = (0..upstreams)
            .map(|i| {
                let naming = Naming::new(format!("s{i}"), "__");
                (UpstreamId::new(&format!("s{i}")), naming)
            })
            .collect();
        let store = CatalogStore::new(namings);
        let text = tools_list(per);
        let Ok(Message::Response {
            payload: ResponsePayload::Result(result),
            ..
        }) = parse_message(&text)
        else {
            panic!("not a result");
        };
        let tools = RawObject::parse(result.get())
            .ok()
            .and_then(|r| r.get_array("tools"))
            .unwrap_or_default();
        for upstream in 0..upstreams {
            let items = tools
                .iter()
                .filter_map(|t| RawObject::parse(t.get()).ok())
                .collect();
            store.replace(&UpstreamId::new(&format!("s{upstream}")), ListKind::Tools, items);
        }
        store
    }

    /// One session-era `tools/list` answered from the current snapshot (one page holding every
    /// tool), serialised as the HTTP body.
    #[divan::bench(args = [(100, 10), (10, 1000)])]
    fn tools_list_page(bencher: divan::Bencher, (upstreams, per): (usize, usize)) {
        let store = catalog(upstreams, per);
        let sealer = Sealer::random();
        bencher.bench(|| {
            let page = store
                .snapshot()
                .page(ListKind::Tools, black_box(None), 100_000, &sealer);
            let result = page.map_or_else(message::null, |r| (*r).to_owned());
            message::result_response(RequestId::number(7), result).to_json()
        });
    }

    /// The same for a modern (2026-07-28) host: the page with `resultType`, cache hints and
    /// `serverInfo`, written for the request.
    #[divan::bench(args = [(100, 10), (10, 1000)])]
    fn modern_tools_list_page(bencher: divan::Bencher, (upstreams, per): (usize, usize)) {
        let store = catalog(upstreams, per);
        let info = message::to_raw(&serde_json::json!({"name": "mcpmux", "version": "0"}));
        let sealer = Sealer::random();
        bencher.bench(|| {
            let hint = CacheHint {
                ttl_ms: 60_000,
                private: false,
            };
            let members = own_result_members(Some(hint), &info);
            let page =
                store
                    .snapshot()
                    .page_with(ListKind::Tools, black_box(None), 100_000, &sealer, &members);
            let result = page.unwrap_or_else(message::null);
            message::result_response(RequestId::number(7), result).to_json()
        });
    }
}

mod seal {
    use super::*;
    use mcpmux::catalog::cursor::Cursors;
    use mcpmux::catalog::ListKind;
    use mcpmux::seal::Sealer;

    /// Sealing one list cursor (a random nonce, AES-256-GCM, base64url), as every page with a
    /// next page does.
    #[divan::bench]
    fn cursor_seal(bencher: divan::Bencher) {
        let sealer = Sealer::random();
        let cursors = Cursors::bound_to(&sealer, b"jwt\0https://issuer\0alice");
        bencher.bench(|| cursors.seal(ListKind::Tools, black_box(500)));
    }

    /// Opening one list cursor, as every request for a next page does.
    #[divan::bench]
    fn cursor_open(bencher: divan::Bencher) {
        let sealer = Sealer::random();
        let cursors = Cursors::bound_to(&sealer, b"jwt\0https://issuer\0alice");
        let cursor = cursors.seal(ListKind::Tools, 500);
        bencher.bench(|| cursors.open(ListKind::Tools, black_box(&cursor)));
    }
}
