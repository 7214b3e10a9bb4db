//! An HTTP upstream's answer, whichever client fetched it (reqwest, or the lean hyper client
//! POSTs use): its status, its headers and its body as a stream of chunks, read with bounds.

use super::http_endpoint::error_chain;
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use http_body_util::BodyExt;
use reqwest::header::{HeaderMap, CONTENT_TYPE};
use reqwest::StatusCode;

/// Why a body stopped before its end, with its causes.
pub(super) type BodyError = String;

/// The body of a reply, chunk by chunk.
pub(super) type BodyStream = BoxStream<'static, Result<Bytes, BodyError>>;

/// One HTTP reply from an upstream.
pub(super) struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    body: BodyStream,
}

impl Reply {
    /// A reply hyper received (through the lean client or an origin's pool).
    pub fn from_hyper<B>(resp: http::Response<B>) -> Self
    where
        B: hyper::body::Body<Data = Bytes> + Send + 'static,
        B::Error: std::error::Error,
    {
        let (parts, body) = resp.into_parts();
        let body = body
            .into_data_stream()
            .map(|chunk| chunk.map_err(|e| error_chain(&e)))
            .boxed();
        Reply {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    }

    /// Its media type, lower-cased (empty when it has none).
    pub fn content_type(&self) -> String {
        self.headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase()
    }

    pub fn is_sse(&self) -> bool {
        self.content_type().starts_with("text/event-stream")
    }

    pub fn into_body(self) -> BodyStream {
        self.body
    }

    /// Up to `limit` bytes of the body; the rest is not read.
    pub async fn read_limited(self, limit: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut body = self.body;
        while let Some(Ok(chunk)) = body.next().await {
            let room = limit.saturating_sub(out.len());
            out.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if out.len() >= limit {
                break;
            }
        }
        out
    }
}

impl From<reqwest::Response> for Reply {
    fn from(resp: reqwest::Response) -> Self {
        Reply {
            status: resp.status(),
            headers: resp.headers().clone(),
            body: resp
                .bytes_stream()
                .map(|chunk| chunk.map_err(|e| error_chain(&e)))
                .boxed(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(content_type: &str, chunks: Vec<&'static [u8]>) -> Reply {
        let mut headers = HeaderMap::new();
        if let Ok(v) = content_type.parse() {
            headers.insert(CONTENT_TYPE, v);
        }
        Reply {
            status: StatusCode::OK,
            headers,
            body: futures_util::stream::iter(chunks.into_iter().map(|c| Ok(Bytes::from_static(c)))).boxed(),
        }
    }

    #[tokio::test]
    async fn reads_at_most_the_limit() {
        let r = reply("application/json", vec![b"abcd", b"efgh", b"ijkl"]);
        assert_eq!(r.read_limited(6).await, b"abcdef");
        let r = reply("application/json", vec![b"ab"]);
        assert_eq!(r.read_limited(6).await, b"ab");
    }

    #[test]
    fn media_type_is_case_insensitive() {
        assert!(reply("Text/Event-Stream; charset=utf-8", vec![]).is_sse());
        assert!(!reply("application/json", vec![]).is_sse());
        assert_eq!(reply("", vec![]).content_type(), "");
    }
}
