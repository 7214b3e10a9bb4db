//! The README and the pages under `docs/` link to each other and to files of the repository:
//! every relative link must reach a file that exists and, when it names a `#anchor`, a heading
//! of that file (anchors as GitHub makes them from headings). Links to other sites are not
//! followed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every `docs/*.md`, as paths relative to the repository.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![PathBuf::from("README.md")];
    let docs = fs::read_dir(repo().join("docs")).unwrap_or_else(|e| panic!("docs/: {e}"));
    let mut found: Vec<PathBuf> = docs
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .filter_map(|p| p.file_name().map(|n| Path::new("docs").join(n)))
        .collect();
    found.sort();
    pages.extend(found);
    pages
}

/// The lines of `text` outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push(line);
        }
    }
    lines
}

/// A heading's anchor as GitHub makes it: lower case, punctuation other than `-` and `_`
/// dropped, spaces to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor of a Markdown text: its headings' slugs, a repeated one numbered `-1`, `-2`…
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for line in prose(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// The targets of the inline links and images of a Markdown text (`[text](target)`), outside
/// code blocks and inline code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        // Inline code spans cannot hold links: blank them out.
        let mut plain = String::new();
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            }
            plain.push(if in_code { ' ' } else { c });
        }
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            if let Some(end) = rest.find(')') {
                let target = rest[..end].split_whitespace().next().unwrap_or("");
                out.push(target.to_string());
                rest = &rest[end..];
            }
        }
    }
    out
}

/// `base/rel`, with `..` and `.` resolved (without touching the file system).
fn join(base: &Path, rel: &str) -> PathBuf {
    let mut path = PathBuf::new();
    for part in base.join(rel).components() {
        match part {
            Component::ParentDir => {
                path.pop();
            }
            Component::CurDir => {}
            other => path.push(other),
        }
    }
    path
}

/// The problems of every relative link of the README and the docs pages.
fn broken_links() -> Vec<String> {
    let mut problems = Vec::new();
    for page in pages() {
        let text =
            fs::read_to_string(repo().join(&page)).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        let dir = page.parent().unwrap_or(Path::new("")).to_path_buf();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target.as_str(), None),
            };
            let file = match file {
                "" => page.clone(),
                rel => join(&dir, rel),
            };
            let at = repo().join(&file);
            if !at.exists() {
                problems.push(format!(
                    "{}: link to {target}: {} does not exist",
                    page.display(),
                    file.display()
                ));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            let target_text = match fs::read_to_string(&at) {
                Ok(t) if file.extension().is_some_and(|x| x == "md") => t,
                _ => {
                    problems.push(format!(
                        "{}: link to {target}: an anchor into a file that is not Markdown",
                        page.display()
                    ));
                    continue;
                }
            };
            if !anchors(&target_text).contains(anchor) {
                problems.push(format!(
                    "{}: link to {target}: {} has no heading with the anchor #{anchor}",
                    page.display(),
                    file.display()
                ));
            }
        }
    }
    problems
}

#[test]
fn every_relative_link_of_the_readme_and_docs_resolves() {
    let problems = broken_links();
    assert!(problems.is_empty(), "broken links:\n  {}", problems.join("\n  "));
}

#[test]
fn the_readme_links_every_docs_page() {
    let readme = fs::read_to_string(repo().join("README.md")).expect("README.md");
    let linked: BTreeSet<PathBuf> = links(&readme)
        .iter()
        .map(|t| join(Path::new(""), t.split('#').next().unwrap_or("")))
        .collect();
    let missing: Vec<String> = pages()
        .into_iter()
        .filter(|p| p.starts_with("docs") && !linked.contains(p))
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "README.md does not link these pages: {missing:?}"
    );
}

#[test]
fn anchors_and_links_are_read_as_github_does() {
    let text = "# Title\n## Legacy HTTP+SSE (2024-11-05)\n```\n# not a heading\n```\n\
                ## A running gateway: `status`, `/healthz`\n## Title\n\
                See [x](other.md#a) and `[not](a-link.md)` and ![img](pic.png).\n";
    let found = anchors(text);
    for want in [
        "title",
        "legacy-httpsse-2024-11-05",
        "a-running-gateway-status-healthz",
        "title-1",
    ] {
        assert!(found.contains(want), "{want} not in {found:?}");
    }
    assert!(!found.contains("not-a-heading"), "{found:?}");
    assert_eq!(links(text), ["other.md#a", "pic.png"]);
    assert_eq!(
        join(Path::new("docs"), "../README.md"),
        PathBuf::from("README.md")
    );
}

/// `config.example.toml` and the file it includes (`examples/team.toml`) never set the same key:
/// a reader of either file sees the value in force, not one the other file silently replaces.
#[test]
fn the_example_config_and_its_include_set_each_key_once() {
    fn keys(prefix: &str, table: &toml::Table, out: &mut BTreeSet<String>) {
        for (key, value) in table {
            let path = format!("{prefix}{key}");
            match value {
                toml::Value::Table(inner) => keys(&format!("{path}."), inner, out),
                _ => {
                    out.insert(path);
                }
            }
        }
    }
    let read = |file: &str| -> toml::Table {
        let text = fs::read_to_string(repo().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        toml::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"))
    };
    let example = read("config.example.toml");
    let includes: Vec<String> = (example.get("include").and_then(|i| i.as_array()))
        .into_iter()
        .flatten()
        .filter_map(|i| i.as_str().map(String::from))
        .collect();
    assert!(!includes.is_empty(), "config.example.toml includes no file");
    let mut main_keys = BTreeSet::new();
    keys("", &example, &mut main_keys);
    for include in includes {
        let mut included = BTreeSet::new();
        keys("", &read(&include), &mut included);
        let both: Vec<&String> = main_keys.intersection(&included).collect();
        assert!(
            both.is_empty(),
            "config.example.toml and {include} both set {both:?}"
        );
    }
}

/// Every key the configuration accepts (all the property names of `mcpmux config schema`,
/// tables within tables included) is named in the reference pages, so a new key cannot ship
/// undocumented.
#[test]
fn every_config_key_is_documented() {
    fn walk(
        node: &serde_json::Value,
        defs: &serde_json::Value,
        seen: &mut BTreeSet<String>,
        keys: &mut BTreeSet<String>,
    ) {
        let Some(object) = node.as_object() else { return };
        if let Some(name) = object
            .get("$ref")
            .and_then(|r| r.as_str())
            .and_then(|r| r.rsplit('/').next())
        {
            if seen.insert(name.to_string()) {
                walk(&defs[name], defs, seen, keys);
            }
        }
        for (key, value) in object
            .get("properties")
            .and_then(|p| p.as_object())
            .into_iter()
            .flatten()
        {
            keys.insert(key.clone());
            walk(value, defs, seen, keys);
        }
        for combinator in ["anyOf", "oneOf", "allOf"] {
            for value in object
                .get(combinator)
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
            {
                walk(value, defs, seen, keys);
            }
        }
        for nested in ["items", "additionalProperties"] {
            if let Some(value) = object.get(nested) {
                walk(value, defs, seen, keys);
            }
        }
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpmux"))
        .args(["config", "schema"])
        .output()
        .expect("run mcpmux config schema");
    assert!(out.status.success(), "mcpmux config schema: {out:?}");
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the schema is JSON");
    let (mut seen, mut keys) = (BTreeSet::new(), BTreeSet::new());
    walk(&schema, &schema["$defs"], &mut seen, &mut keys);
    assert!(keys.len() > 50, "only {} keys found in the schema", keys.len());
    let docs: String = ["configuration.md", "team.md", "deploying.md", "operating.md"]
        .iter()
        .map(|f| fs::read_to_string(repo().join("docs").join(f)).unwrap_or_else(|e| panic!("docs/{f}: {e}")))
        .collect();
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    let documented = |key: &str| {
        docs.match_indices(key).any(|(i, _)| {
            let before = docs[..i].chars().next_back();
            let after = docs[i + key.len()..].chars().next();
            !before.is_some_and(word) && !after.is_some_and(word)
        })
    };
    let missing: Vec<&String> = keys.iter().filter(|k| !documented(k)).collect();
    assert!(
        missing.is_empty(),
        "config keys named nowhere in docs/configuration.md, team.md, deploying.md or operating.md: {missing:?}"
    );
}

/// The ```toml blocks of `text`, with the line each starts at.
fn toml_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        let fence = line.trim_start().starts_with("```");
        match current.take() {
            Some(block) if fence => blocks.push(block),
            Some((start, mut body)) => {
                body.push_str(line);
                body.push('\n');
                current = Some((start, body));
            }
            None if fence && line.trim() == "```toml" => current = Some((n + 1, String::new())),
            None => {}
        }
    }
    blocks
}

#[test]
fn every_toml_example_of_the_readme_and_docs_is_toml() {
    let mut wrong = Vec::new();
    for page in pages() {
        let text =
            fs::read_to_string(repo().join(&page)).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        for (line, block) in toml_blocks(&text) {
            if let Err(e) = block.parse::<toml::Table>() {
                wrong.push(format!("{}:{line}: {e}", page.display()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "TOML examples that do not parse:\n{}",
        wrong.join("\n")
    );
}
