//! Metric handles kept per label set. A request records into its series through a handle
//! resolved once, instead of building the series' key (label vector, owned strings), hashing it
//! and looking it up in the recorder's registry on every call. The Prometheus recorder keeps
//! every series for the life of the process, so a kept handle never goes stale. The set of
//! label values is bounded as the series themselves are (names the catalog has, else `_OTHER`).

use crate::util::fast_map::FastMap;
use metrics::{Gauge, Histogram, Label};
use parking_lot::RwLock;
use std::hash::{BuildHasher, Hash};

/// The label values of one duration series (`mcp.method.name`, the tool or prompt, the
/// upstream, `error.type`), borrowed from the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Labels<'a> {
    pub method: &'static str,
    /// The label key (`gen_ai.tool.name` or `gen_ai.prompt.name`) and its value.
    pub target: Option<(&'static str, &'a str)>,
    pub upstream: Option<&'a str>,
    pub error: Option<&'a str>,
}

impl Labels<'_> {
    fn owned(&self) -> OwnedLabels {
        OwnedLabels {
            method: self.method,
            target: self.target.map(|(key, value)| (key, value.into())),
            upstream: self.upstream.map(Into::into),
            error: self.error.map(Into::into),
        }
    }

    /// The labels in the order the series has always had them.
    pub fn to_vec(self) -> Vec<Label> {
        let mut labels = Vec::with_capacity(4);
        labels.push(Label::new(super::names::METHOD, self.method));
        if let Some((key, name)) = self.target {
            labels.push(Label::new(key, name.to_string()));
        }
        if let Some(upstream) = self.upstream {
            labels.push(Label::new(super::names::UPSTREAM, upstream.to_string()));
        }
        if let Some(error) = self.error {
            labels.push(Label::new(super::names::ERROR_TYPE, error.to_string()));
        }
        labels
    }
}

#[derive(Debug)]
struct OwnedLabels {
    method: &'static str,
    target: Option<(&'static str, Box<str>)>,
    upstream: Option<Box<str>>,
    error: Option<Box<str>>,
}

impl OwnedLabels {
    fn is(&self, labels: &Labels<'_>) -> bool {
        self.method == labels.method
            && self.target.as_ref().map(|(k, v)| (*k, &**v)) == labels.target
            && self.upstream.as_deref() == labels.upstream
            && self.error.as_deref() == labels.error
    }
}

/// The series of one duration histogram, by label values.
#[derive(Debug)]
pub struct Durations {
    name: &'static str,
    hasher: foldhash::fast::FixedState,
    /// Series by the hash of their labels (a hash shared by two label sets keeps both).
    series: RwLock<FastMap<u64, Vec<(OwnedLabels, Histogram)>>>,
}

impl Durations {
    /// The histogram `name`'s series, none resolved yet.
    pub fn new(name: &'static str) -> Durations {
        Durations {
            name,
            hasher: foldhash::fast::FixedState::default(),
            series: RwLock::new(FastMap::default()),
        }
    }

    /// The histogram's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Record `seconds` in the series `labels` name.
    pub fn record(&self, labels: Labels<'_>, seconds: f64) {
        let hash = self.hasher.hash_one(labels);
        let known = (self.series.read().get(&hash))
            .and_then(|kept| kept.iter().find(|(owned, _)| owned.is(&labels)))
            .map(|(_, histogram)| histogram.clone());
        let histogram = known.unwrap_or_else(|| {
            let histogram = metrics::histogram!(self.name, labels.to_vec());
            let mut series = self.series.write();
            let kept = series.entry(hash).or_default();
            if !kept.iter().any(|(owned, _)| owned.is(&labels)) {
                kept.push((labels.owned(), histogram.clone()));
            }
            histogram
        });
        histogram.record(seconds);
    }
}

/// The in-flight gauge's series, by upstream.
#[derive(Debug)]
pub struct InFlight {
    name: &'static str,
    series: RwLock<FastMap<Box<str>, Gauge>>,
}

impl InFlight {
    /// The gauge `name`'s series, none resolved yet.
    pub fn new(name: &'static str) -> InFlight {
        InFlight {
            name,
            series: RwLock::new(FastMap::default()),
        }
    }

    /// The series of `upstream`.
    pub fn of(&self, upstream: &str) -> Gauge {
        if let Some(gauge) = self.series.read().get(upstream) {
            return gauge.clone();
        }
        let gauge = metrics::gauge!(self.name, super::names::UPSTREAM => upstream.to_string());
        (self.series.write())
            .entry(upstream.into())
            .or_insert(gauge)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics_exporter_prometheus::PrometheusBuilder;

    #[test]
    fn each_label_set_records_into_its_own_series_resolved_once() {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let durations = Durations::new("test_duration_seconds");
        let gauges = InFlight::new("test_in_flight");
        metrics::with_local_recorder(&recorder, || {
            let ok = Labels {
                method: "tools/call",
                target: Some(("gen_ai_tool_name", "fs__read")),
                upstream: Some("fs"),
                error: None,
            };
            let failed = Labels {
                error: Some("tool_error"),
                ..ok
            };
            let other = Labels {
                target: Some(("gen_ai_tool_name", "fs__write")),
                ..ok
            };
            for labels in [ok, ok, failed, other, ok] {
                durations.record(labels, 0.5);
            }
            gauges.of("fs").increment(2.0);
            gauges.of("fs").decrement(1.0);
            gauges.of("git").increment(1.0);
        });
        let text = handle.render();
        let count = |labels: &str| format!("test_duration_seconds_count{{{labels}}} ");
        let ok = "mcp_method_name=\"tools/call\",gen_ai_tool_name=\"fs__read\",upstream=\"fs\"";
        assert!(text.contains(&format!("{}3", count(ok))), "{text}");
        assert!(
            text.contains(&format!("{}1", count(&format!("{ok},error_type=\"tool_error\"")))),
            "{text}"
        );
        let other = "mcp_method_name=\"tools/call\",gen_ai_tool_name=\"fs__write\",upstream=\"fs\"";
        assert!(text.contains(&format!("{}1", count(other))), "{text}");
        assert!(text.contains("test_in_flight{upstream=\"fs\"} 1"), "{text}");
        assert!(text.contains("test_in_flight{upstream=\"git\"} 1"), "{text}");
        assert_eq!(durations.series.read().values().map(Vec::len).sum::<usize>(), 3);
    }
}
