//! Latency samples, errors and their summary (nearest-rank percentiles in milliseconds), as a
//! table row and as JSON.

use serde_json::{json, Map, Value};
use std::time::Duration;

/// What one scenario saw: latencies of the measured calls that succeeded, and the errors.
#[derive(Default)]
pub struct Tally {
    pub samples: Vec<Duration>,
    pub errors: usize,
    pub first_error: Option<String>,
}

impl Tally {
    pub fn error(&mut self, msg: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(msg);
        }
    }

    pub fn merge(&mut self, other: Tally) {
        self.samples.extend(other.samples);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
}

/// Percentiles and mean in milliseconds.
#[derive(Clone, Copy)]
pub struct Summary {
    pub n: usize,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

/// Nearest-rank percentile of sorted samples, in milliseconds (NaN when empty).
fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    ms(sorted[rank.clamp(1, sorted.len()) - 1])
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub fn summarize(samples: &[Duration]) -> Summary {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let mean = if sorted.is_empty() {
        f64::NAN
    } else {
        sorted.iter().map(|d| ms(*d)).sum::<f64>() / sorted.len() as f64
    };
    Summary {
        n: sorted.len(),
        p50: percentile(&sorted, 50.0),
        p90: percentile(&sorted, 90.0),
        p99: percentile(&sorted, 99.0),
        max: sorted.last().map_or(f64::NAN, |d| ms(*d)),
        mean,
    }
}

/// A float rounded to microseconds (as milliseconds), or null when not a number.
pub fn num(x: f64) -> Value {
    if x.is_finite() {
        json!((x * 1000.0).round() / 1000.0)
    } else {
        Value::Null
    }
}

impl Summary {
    /// The latency members of a JSON report.
    pub fn put(&self, out: &mut Map<String, Value>) {
        out.insert("ok".into(), json!(self.n));
        out.insert("p50_ms".into(), num(self.p50));
        out.insert("p90_ms".into(), num(self.p90));
        out.insert("p99_ms".into(), num(self.p99));
        out.insert("max_ms".into(), num(self.max));
        out.insert("mean_ms".into(), num(self.mean));
    }
}

/// A plain text table: a header and rows, columns padded to their widest cell.
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i == 0 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        println!("{}", padded.join("  "));
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

/// A millisecond figure for a table cell.
pub fn cell(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.3}")
    } else {
        "-".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        let s = summarize(&samples);
        assert_eq!((s.n, s.p50, s.p90, s.p99, s.max), (100, 50.0, 90.0, 99.0, 100.0));
        assert!(summarize(&[]).p50.is_nan());
        assert_eq!(num(f64::NAN), Value::Null);
    }
}
