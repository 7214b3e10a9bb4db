//! A host call being served by an upstream: its event stream turned into the frames of the
//! host's POST response (notifications and server requests first, then the response with the
//! host's own id restored), with the deadline and the URIs of results exposed.

use super::input_bridge;
use crate::catalog::results::{expose_result_uris, ResultShape};
use crate::catalog::Naming;
use crate::error::{RequestError, UpstreamError};
use crate::protocol::message::raw;
use crate::protocol::modern_result::{legacy_resource_error, session_era_result};
use crate::protocol::{Message, RawObject, RequestId, ResponsePayload};
use crate::session::host::{InflightCall, Session};
use crate::upstream::call_channel::{call_channel, CallEvents};
use crate::upstream::{CallEvent, CallOrigin, CallParams, OutboundCall, UpstreamHandle, CALL_EVENT_QUEUE};
use serde_json::value::RawValue;
use std::sync::Arc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::task_tracker::TaskTrackerToken;

/// What a forwarded call produces for its host: messages, or word that the upstream polls.
pub enum Frame {
    /// A notification tied to the call.
    Message(Arc<str>),
    /// A server-to-client request, already addressed to the host under a downstream id.
    Request(Arc<str>),
    /// The call's one response, carrying the host's id.
    Response(Arc<str>),
    /// The upstream ended its stream before answering (SSE polling); mcpmux resumes it.
    Pause { retry_ms: Option<u64> },
}

impl Frame {
    /// The JSON-RPC message a session-era host receives for this frame, if any.
    pub fn into_json(self) -> Option<Arc<str>> {
        match self {
            Frame::Message(json) | Frame::Request(json) | Frame::Response(json) => Some(json),
            Frame::Pause { .. } => None,
        }
    }
}

/// A call in flight on an upstream, on behalf of one host request.
pub struct ForwardedCall {
    pub events: CallEvents,
    /// The request as the upstream got it (for a retry with input).
    pub method: String,
    pub params: Option<Box<RawValue>>,
    pub param_headers: Vec<(String, String)>,
    pub client_id: RequestId,
    pub client_progress_token: Option<Box<RawValue>>,
    pub upstream: UpstreamHandle,
    pub upstream_id: u64,
    pub session: Arc<Session>,
    pub shape: ResultShape,
    pub naming: Naming,
    pub deadline: Deadline,
    /// When a stop ends the call before it finishes.
    pub drain: DrainTicket,
    /// The host request's span.
    pub span: tracing::Span,
    /// Its audit line, written with its response (`None` without `[audit]`).
    pub audit: Option<super::audit_trail::Completion>,
    /// Its SERVER and CLIENT spans, ended with its response (none while traces are off).
    pub spans: super::request_spans::CallSpans,
    /// The CLIENT span's `traceparent`/`tracestate` headers (sent again with a retry).
    pub trace_headers: Vec<(String, String)>,
    /// What telemetry hears of it (`core::observe`): ended with its response.
    pub observed: Option<crate::telemetry::HostOp>,
    /// The tool or prompt it names, as the upstream knows it (its legs' metric label).
    pub target: Option<String>,
}

/// A call as a stop sees it: counted in flight while it lives (a stop waits for it), and
/// cancelled upstream and answered with an error if it still runs when the stop's drain time
/// (`gateway.drain_timeout_secs`) is over.
pub struct DrainTicket {
    pub expired: CancellationToken,
    pub secs: u64,
    pub in_flight: TaskTrackerToken,
}

impl DrainTicket {
    fn error(&self) -> Box<RawValue> {
        RequestError::DrainTimedOut(self.secs).to_error_object()
    }
}

/// When a host call times out: `timeout` after it started, or after its latest progress when
/// the server's timeout resets on progress, never past the gateway's hard maximum.
pub struct Deadline {
    started: Instant,
    at: Instant,
    timeout: std::time::Duration,
    resets_on_progress: bool,
    hard: Instant,
}

impl Deadline {
    pub fn new(timeout: std::time::Duration, resets_on_progress: bool, max: std::time::Duration) -> Self {
        let now = Instant::now();
        let hard = now + max;
        Deadline {
            started: now,
            at: (now + timeout).min(hard),
            timeout,
            resets_on_progress,
            hard,
        }
    }

    /// The instant the call times out.
    pub fn at(&self) -> Instant {
        self.at
    }

    /// The upstream reported progress.
    fn progressed(&mut self) {
        if self.resets_on_progress {
            self.at = (Instant::now() + self.timeout).min(self.hard);
        }
    }

    /// How long the call waited, in whole seconds, for the error message.
    fn secs(&self) -> u64 {
        self.started.elapsed().as_secs()
    }
}

/// Removes the host call from the session's in-flight map however the stream ends.
struct InflightGuard {
    session: Arc<Session>,
    client_id: RequestId,
    upstream_id: u64,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        self.session.finish_inflight(&self.client_id, self.upstream_id);
    }
}

impl ForwardedCall {
    /// The frames to send the host, ending with exactly one response (none when the host
    /// cancelled the call).
    pub fn into_frames(mut self) -> impl futures_util::Stream<Item = Frame> + Send {
        use futures_util::StreamExt;
        let mut audit = self.audit.take();
        let mut spans = std::mem::take(&mut self.spans);
        let mut observed = self.observed.take();
        self.frames().map(move |frame| {
            if let Frame::Response(json) = &frame {
                if let Some(completion) = audit.take() {
                    completion.complete(json);
                }
                spans.finish(json);
                if let Some(op) = observed.take() {
                    let tool = op.is_tool_call();
                    op.finish(crate::telemetry::outcome::of_response(json, tool));
                }
            }
            frame
        })
    }

    fn frames(self) -> impl futures_util::Stream<Item = Frame> + Send {
        async_stream::stream! {
            let mut call = self;
            let mut rounds = 0;
            let mut guard = InflightGuard {
                session: call.session.clone(),
                client_id: call.client_id.clone(),
                upstream_id: call.upstream_id,
            };
            loop {
                let event = tokio::select! {
                    event = tokio::time::timeout_at(call.deadline.at(), call.events.recv()) => event,
                    _ = call.drain.expired.cancelled() => {
                        call.upstream.cancel(call.upstream_id, "mcpmux is shutting down");
                        yield Frame::Response(call.error_frame(call.drain.error()));
                        break;
                    }
                };
                match event {
                    Err(_) => {
                        call.upstream.cancel(call.upstream_id, "request timed out in mcpmux");
                        let error = UpstreamError::Timeout {
                            name: call.upstream.name().to_string(),
                            secs: call.deadline.secs(),
                        };
                        yield Frame::Response(call.error_frame(error.to_error_object()));
                        break;
                    }
                    Ok(None) if !call.session.is_inflight(&call.client_id) => {
                        // The host cancelled it: a cancelled request gets no response.
                        break;
                    }
                    Ok(None) => {
                        let error = UpstreamError::Closed {
                            name: call.upstream.name().to_string(),
                            reason: "connection ended".into(),
                        };
                        yield Frame::Response(call.error_frame(error.to_error_object()));
                        break;
                    }
                    Ok(Some(CallEvent::Response(Message::Response { payload, .. }))) => {
                        let asks = match &payload {
                            ResponsePayload::Result(r) if !call.session.is_modern() => input_bridge::is_input_required(r),
                            _ => None,
                        };
                        let Some(result) = asks else {
                            yield Frame::Response(call.response_frame(payload));
                            break;
                        };
                        // A modern upstream wants input from a session-era host: ask it, retry.
                        rounds += 1;
                        if rounds > input_bridge::MAX_INPUT_ROUNDS {
                            yield Frame::Response(call.error_frame(input_bridge::too_many_rounds()));
                            break;
                        }
                        let input_bridge::InputAsk { requests, asked } = match input_bridge::ask(&call.session, &result) {
                            Ok(asked) => asked,
                            Err(error) => {
                                yield Frame::Response(call.error_frame(error));
                                break;
                            }
                        };
                        for request in requests {
                            yield Frame::Request(request);
                        }
                        let session = call.session.clone();
                        let answered = tokio::select! {
                            answered = input_bridge::answers(&session, asked, call.deadline.at()) => answered,
                            _ = call.drain.expired.cancelled() => Err(call.drain.error()),
                        };
                        let retry = match answered {
                            Ok(responses) => input_bridge::retry_params(call.params.as_deref(), &result, responses),
                            Err(error) => {
                                yield Frame::Response(call.error_frame(error));
                                break;
                            }
                        };
                        if let Err(error) = call.retry(retry) {
                            yield Frame::Response(call.error_frame(error.to_error_object()));
                            break;
                        }
                        guard.upstream_id = call.upstream_id;
                    }
                    Ok(Some(CallEvent::Response(_))) => {}
                    Ok(Some(CallEvent::Failed(error))) => {
                        call.span.in_scope(|| {
                            tracing::debug!(side = ?error.side(), retry = ?error.retry(), %error, "call failed");
                        });
                        yield Frame::Response(call.error_frame(error.to_error_object()));
                        break;
                    }
                    Ok(Some(CallEvent::ServerRequest(json))) => yield Frame::Request(json),
                    Ok(Some(CallEvent::Paused { retry_ms })) => yield Frame::Pause { retry_ms },
                    Ok(Some(CallEvent::Notification(msg))) => {
                        if msg.method() == Some("notifications/progress") {
                            call.deadline.progressed();
                        }
                        if let Some(frame) = call.notification_frame(msg) {
                            yield Frame::Message(frame);
                        }
                    }
                }
            }
        }
    }

    /// Send the request again (with input), as a new upstream request this call now waits on.
    fn retry(&mut self, params: Box<RawValue>) -> Result<(), UpstreamError> {
        let upstream_id = self.upstream.next_id();
        let params = match RawObject::parse(params.get()) {
            Ok(mut p) => {
                if let Some(mut meta) = p.get_object("_meta").filter(|m| m.contains("progressToken")) {
                    meta.set("progressToken", raw(upstream_id.to_string()));
                    p.set("_meta", meta.to_raw());
                }
                p.to_raw()
            }
            Err(_) => params,
        };
        let (sink, events) = call_channel(CALL_EVENT_QUEUE);
        self.session.add_inflight(
            self.client_id.clone(),
            InflightCall {
                upstream: self.upstream.clone(),
                upstream_id,
            },
        );
        self.upstream.send_call(OutboundCall {
            upstream_id,
            method: self.method.clone(),
            params: Some(CallParams::Raw(params.clone())),
            param_headers: self.param_headers.clone(),
            origin: CallOrigin::Host {
                host: self.session.link(),
                sink,
            },
            span: self.span.clone(),
            trace_headers: self.trace_headers.clone(),
            target: self.target.clone(),
        })?;
        self.events = events;
        self.upstream_id = upstream_id;
        self.params = Some(params);
        Ok(())
    }

    fn error_frame(&self, error: Box<RawValue>) -> Arc<str> {
        Message::Response {
            id: Some(self.client_id.clone()),
            payload: ResponsePayload::Error(error),
        }
        .to_json()
        .into()
    }

    fn response_frame(&self, payload: ResponsePayload) -> Arc<str> {
        let payload = match payload {
            ResponsePayload::Result(result) => {
                let result = expose_result_uris(result, self.shape, &self.naming);
                match self.session.is_modern() {
                    // Shaped for a modern host where its answer is written (mcpmux's identity).
                    true => ResponsePayload::Result(result),
                    false => ResponsePayload::Result(session_era_result(result, self.upstream.is_modern())),
                }
            }
            ResponsePayload::Error(error)
                if !self.session.is_modern() && self.shape == ResultShape::ReadResult =>
            {
                ResponsePayload::Error(legacy_resource_error(&error))
            }
            error => error,
        };
        Message::Response {
            id: Some(self.client_id.clone()),
            payload,
        }
        .to_json()
        .into()
    }

    fn notification_frame(&self, msg: Message) -> Option<Arc<str>> {
        let Message::Notification { method, params } = msg else {
            return None;
        };
        if method != "notifications/progress" {
            return Some(Message::Notification { method, params }.to_json().into());
        }
        let token = self.client_progress_token.as_ref()?;
        let mut p = RawObject::parse_opt(params.as_deref())?;
        p.set("progressToken", token.clone());
        Some(
            Message::Notification {
                method,
                params: Some(p.to_raw()),
            }
            .to_json()
            .into(),
        )
    }
}
