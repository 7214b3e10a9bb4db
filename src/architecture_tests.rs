//! The layering of the source tree, checked: every `crate::` reference of a top-level module
//! points to a module of a lower layer, so no two modules import each other and `upstream`
//! names nothing host-side.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module's layer; a module may only use modules of lower layers.
const LAYERS: &[(&str, u8)] = &[
    ("protocol", 0),
    ("util", 0),
    ("status_doc", 0),
    // Pure (keys and the AEAD); config parses its keys, catalog, core and session seal with it.
    ("seal", 0),
    // Pure (a client's JSON text in, servers out); config will read `mcp_json` files with it.
    ("import", 0),
    // Certificates and keys from files, rustls configurations; config checks the files with it.
    ("tls", 0),
    ("config", 1),
    // The client of the replicas' shared store (Redis): keys, timeouts, the rate limit script;
    // it takes a URL, not config, and the vault and the rate limits above use it.
    ("shared_store", 1),
    // Pinned tool definitions: the lock file and the pin book; the catalog's pin stage uses it.
    ("pinning", 1),
    ("error", 2),
    ("catalog", 2),
    ("policy", 2),
    // A sink anything above the config may call: metrics, the access log, traces (names, W3C
    // context, spans, the OTLP exporter).
    ("telemetry", 2),
    // Outbound identity: upstream asks it for a header; it knows config and seal only.
    ("credentials", 2),
    ("upstream", 3),
    ("session", 4),
    // Below core, which reads the principal's scopes for step-up; beside session (neither uses the other).
    ("auth", 4),
    // A sink anything from core up may record to; it knows principals only as the strings it writes.
    ("audit", 4),
    ("core", 5),
    ("middleware", 5),
    // Forwarding between replicas: tower layers around the faces, and the client the modern
    // face forwards input-required retries with.
    ("cluster", 6),
    ("http", 7),
    // The listeners: it serves a router the composition root built, behind the peer layer.
    ("edge", 7),
    ("admin", 7),
    ("status_command", 8),
    ("grants_command", 8),
    ("reload", 8),
    ("reload_command", 8),
    ("pins_command", 8),
    ("login_command", 8),
];

/// What `upstream` must never name: the host side.
const HOST_SIDE: &[&str] = &[
    "session",
    "core",
    "http",
    "admin",
    "middleware",
    "auth",
    "audit",
    "cluster",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Which top-level modules each top-level module references (`crate::name`).
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(&src).unwrap();
        let first = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if ["lib", "main", "cli", "stop_signals", "architecture_tests"].contains(&module.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let used = graph.entry(module.clone()).or_default();
        for (at, _) in text.match_indices("crate::") {
            let name: String = text[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != module {
                used.insert(name);
            }
        }
    }
    graph
}

fn layer(module: &str) -> u8 {
    match LAYERS.iter().find(|(name, _)| *name == module) {
        Some((_, layer)) => *layer,
        None => panic!("top-level module {module} has no layer in architecture_tests.rs"),
    }
}

#[test]
fn every_import_points_down_the_layers() {
    let graph = imports();
    assert!(
        graph.contains_key("upstream") && graph.contains_key("core"),
        "{graph:?}"
    );
    let mut upward = Vec::new();
    for (module, used) in &graph {
        for other in used.iter().filter(|o| LAYERS.iter().any(|(n, _)| n == *o)) {
            if layer(other) >= layer(module) {
                upward.push(format!("{module} -> {other}"));
            }
        }
    }
    assert!(upward.is_empty(), "imports that do not point down: {upward:?}");
}

#[test]
fn upstream_names_nothing_host_side() {
    let graph = imports();
    let host_side: Vec<&String> = graph["upstream"]
        .iter()
        .filter(|m| HOST_SIDE.contains(&m.as_str()))
        .collect();
    assert!(host_side.is_empty(), "upstream imports {host_side:?}");
}
