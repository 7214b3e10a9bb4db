//! `include = [...]`: other TOML files merged into the one that names them, and the rules of
//! the merge. An included file's paths are relative to the file that names it (`~/` is the
//! home folder; no `${VAR}` in them); it may include others; a file that includes itself,
//! directly or not, is an error. The included files come first, in list order, each after its own includes, then the
//! including file's own keys, so the later file wins: tables merge key by key at any depth
//! (`[gateway]` in two files keeps the keys of both; `[servers.x]` in two files is one server
//! with the keys of both), any other value (a string, a number, a list) is replaced whole, and
//! arrays of tables (`[[policy]]`, `[[auth.api_keys]]`, `[[auth.step_up]]`) are appended in that
//! order. `mcp_json` lists of every file are all read (each relative to its own file).

use super::sources::Sources;
use super::ConfigError;
use std::path::{Path, PathBuf};
use toml_edit::{Item, Table, Value};

/// A path named by `mcp_json`, and the `file:line` that names it.
pub(super) struct JsonFile {
    pub(super) path: PathBuf,
    pub(super) at: String,
}

/// What reading a configuration file and its includes gave.
pub(super) struct Tree {
    pub(super) root: Table,
    pub(super) mcp_json: Vec<JsonFile>,
}

/// Read `path` and everything it includes into one tree; `files` gets every TOML file read or
/// looked for, the configuration file first (also when reading fails).
pub(super) fn read(
    path: &Path,
    sources: &mut Sources,
    files: &mut Vec<PathBuf>,
) -> Result<Tree, ConfigError> {
    let mut tree = Tree {
        root: Table::new(),
        mcp_json: Vec::new(),
    };
    let mut stack = Vec::new();
    read_into(path, None, sources, &mut stack, &mut tree, files)?;
    Ok(tree)
}

fn read_into(
    path: &Path,
    named_at: Option<&str>,
    sources: &mut Sources,
    stack: &mut Vec<PathBuf>,
    tree: &mut Tree,
    files: &mut Vec<PathBuf>,
) -> Result<(), ConfigError> {
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if let (Some(at), Some(first)) = (named_at, stack.iter().position(|p| *p == canonical)) {
        let cycle: Vec<String> = (stack[first..].iter().chain([&canonical]))
            .map(|p| p.display().to_string())
            .collect();
        return Err(ConfigError::Invalid {
            message: format!("{at}: include cycle: {}", cycle.join(" -> ")),
        });
    }
    files.push(path.to_path_buf());
    let text = std::fs::read_to_string(path).map_err(|source| match named_at {
        None => ConfigError::Io {
            path: path.to_path_buf(),
            source,
        },
        Some(at) => ConfigError::Invalid {
            message: format!("{at}: include {}: cannot read it: {source}", path.display()),
        },
    })?;
    let dir = super::paths::base_dir(path);
    let mut root = sources.parse(&path.display().to_string(), Some(&dir), &text)?;
    stack.push(canonical);
    for (included, at) in paths(sources, &mut root, "include", &dir)? {
        read_into(&included, Some(&at), sources, stack, tree, files)?;
    }
    stack.pop();
    for (path, at) in paths(sources, &mut root, "mcp_json", &dir)? {
        tree.mcp_json.push(JsonFile { path, at });
    }
    merge(&mut tree.root, root);
    Ok(())
}

/// Take the list of paths under `key` out of `root` (a string is a list of one), each made
/// absolute against `dir`, with the `file:line` it is written at.
pub(super) fn paths(
    sources: &Sources,
    root: &mut Table,
    key: &str,
    dir: &Path,
) -> Result<Vec<(PathBuf, String)>, ConfigError> {
    let Some(item) = root.remove(key) else {
        return Ok(Vec::new());
    };
    let at = |span: Option<std::ops::Range<usize>>| match span {
        Some(span) => sources.at(span.start),
        None => sources.main().to_string(),
    };
    let values: Vec<&Value> = match &item {
        Item::Value(Value::Array(list)) => list.iter().collect(),
        Item::Value(v @ Value::String(_)) => vec![v],
        other => {
            return Err(ConfigError::Invalid {
                message: format!("{}: {key} must be a list of file paths", at(other.span())),
            })
        }
    };
    let mut out = Vec::with_capacity(values.len());
    for value in values {
        match value.as_str() {
            Some(text) if !text.trim().is_empty() => out.push((expand_path(text, dir), at(value.span()))),
            _ => {
                return Err(ConfigError::Invalid {
                    message: format!("{}: {key}: each entry must be a file path", at(value.span())),
                })
            }
        }
    }
    Ok(out)
}

/// `~/` is the home folder; a relative path is taken from `dir`.
fn expand_path(text: &str, dir: &Path) -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let path = match (text.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ if text == "~" => std::env::var_os("HOME").map_or_else(|| PathBuf::from(text), PathBuf::from),
        _ => PathBuf::from(text),
    };
    match path.is_absolute() {
        true => path,
        false => dir.join(path),
    }
}

/// Merge `from` (the later file) into `into`: see the module's rules.
pub(super) fn merge(into: &mut Table, mut from: Table) {
    let keys: Vec<String> = from.iter().map(|(k, _)| k.to_string()).collect();
    for k in keys {
        let Some((key, item)) = from.remove_entry(&k) else {
            continue;
        };
        match (into.get_mut(&k), item) {
            (Some(Item::Table(a)), Item::Table(b)) => merge(a, b),
            (Some(Item::Value(Value::InlineTable(a))), Item::Value(Value::InlineTable(mut b))) => {
                let keys: Vec<String> = b.iter().map(|(k, _)| k.to_string()).collect();
                for k in keys {
                    if let Some((key, value)) = b.remove_entry(&k) {
                        a.insert_formatted(&key, value);
                    }
                }
            }
            (Some(Item::ArrayOfTables(a)), Item::ArrayOfTables(b)) => {
                for table in b {
                    a.push(table);
                }
            }
            (_, item) => {
                into.insert_formatted(&key, item);
            }
        }
    }
}
