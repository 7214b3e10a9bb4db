//! Which client a file belongs to (each expands variables its own way), told from its name,
//! folder and keys, and the workspace folder a project's file belongs to.

use serde_json::{Map, Value};
use std::path::Path;

/// Which client's file it is (each expands variables its own way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `claude_desktop_config.json`: `mcpServers`, no variable expansion.
    ClaudeDesktop,
    /// A Claude Code `.mcp.json` (or any `mcpServers` file not recognised as another client's).
    ClaudeCode,
    /// Claude Code's `~/.claude.json`: top-level `mcpServers` and `projects.<path>.mcpServers`.
    ClaudeCodeUser,
    /// Cursor's `mcp.json` (`~/.cursor/mcp.json` or a project's `.cursor/mcp.json`).
    Cursor,
    /// VS Code's `mcp.json` (`servers`, `inputs`), or `settings.json` with an `mcp` object.
    VsCode,
}

impl Format {
    pub fn label(self) -> &'static str {
        match self {
            Format::ClaudeDesktop => "Claude Desktop",
            Format::ClaudeCode => "Claude Code .mcp.json",
            Format::ClaudeCodeUser => "Claude Code ~/.claude.json",
            Format::Cursor => "Cursor mcp.json",
            Format::VsCode => "VS Code mcp.json",
        }
    }

    pub(super) fn is_claude_code(self) -> bool {
        matches!(self, Format::ClaudeCode | Format::ClaudeCodeUser)
    }
}

/// How the file's format is told: VS Code by `servers` (or `mcp.servers`), `~/.claude.json` by
/// its name or its `projects`, the others by their file name or folder (`.cursor/`), and an
/// `mcpServers` file that says nothing else by its variables (`${env:…}` is Cursor's), else
/// Claude Code's `.mcp.json` (a note says so).
pub(super) fn detect(path: &Path, root: &Map<String, Value>) -> Result<(Format, Option<String>), String> {
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let in_folder = |folder: &str| {
        path.parent()
            .and_then(Path::file_name)
            .is_some_and(|f| f == folder)
    };
    let vs_code_settings =
        (root.get("mcp").and_then(Value::as_object)).is_some_and(|m| m.contains_key("servers"));
    if root.contains_key("servers") || vs_code_settings {
        return Ok((Format::VsCode, None));
    }
    if file_name == ".claude.json" || root.get("projects").is_some_and(Value::is_object) {
        return Ok((Format::ClaudeCodeUser, None));
    }
    if !root.contains_key("mcpServers") {
        return Err(
            "no `mcpServers` (Claude Desktop, Claude Code, Cursor) or `servers` (VS Code) object: \
             not an MCP client's configuration"
                .into(),
        );
    }
    if file_name == "claude_desktop_config.json" {
        return Ok((Format::ClaudeDesktop, None));
    }
    if in_folder(".cursor") {
        return Ok((Format::Cursor, None));
    }
    if in_folder(".vscode") {
        return Ok((
            Format::VsCode,
            Some("read as VS Code's mcp.json (its folder is .vscode)".into()),
        ));
    }
    if file_name == ".mcp.json" {
        return Ok((Format::ClaudeCode, None));
    }
    let text = root.get("mcpServers").map(Value::to_string).unwrap_or_default();
    if ["${env:", "${userHome}", "${workspaceFolder}"]
        .iter()
        .any(|v| text.contains(v))
    {
        let note = "read as Cursor's mcp.json (it uses ${env:…}-style variables)";
        return Ok((Format::Cursor, Some(note.into())));
    }
    let note = "read as a Claude Code .mcp.json (${VAR} and ${VAR:-default} expanded): \
                its name and folder name no other client";
    Ok((Format::ClaudeCode, Some(note.into())))
}

/// The workspace folder of a project file: the folder of a `.mcp.json`, the parent of a
/// project's `.cursor/` or `.vscode/` (not of `~/.cursor/`, the user's).
pub(super) fn workspace(path: &Path, format: Format, home: Option<&str>) -> Option<String> {
    let folder = path.parent()?;
    let dir = match format {
        Format::ClaudeCode if path.file_name().is_some_and(|n| n == ".mcp.json") => folder,
        Format::Cursor | Format::VsCode => {
            let marker = if format == Format::Cursor {
                ".cursor"
            } else {
                ".vscode"
            };
            if folder.file_name().is_none_or(|f| f != marker) {
                return None;
            }
            folder.parent()?
        }
        _ => return None,
    };
    let dir = dir.to_str()?;
    let is_home = home.is_some_and(|h| h.trim_end_matches('/') == dir.trim_end_matches('/'));
    (!is_home && !dir.is_empty()).then(|| dir.to_string())
}
