//! One host request ([`HostOp`]) and one request mcpmux sent upstream ([`UpstreamLeg`]), timed
//! from start to answer: finished with their `error.type`, or, dropped unfinished (the host
//! cancelled, the connection ended), recorded as `cancelled`. A host request also writes its
//! access line when it has [`AccessFacts`].

use super::access::{self, AccessFacts};
use super::names::{self, *};
use super::outcome::{ErrorType, CANCELLED};
use super::recent::{FailedRequest, RecentErrors};
use super::series::{Durations, InFlight, Labels};
use metrics::{gauge, histogram, Gauge};
use std::borrow::Cow;
use std::sync::{Arc, LazyLock};
use std::time::{Instant, SystemTime};

/// The series of host requests, upstream legs and legs in flight, resolved once each.
static HOST_SERIES: LazyLock<Durations> = LazyLock::new(|| Durations::new(HOST_DURATION));
static UPSTREAM_SERIES: LazyLock<Durations> = LazyLock::new(|| Durations::new(UPSTREAM_DURATION));
static IN_FLIGHT_SERIES: LazyLock<InFlight> = LazyLock::new(|| InFlight::new(UPSTREAM_IN_FLIGHT));

/// Record `seconds` in the series `labels` name: through its kept handle when mcpmux's recorder
/// is the process's, else (a test's local recorder) looked up as it is recorded.
fn record_duration(series: &Durations, labels: Labels<'_>, seconds: f64) {
    match super::installed() {
        true => series.record(labels, seconds),
        false => histogram!(series.name(), labels.to_vec()).record(seconds),
    }
}

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
        let labels = Labels {
            method: self.method,
            target: (self.target.as_ref()).map(|(key, name)| (*key, name.as_str())),
            upstream: self.upstream.as_deref(),
            error: error.as_deref(),
        };
        record_duration(&HOST_SERIES, labels, took.as_secs_f64());
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
        let in_flight = match super::installed() {
            true => IN_FLIGHT_SERIES.of(upstream),
            false => gauge!(UPSTREAM_IN_FLIGHT, UPSTREAM => upstream.to_string()),
        };
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
        let labels = Labels {
            method: self.method,
            target: (self.target.as_ref()).map(|(key, name)| (*key, name.as_str())),
            upstream: Some(&self.upstream),
            error: error.as_deref(),
        };
        record_duration(&UPSTREAM_SERIES, labels, self.started.elapsed().as_secs_f64());
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

    /// What `work` records into the process's recorder (the one `/metrics` renders), rendered.
    /// The label values are this module's own, so other tests recording meanwhile do not count.
    fn recorded(work: impl FnOnce()) -> String {
        assert!(super::super::install().is_some());
        work();
        super::super::render()
    }

    #[test]
    fn a_finished_op_has_its_labels_and_a_dropped_one_is_cancelled() {
        let text = recorded(|| {
            for _ in 0..2 {
                let mut op = HostOp::start("tools/call");
                op.naming(true, Some("optest__read"));
                op.to_upstream("optest");
                op.finish(None);
            }
            let mut op = HostOp::start("tools/call");
            op.naming(true, None);
            op.to_upstream("optest");
            drop(op);
            HostOp::start("x/made-up").finish(super::super::outcome::of_code(-32077));
        });
        let count = |labels: &str, n: u32| format!("{HOST_DURATION}_count{{{labels}}} {n}");
        let ok = "mcp_method_name=\"tools/call\",gen_ai_tool_name=\"optest__read\",upstream=\"optest\"";
        assert!(text.contains(&count(ok, 2)), "{text}");
        let cancelled =
            "mcp_method_name=\"tools/call\",gen_ai_tool_name=\"_OTHER\",upstream=\"optest\",error_type=\"cancelled\"";
        assert!(text.contains(&count(cancelled, 1)), "{text}");
        assert!(
            text.contains(&count("mcp_method_name=\"_OTHER\",error_type=\"-32077\"", 1)),
            "{text}"
        );
    }

    #[test]
    fn a_leg_is_in_flight_until_it_ends_however_it_ends() {
        let text = recorded(|| {
            let answered = UpstreamLeg::start("optest-legs", "tools/call", Some("read".into()));
            let failed = UpstreamLeg::start("optest-legs", "tools/call", Some("read".into()));
            let dropped = UpstreamLeg::start("optest-legs", "ping", Some("ignored".into()));
            UpstreamLeg::start("optest-legs", "prompts/get", Some("greet".into())).finish(None);
            answered.finish(super::super::outcome::of_result(r#"{"isError":true}"#, true));
            UpstreamLeg::failed(Some(failed), -32001);
            drop(dropped);
        });
        assert!(
            text.contains(&format!("{UPSTREAM_IN_FLIGHT}{{upstream=\"optest-legs\"}} 0")),
            "{text}"
        );
        let count = |labels: &str| format!("{UPSTREAM_DURATION}_count{{{labels}}} 1");
        for labels in [
            "mcp_method_name=\"tools/call\",gen_ai_tool_name=\"read\",upstream=\"optest-legs\",error_type=\"tool_error\"",
            "mcp_method_name=\"tools/call\",gen_ai_tool_name=\"read\",upstream=\"optest-legs\",error_type=\"timeout\"",
            "mcp_method_name=\"ping\",upstream=\"optest-legs\",error_type=\"cancelled\"",
            "mcp_method_name=\"prompts/get\",gen_ai_prompt_name=\"greet\",upstream=\"optest-legs\"",
        ] {
            assert!(text.contains(&count(labels)), "{labels}: {text}");
        }
    }
}
