//! The MCP server lists clients already have, read into mcpmux servers: Claude Desktop's
//! `claude_desktop_config.json`, Claude Code's `.mcp.json` and `~/.claude.json`, Cursor's and VS
//! Code's `mcp.json`. [`parse`] is pure (a path and its text in, servers and what could not be
//! carried out) so `mcp_json` can read the same files live; [`render`] writes TOML and
//! [`command`] is `mcpmux import`.
//!
//! The formats, as their documentation describes them (read 2026-11): Claude Code's MCP page
//! (code.claude.com/docs/en/mcp: `mcpServers`, `type` stdio/http/sse, `${VAR}` and
//! `${VAR:-default}` in command, args, env, url and headers; user and per-project entries in
//! `~/.claude.json`); VS Code's MCP configuration reference
//! (code.visualstudio.com/docs/copilot/reference/mcp-configuration: `servers`, `inputs`,
//! `${input:ID}`, `envFile`, predefined variables such as `${workspaceFolder}`); Cursor's MCP
//! page (cursor.com/docs/mcp: `mcpServers`, `url` servers, `${env:NAME}`, `${userHome}`,
//! `${workspaceFolder}`, `envFile`); Claude Desktop's `mcpServers` (command, args, env; no
//! expansion). A dev.to write-up of what Claude Code 2.1 actually expands confirmed the two
//! Claude Code forms.

mod command;
mod entry;
mod format;
mod jsonc;
mod names;
mod render;
mod vars;

pub use command::{command, env_file_names, read_env_file};
pub use format::Format;
pub use names::{valid_name, Namer, Placed, NAME_RULE};
pub use render::{render, server_toml, Rendered};

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use vars::{input_var, Input, Vars};

/// A parsed file.
#[derive(Clone, Debug)]
pub struct SourceFile {
    pub format: Format,
    /// In the file's order (`~/.claude.json`: the user's entries, then each project's).
    pub servers: Vec<ImportedServer>,
    /// About the file as a whole (how its format was told, keys that are not carried).
    pub notes: Vec<String>,
}

impl SourceFile {
    /// Everything not carried, one line each, naming the server it is about.
    pub fn warnings(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .notes
            .iter()
            .filter(|n| n.starts_with("not carried"))
            .cloned()
            .collect();
        for server in &self.servers {
            for dropped in &server.dropped {
                out.push(format!("{}: {dropped}", server.source_name));
            }
            if let Transport::Unsupported(why) = &server.transport {
                out.push(format!("{}: not converted: {why}", server.source_name));
            }
        }
        out
    }
}

/// One server of a client's file, in mcpmux's terms. Its strings are written in mcpmux's
/// interpolation syntax (`${VAR}`, `${VAR:-default}`, `$$`).
#[derive(Clone, Debug)]
pub struct ImportedServer {
    /// A valid server name (before names from several files are made distinct, see [`Namer`]).
    pub name: String,
    /// The entry's key in the file.
    pub source_name: String,
    /// The Claude Code project (`~/.claude.json`) the entry belongs to.
    pub project: Option<String>,
    pub transport: Transport,
    /// `"disabled": true` in the file.
    pub disabled: bool,
    /// What the conversion did that a reader should know (inputs, variables, renames).
    pub notes: Vec<String>,
    /// What could not be carried.
    pub dropped: Vec<String>,
    /// The variables it cannot start without (VS Code inputs without a default): written as
    /// `needs_env`, so that mcpmux leaves this server out, not the whole configuration, while
    /// one is unset.
    pub needs_env: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<String>,
        /// `cwd` is the client's workspace folder, where it starts the server when the entry
        /// names none (written only when it differs from the TOML file's folder).
        cwd_is_workspace: bool,
        /// `envFile`: a file of `NAME=value` lines for the server (see [`env_file_names`]).
        env_file: Option<String>,
    },
    Http {
        url: String,
        headers: Vec<(String, String)>,
        mode: HttpMode,
    },
    /// The entry cannot be served by mcpmux, and why.
    Unsupported(String),
}

/// mcpmux's `transport` for a `url` server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpMode {
    /// No `type`: Streamable HTTP, falling back to legacy SSE (mcpmux's default).
    Auto,
    /// `type: "http"` (or `"streamable-http"`).
    StreamableHttp,
    /// `type: "sse"`.
    Sse,
}

/// A file that is not JSON, or not a client's MCP configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub path: String,
    /// 1-based line and column of a JSON syntax error.
    pub at: Option<(usize, usize)>,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at {
            Some((line, column)) => write!(f, "{}:{line}:{column}: {}", self.path, self.message),
            None => write!(f, "{}: {}", self.path, self.message),
        }
    }
}

/// Read the client file at `path` (its folder tells workspaces apart) whose text is `text`;
/// `${userHome}` and a `~/.cursor` folder are told by the `HOME` variable.
pub fn parse(path: &Path, text: &str) -> Result<SourceFile, ParseError> {
    let home = std::env::var("HOME").ok();
    parse_in(path, text, home.as_deref())
}

/// [`parse`] with the user's home folder given.
pub fn parse_in(path: &Path, text: &str, home: Option<&str>) -> Result<SourceFile, ParseError> {
    let shown = path.display().to_string();
    let fail = |at, message: String| ParseError {
        path: shown.clone(),
        at,
        message,
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let json: Value = serde_json::from_str(&jsonc::strip(text)).map_err(|e| {
        // serde_json says where in its message too, and column 0 at the start of a line.
        let at = (e.line() > 0).then(|| (e.line(), e.column().max(1)));
        let message = e.to_string();
        let message = message
            .rsplit_once(" at line ")
            .map_or(message.as_str(), |(m, _)| m);
        fail(at, format!("not JSON: {message}"))
    })?;
    let Some(root) = json.as_object() else {
        return Err(fail(
            None,
            format!("the file is {}, not a JSON object", entry::kind_of(&json)),
        ));
    };
    let (format, how) = format::detect(path, root).map_err(|m| fail(None, m))?;
    let mut file = SourceFile {
        format,
        servers: Vec::new(),
        notes: how.into_iter().collect(),
    };
    let workspace = format::workspace(path, format, home);
    match format {
        Format::VsCode => {
            let holder = match root.get("mcp").and_then(Value::as_object) {
                Some(mcp) if !root.contains_key("servers") => mcp,
                _ => root,
            };
            let inputs = inputs(holder, &mut file.notes);
            let vars = Vars {
                format,
                workspace,
                inputs,
            };
            // The `mcpServers` of other clients, in a `.vscode` folder, is read as `servers`.
            let key = match holder.contains_key("servers") {
                true => "servers",
                false => "mcpServers",
            };
            let servers = object(holder, key).map_err(|m| fail(None, m))?;
            convert_all(&vars, servers, None, &mut file.servers);
            uncarried_keys(
                holder,
                &[key, "inputs"],
                &mut file.notes,
                std::ptr::eq(holder, root),
            );
        }
        Format::ClaudeCodeUser => {
            let vars = Vars {
                format,
                workspace: None,
                inputs: BTreeMap::new(),
            };
            if let Some(servers) = root.get("mcpServers") {
                let servers = as_servers(servers, "mcpServers").map_err(|m| fail(None, m))?;
                convert_all(&vars, servers, None, &mut file.servers);
            }
            let projects = root.get("projects").and_then(Value::as_object);
            for (project, settings) in projects.into_iter().flatten() {
                let Some(servers) = settings.get("mcpServers") else {
                    continue;
                };
                let key = format!("projects.{project:?}.mcpServers");
                let servers = as_servers(servers, &key).map_err(|m| fail(None, m))?;
                let vars = Vars {
                    format,
                    workspace: Some(project.clone()),
                    inputs: BTreeMap::new(),
                };
                convert_all(&vars, servers, Some(project), &mut file.servers);
            }
        }
        _ => {
            let vars = Vars {
                format,
                workspace,
                inputs: BTreeMap::new(),
            };
            let servers = object(root, "mcpServers").map_err(|m| fail(None, m))?;
            convert_all(&vars, servers, None, &mut file.servers);
            if format != Format::ClaudeDesktop {
                uncarried_keys(root, &["mcpServers"], &mut file.notes, true);
            }
        }
    }
    Ok(file)
}

fn convert_all(
    vars: &Vars,
    servers: &Map<String, Value>,
    project: Option<&str>,
    out: &mut Vec<ImportedServer>,
) {
    for (name, value) in servers {
        let mut server = entry::convert(vars, name, value, project);
        match project {
            Some(project) => {
                server.name = names::project_name(project, name);
                server
                    .notes
                    .insert(0, format!("Claude Code project {project:?}, entry {name:?}"));
            }
            None if server.name != *name => server.notes.insert(
                0,
                format!(
                    "{name:?} is not a valid server name ({NAME_RULE}): named {}",
                    server.name
                ),
            ),
            None => {}
        }
        out.push(server);
    }
}

/// VS Code's `inputs`, each given the variable it becomes (distinct even when two ids map to
/// the same name).
fn inputs(holder: &Map<String, Value>, notes: &mut Vec<String>) -> BTreeMap<String, Input> {
    let mut out = BTreeMap::new();
    let mut vars = std::collections::BTreeSet::new();
    let list = match holder.get("inputs") {
        Some(Value::Array(list)) => list.as_slice(),
        Some(other) => {
            notes.push(format!(
                "not carried: `inputs` is {}, not a list",
                entry::kind_of(other)
            ));
            &[]
        }
        None => &[],
    };
    for item in list {
        let Some(id) = item.get("id").and_then(Value::as_str) else {
            notes.push(format!(
                "not carried: an input without an `id`: {}",
                entry::short_json(item)
            ));
            continue;
        };
        let base = input_var(id);
        let mut var = base.clone();
        let mut n = 2;
        while !vars.insert(var.clone()) {
            var = format!("{base}_{n}");
            n += 1;
        }
        let text = |key: &str| item.get(key).and_then(Value::as_str).map(str::to_string);
        out.insert(
            id.to_string(),
            Input {
                var,
                kind: text("type").unwrap_or_else(|| "input".into()),
                description: text("description"),
                password: item.get("password").and_then(Value::as_bool) == Some(true),
                default: text("default"),
            },
        );
    }
    out
}

/// The object under `key` (an error when it is missing or not an object).
fn object<'a>(root: &'a Map<String, Value>, key: &str) -> Result<&'a Map<String, Value>, String> {
    match root.get(key) {
        Some(value) => as_servers(value, key),
        None => Err(format!("no `{key}` object")),
    }
}

fn as_servers<'a>(value: &'a Value, key: &str) -> Result<&'a Map<String, Value>, String> {
    value
        .as_object()
        .ok_or_else(|| format!("`{key}` is {}, not an object of servers", entry::kind_of(value)))
}

/// A note for each top-level key besides `known` (only for files that hold nothing but MCP
/// servers: `settings.json` and `~/.claude.json` hold much else).
fn uncarried_keys(root: &Map<String, Value>, known: &[&str], notes: &mut Vec<String>, whole_file: bool) {
    if !whole_file {
        return;
    }
    for (key, value) in root {
        if !known.contains(&key.as_str()) && key != "$schema" {
            notes.push(format!(
                "not carried: top-level \"{key}\": {}",
                entry::short_json(value)
            ));
        }
    }
}

#[cfg(test)]
mod tests;
