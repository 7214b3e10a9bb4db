//! The tool search benchmark: builds the BM25 index over 1,000 tools (the recorded corpus of
//! tests/fixtures/search, replicated under renamed servers) and times the quality test's queries
//! against it. Prints build time and per-query latency (p50/p99 µs) and one JSON line.
//! `cargo bench --bench search` (bench/run.py's `search` scenario runs it).

use mcpmux::catalog::search::SearchIndex;
use serde_json::Value;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

const TOOLS: usize = 1000;
const BUILDS: usize = 20;
const ROUNDS: usize = 200;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/search");
    let (corpus, queries) = load(&dir);
    // Replicas of the corpus under renamed servers ("github" → "github2__…") up to TOOLS tools.
    let mut tools: Vec<String> = Vec::with_capacity(TOOLS);
    'fill: for copy in 0.. {
        for tool in &corpus {
            if tools.len() == TOOLS {
                break 'fill;
            }
            let mut tool = tool.clone();
            if copy > 0 {
                let name = tool["name"].as_str().unwrap_or_default();
                let renamed = match name.split_once("__") {
                    Some((server, rest)) => format!("{server}{copy}__{rest}"),
                    None => format!("{name}{copy}"),
                };
                tool["name"] = Value::String(renamed);
            }
            tools.push(tool.to_string());
        }
    }

    let mut builds: Vec<Duration> = (0..BUILDS)
        .map(|_| {
            let started = Instant::now();
            black_box(SearchIndex::new(tools.iter().map(String::as_str)));
            started.elapsed()
        })
        .collect();
    builds.sort();
    let index = SearchIndex::new(tools.iter().map(String::as_str));

    let everyone = |_: usize| true;
    let half = |position: usize| position % 2 == 0;
    let mut all = Vec::with_capacity(ROUNDS * queries.len());
    let mut filtered = Vec::with_capacity(ROUNDS * queries.len());
    for _ in 0..ROUNDS {
        for query in &queries {
            let started = Instant::now();
            black_box(index.search(black_box(query), 10, &everyone));
            all.push(started.elapsed());
            let started = Instant::now();
            black_box(index.search(black_box(query), 10, &half));
            filtered.push(started.elapsed());
        }
    }

    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (p50, p99) = percentiles(&mut all);
    let (f50, f99) = percentiles(&mut filtered);
    let build = builds[builds.len() / 2];
    println!(
        "tool search over {} tools, {} queries × {ROUNDS} rounds, limit 10",
        index.len(),
        queries.len()
    );
    println!("  index build (median of {BUILDS}):   {:>8.2} ms", ms(build));
    println!(
        "  query, all visible:   p50 {:>7.1} µs   p99 {:>7.1} µs",
        us(p50),
        us(p99)
    );
    println!(
        "  query, half hidden:   p50 {:>7.1} µs   p99 {:>7.1} µs",
        us(f50),
        us(f99)
    );
    println!(
        "{}",
        serde_json::json!({
            "tools": index.len(),
            "queries": queries.len(),
            "build_ms": ms(build),
            "query_p50_us": us(p50),
            "query_p99_us": us(p99),
            "filtered_p50_us": us(f50),
            "filtered_p99_us": us(f99),
        })
    );
}

fn percentiles(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    (at(0.50), at(0.99))
}

/// The corpus's tools (file-name order) and the quality test's query strings.
fn load(dir: &Path) -> (Vec<Value>, Vec<String>) {
    let read = |path: &Path| -> Value {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter(|p| p.file_name().is_some_and(|n| n != "queries.json"))
        .collect();
    files.sort();
    let tools = files
        .iter()
        .flat_map(|f| read(f)["tools"].as_array().cloned().unwrap_or_default())
        .collect();
    let queries = read(&dir.join("queries.json"))["queries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|q| q["query"].as_str().map(str::to_owned))
        .collect();
    (tools, queries)
}
