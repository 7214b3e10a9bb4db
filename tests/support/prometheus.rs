//! A real Prometheus (Debian's `prometheus`, installed by `scripts/install-debian.sh`) for the
//! metrics tests: its own config and storage in a scratch folder, on a free port, scraping a
//! target every 500 ms; its HTTP query API; `promtool check metrics`; and a reader of the text
//! exposition format for assertions on series and labels.

use super::{free_port, wait_for_port, ChildGuard};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Install Prometheus and promtool (once per process).
pub fn install() {
    super::debian::packages(&["prometheus=prometheus,promtool"]);
}

/// A running Prometheus scraping one target.
pub struct Prometheus {
    _guard: ChildGuard,
    pub port: u16,
    log: PathBuf,
}

impl Prometheus {
    /// Start one in `dir` scraping `http://target/metrics_path` every 500 ms.
    pub fn scraping(dir: &Path, target: &str, metrics_path: &str) -> Prometheus {
        install();
        let port = free_port();
        let config = dir.join("prometheus.yml");
        let text = format!(
            "global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\n\
             scrape_configs:\n  - job_name: mcpmux\n    metrics_path: {metrics_path}\n    \
             static_configs:\n      - targets: ['{target}']\n"
        );
        std::fs::write(&config, text).expect("write prometheus.yml");
        let log = dir.join("prometheus.log");
        let out = std::fs::File::create(&log).expect("create prometheus.log");
        let mut cmd = Command::new("prometheus");
        cmd.arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("dup log fd"))
            .stderr(out);
        let guard = ChildGuard::spawn_group(&mut cmd).expect("spawn prometheus");
        let prometheus = Prometheus {
            _guard: guard,
            port,
            log,
        };
        assert!(
            wait_for_port(port, Duration::from_secs(30)),
            "prometheus did not listen; log:\n{}",
            prometheus.log()
        );
        prometheus
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The result of an instant query (`data.result`), or why there is none.
    pub async fn query(&self, promql: &str) -> Result<Vec<Value>, String> {
        let url = format!("http://127.0.0.1:{}/api/v1/query", self.port);
        let response = (reqwest::Client::new()
            .get(url)
            .query(&[("query", promql)])
            .send()
            .await)
            .map_err(|e| e.to_string())?;
        let text = response.text().await.map_err(|e| e.to_string())?;
        let body: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
        match body["data"]["result"].as_array() {
            Some(result) if body["status"] == "success" => Ok(result.clone()),
            _ => Err(body.to_string()),
        }
    }

    /// Poll `promql` until its first sample's value satisfies `want`, within `timeout`; the value.
    pub async fn wait_value(&self, promql: &str, want: impl Fn(f64) -> bool, timeout: Duration) -> f64 {
        let deadline = Instant::now() + timeout;
        loop {
            let last;
            match self.query(promql).await {
                Ok(result) => {
                    let value = (result.first())
                        .and_then(|s| s["value"][1].as_str())
                        .and_then(|v| v.parse::<f64>().ok());
                    match value {
                        Some(v) if want(v) => return v,
                        _ => last = format!("{result:?}"),
                    }
                }
                Err(e) => last = e,
            }
            assert!(
                Instant::now() < deadline,
                "{promql}: no wanted value within {timeout:?} (last: {last}); prometheus log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// Run `promtool check metrics` on `exposition`; its exit status and output.
pub fn promtool_check(exposition: &str) -> (bool, String) {
    install();
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn promtool");
    (child.stdin.take().expect("stdin"))
        .write_all(exposition.as_bytes())
        .expect("feed promtool");
    let out = child.wait_with_output().expect("promtool runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// One sample of a text exposition: its name, labels and value.
#[derive(Debug, Clone)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// The samples of a Prometheus text exposition (label values without escaped quotes).
pub fn samples(exposition: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (series, value) = line.rsplit_once(' ').expect("a sample line has a value");
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        let mut map = BTreeMap::new();
        for pair in labels.split("\",").filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once("=\"").expect("label=\"value\"");
            map.insert(key.to_string(), value.trim_end_matches('"').to_string());
        }
        out.push(Sample {
            name: name.to_string(),
            labels: map,
            value: value.parse().unwrap_or(f64::NAN),
        });
    }
    out
}

/// The value of the one sample named `name` whose labels include every one of `labels`, and
/// no other label from `absent`.
pub fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)], absent: &[&str]) -> Option<f64> {
    let matching: Vec<&Sample> = (samples.iter())
        .filter(|s| s.name == name)
        .filter(|s| {
            labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .filter(|s| absent.iter().all(|k| !s.labels.contains_key(*k)))
        .collect();
    match matching.as_slice() {
        [] => None,
        [one] => Some(one.value),
        more => panic!("{name} {labels:?}: more than one sample: {more:?}"),
    }
}
