//! One host request ([`HostOp`]) and one request mcpmux sent upstream ([`UpstreamLeg`]), timed
//! from start to answer: finished with their `error.type`, or, dropped unfinished (the host
//! cancelled, the connection ended), recorded as `cancelled`. A host request also writes its
//! access line when it has [`AccessFacts`].

use super::access::{self, AccessFacts};
use super::names::{self, *};
use super::outcome::{ErrorType, CANCELLED};
use super::recent::{FailedRequest, RecentErrors};
use metrics::{gauge, histogram, Gauge, Label};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// One host request in progress.
pub struct HostOp {
    started: Instant,
    method: &'static str,
    /// `gen_ai.tool.name` or `gen_ai.prompt.name` with the name, when it is in the catalog.
    target: Option<(&'static str, String)>,
    upstream: Option<String>,
    /// The access line's facts; `None`: no access line.
    access: Option<Box<AccessFacts>>,
    /// Where a failure is noted for the admin page.
    failures: Option<Arc<RecentErrors>>,
    done: bool,
}

impl HostOp {
    /// A host request to `method` begins.
    pub fn start(method: &str) -> HostOp {
        HostOp {
            started: Instant::now(),
            method: names::method(method),
            target: None,
            upstream: None,
            access: None,
            failures: None,
            done: false,
        }
    }

    /// Note it in `recent` if it fails.
    pub fn noting_failures(&mut self, recent: Arc<RecentErrors>) {
        self.failures = Some(recent);
    }

    /// It names `name`, a tool (`tool`) or a prompt, that the catalog has: the name becomes a
    /// label (`None`: not in the catalog, labelled [`OTHER`]).
    pub fn naming(&mut self, tool: bool, name: Option<&str>) {
        let key = if tool { TOOL } else { PROMPT };
        self.target = Some((key, name.unwrap_or(OTHER).to_string()));
    }

    /// The tool or prompt it names, when the catalog has it (a low-cardinality name).
    pub fn known_target(&self) -> Option<&str> {
        (self.target.as_ref())
            .map(|(_, name)| name.as_str())
            .filter(|name| *name != OTHER)
    }

    /// It goes to `upstream` (its configured name).
    pub fn to_upstream(&mut self, upstream: &str) {
        self.upstream = Some(upstream.to_string());
    }

    /// Write its access line when it ends.
    pub fn logging(&mut self, facts: AccessFacts) {
        self.access = Some(Box::new(facts));
    }

    /// Its access line's facts, while it has not ended (`None`: no access line).
    pub fn access_mut(&mut self) -> Option<&mut AccessFacts> {
        self.access.as_deref_mut()
    }

    /// Whether it is a `tools/call` (whose result's `isError` is its outcome).
    pub fn is_tool_call(&self) -> bool {
        self.method == "tools/call"
    }

    /// It ended with `error` (`None`: success).
    pub fn finish(mut self, error: ErrorType) {
        self.record(error);
    }

    fn record(&mut self, error: ErrorType) {
        self.done = true;
        let took = self.started.elapsed();
        let mut labels = Vec::with_capacity(4);
        labels.push(Label::new(METHOD, self.method));
        if let Some((key, name)) = &self.target {
            labels.push(Label::new(*key, name.clone()));
        }
        if let Some(upstream) = &self.upstream {
            labels.push(Label::new(UPSTREAM, upstream.clone()));
        }
        if let Some(error) = &error {
            labels.push(Label::new(ERROR_TYPE, error.clone()));
        }
        histogram!(HOST_DURATION, labels).record(took.as_secs_f64());
        if let Some(facts) = &self.access {
            let upstream = self.upstream.as_deref();
            access::log(self.method, upstream, took, error.as_deref(), facts);
        }
        match (&self.failures, &error) {
            (Some(recent), Some(error)) if error != CANCELLED => recent.note(FailedRequest {
                at: SystemTime::now(),
                method: self.method,
                name: (self.target.as_ref())
                    .map(|(_, name)| name.clone())
                    .filter(|name| name != OTHER),
                upstream: self.upstream.clone(),
                error: error.to_string(),
            }),
            _ => {}
        }
    }
}

impl Drop for HostOp {
    fn drop(&mut self) {
        if !self.done {
            self.record(Some(Cow::Borrowed(CANCELLED)));
        }
    }
}

/// One request mcpmux sent an upstream, counted in flight while it waits.
pub struct UpstreamLeg {
    started: Instant,
    method: &'static str,
    /// `gen_ai.tool.name` or `gen_ai.prompt.name` with the upstream's own name for it.
    target: Option<(&'static str, String)>,
    upstream: String,
    in_flight: Gauge,
    done: bool,
}

impl UpstreamLeg {
    /// `upstream` was sent a `method` request naming `target`, a tool or prompt of the catalog
    /// (as the upstream knows it; only a `tools/call` or `prompts/get` label carries it).
    pub fn start(upstream: &str, method: &str, target: Option<String>) -> UpstreamLeg {
        let in_flight = gauge!(UPSTREAM_IN_FLIGHT, UPSTREAM => upstream.to_string());
        in_flight.increment(1.0);
        let method = names::method(method);
        let key = match method {
            "tools/call" => Some(TOOL),
            "prompts/get" => Some(PROMPT),
            _ => None,
        };
        UpstreamLeg {
            started: Instant::now(),
            method,
            target: key.zip(target),
            upstream: upstream.to_string(),
            in_flight,
            done: false,
        }
    }

    /// Whether it is a `tools/call` (whose result's `isError` is its outcome).
    pub fn is_tool_call(&self) -> bool {
        self.method == "tools/call"
    }

    /// `leg`, if there is one, failed with JSON-RPC error `code` (mcpmux's own: the connection
    /// ended, the request could not be sent).
    pub fn failed(leg: Option<UpstreamLeg>, code: i64) {
        if let Some(leg) = leg {
            leg.finish(super::outcome::of_code(code));
        }
    }

    /// The upstream answered (`error`: its `error.type`; `None`: success).
    pub fn finish(mut self, error: ErrorType) {
        self.record(error);
    }

    fn record(&mut self, error: ErrorType) {
        self.done = true;
        self.in_flight.decrement(1.0);
        let mut labels = Vec::with_capacity(4);
        labels.push(Label::new(METHOD, self.method));
        if let Some((key, name)) = self.target.take() {
            labels.push(Label::new(key, name));
        }
        labels.push(Label::new(UPSTREAM, std::mem::take(&mut self.upstream)));
        if let Some(error) = error {
            labels.push(Label::new(ERROR_TYPE, error));
        }
        histogram!(UPSTREAM_DURATION, labels).record(self.started.elapsed().as_secs_f64());
    }
}

impl Drop for UpstreamLeg {
    fn drop(&mut self) {
        if !self.done {
            self.record(Some(Cow::Borrowed(CANCELLED)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

    /// What `work` records, rendered.
    fn recorded(work: impl FnOnce()) -> String {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix(DURATION_SUFFIX.into()), DURATION_BUCKETS)
            .unwrap();
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, work);
        handle.render()
    }

    #[test]
    fn a_finished_op_has_its_labels_and_a_dropped_one_is_cancelled() {
        let text = recorded(|| {
            let mut op = HostOp::start("tools/call");
            op.naming(true, Some("fs__read"));
            op.to_upstream("fs");
            op.finish(None);
            let mut op = HostOp::start("tools/call");
            op.naming(true, None);
            drop(op);
            HostOp::start("x/made-up").finish(super::super::outcome::of_code(-32601));
        });
        let count = |labels: &str| format!("{HOST_DURATION}_count{{{labels}}} 1");
        let ok = "mcp_method_name=\"tools/call\",gen_ai_tool_name=\"fs__read\",upstream=\"fs\"";
        assert!(text.contains(&count(ok)), "{text}");
        let cancelled = "mcp_method_name=\"tools/call\",gen_ai_tool_name=\"_OTHER\",error_type=\"cancelled\"";
        assert!(text.contains(&count(cancelled)), "{text}");
        assert!(
            text.contains(&count("mcp_method_name=\"_OTHER\",error_type=\"-32601\"")),
            "{text}"
        );
    }

    #[test]
    fn a_leg_is_in_flight_until_it_ends_however_it_ends() {
        let text = recorded(|| {
            let answered = UpstreamLeg::start("fs", "tools/call", Some("read".into()));
            let failed = UpstreamLeg::start("fs", "tools/call", Some("read".into()));
            let dropped = UpstreamLeg::start("fs", "ping", Some("ignored".into()));
            UpstreamLeg::start("fs", "prompts/get", Some("greet".into())).finish(None);
            answered.finish(super::super::outcome::of_result(r#"{"isError":true}"#, true));
            UpstreamLeg::failed(Some(failed), -32001);
            drop(dropped);
        });
        assert!(
            text.contains(&format!("{UPSTREAM_IN_FLIGHT}{{upstream=\"fs\"}} 0")),
            "{text}"
        );
        let count = |labels: &str| format!("{UPSTREAM_DURATION}_count{{{labels}}} 1");
        for labels in [
            "mcp_method_name=\"tools/call\",gen_ai_tool_name=\"read\",upstream=\"fs\",error_type=\"tool_error\"",
            "mcp_method_name=\"tools/call\",gen_ai_tool_name=\"read\",upstream=\"fs\",error_type=\"timeout\"",
            "mcp_method_name=\"ping\",upstream=\"fs\",error_type=\"cancelled\"",
            "mcp_method_name=\"prompts/get\",gen_ai_prompt_name=\"greet\",upstream=\"fs\"",
        ] {
            assert!(text.contains(&count(labels)), "{labels}: {text}");
        }
    }
}
