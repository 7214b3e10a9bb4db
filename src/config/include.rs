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
/// looked for, the configuration file first (also when reading fails). An error of the file
/// itself is returned; one of an included file (it cannot be read, does not parse, includes
/// itself) goes to `errors` and that file is left out, so that the rest is still checked.
pub(super) fn read(
    path: &Path,
    sources: &mut Sources,
    files: &mut Vec<PathBuf>,
    errors: &mut Vec<ConfigError>,
) -> Result<Tree, ConfigError> {
    let mut tree = Tree {
        root: Table::new(),
        mcp_json: Vec::new(),
    };
    let mut stack = Vec::new();
    let mut reading = Reading {
        sources,
        stack: &mut stack,
        tree: &mut tree,
        files,
        errors,
    };
    reading.read_into(path, None)?;
    Ok(tree)
}

/// What reading a file and its includes carries along.
struct Reading<'a> {
    sources: &'a mut Sources,
    stack: &'a mut Vec<PathBuf>,
    tree: &'a mut Tree,
    files: &'a mut Vec<PathBuf>,
    errors: &'a mut Vec<ConfigError>,
}

impl Reading<'_> {
    fn read_into(&mut self, path: &Path, named_at: Option<&str>) -> Result<(), ConfigError> {
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let stack = &self.stack;
        if let (Some(at), Some(first)) = (named_at, stack.iter().position(|p| *p == canonical)) {
            let cycle: Vec<String> = (stack[first..].iter().chain([&canonical]))
                .map(|p| p.display().to_string())
                .collect();
            return Err(ConfigError::Invalid {
                message: format!("{at}: include cycle: {}", cycle.join(" -> ")),
            });
        }
        self.files.push(path.to_path_buf());
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
        let mut root = (self.sources).parse(&path.display().to_string(), Some(&dir), &text)?;
        self.stack.push(canonical);
        let included = paths(self.sources, &mut root, "include", &dir).unwrap_or_else(|err| {
            self.errors.push(err);
            Vec::new()
        });
        for (included, at) in included {
            if let Err(err) = self.read_into(&included, Some(&at)) {
                self.errors.push(err);
            }
        }
        self.stack.pop();
        match paths(self.sources, &mut root, "mcp_json", &dir) {
            Ok(list) => (self.tree.mcp_json).extend(list.into_iter().map(|(path, at)| JsonFile { path, at })),
            Err(err) => self.errors.push(err),
        }
        merge(&mut self.tree.root, root);
        Ok(())
    }
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
