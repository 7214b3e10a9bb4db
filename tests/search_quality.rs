//! Search quality, measured: the BM25 index over the recorded corpus (tests/fixtures/search: real
//! tools/list answers of real MCP servers) against hand-written queries with their expected tools.
//! Prints recall@5, MRR and every miss; fails when recall@5 drops below 0.8.

use mcpmux::catalog::search::SearchIndex;
use serde_json::Value;
use std::path::Path;

const MIN_RECALL_AT_5: f64 = 0.8;

/// Every tool of the corpus as JSON text, in file-name then list order, with its name.
fn corpus() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/search");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter(|p| p.file_name().is_some_and(|n| n != "queries.json"))
        .collect();
    files.sort();
    let mut tools = Vec::new();
    for file in files {
        let server: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        for tool in server["tools"].as_array().unwrap() {
            let name = tool["name"].as_str().unwrap().to_owned();
            tools.push((name, tool.to_string()));
        }
    }
    tools
}

#[test]
fn recall_at_5_on_the_recorded_corpus() {
    let tools = corpus();
    assert!(tools.len() >= 300, "the corpus has {} tools", tools.len());
    let index = SearchIndex::new(tools.iter().map(|(_, json)| json.as_str()));
    let queries: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/search/queries.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let queries = queries["queries"].as_array().unwrap();
    assert!(queries.len() >= 50, "only {} queries", queries.len());

    let (mut recall_sum, mut rr_sum) = (0.0, 0.0);
    let mut misses = Vec::new();
    for q in queries {
        let query = q["query"].as_str().unwrap();
        let expected: Vec<&str> = q["expected"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .collect();
        for name in &expected {
            assert!(
                tools.iter().any(|(n, _)| n == name),
                "{query:?} expects {name}, which the corpus lacks"
            );
        }
        let ranked: Vec<&str> = index
            .search(query, tools.len(), &|_| true)
            .iter()
            .map(|h| tools[h.position].0.as_str())
            .collect();
        let rank = |name: &str| ranked.iter().position(|r| *r == name);
        let found = expected.iter().filter(|e| rank(e).is_some_and(|r| r < 5)).count();
        recall_sum += found as f64 / expected.len() as f64;
        if let Some(first) = expected.iter().filter_map(|e| rank(e)).min() {
            rr_sum += 1.0 / (first + 1) as f64;
        }
        if found < expected.len() {
            let missing: Vec<String> = expected
                .iter()
                .filter(|e| rank(e).is_none_or(|r| r >= 5))
                .map(|e| match rank(e) {
                    Some(r) => format!("{e} (rank {})", r + 1),
                    None => format!("{e} (not found)"),
                })
                .collect();
            let top: Vec<&str> = ranked.iter().take(5).copied().collect();
            misses.push(format!(
                "{query:?}\n    missing: {}\n    top 5:   {}",
                missing.join(", "),
                top.join(", ")
            ));
        }
    }
    let n = queries.len() as f64;
    let (recall, mrr) = (recall_sum / n, rr_sum / n);
    println!("misses ({} of {} queries):", misses.len(), queries.len());
    for miss in &misses {
        println!("  {miss}");
    }
    println!(
        "search quality: {} tools, {} queries, recall@5 = {recall:.3}, MRR = {mrr:.3}",
        tools.len(),
        queries.len()
    );
    assert!(
        recall >= MIN_RECALL_AT_5,
        "recall@5 {recall:.3} is below {MIN_RECALL_AT_5}"
    );
}
