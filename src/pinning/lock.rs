//! The lock file: per server, per upstream tool name, the definition as the server sent it
//! (`name`, `title`, `description`, `inputSchema`, `outputSchema`, `annotations`; absent
//! members absent) and the SHA-256 of its RFC 8785 canonical JSON. Written atomically (a
//! temporary file in the same folder, synced, renamed over the lock), in a deterministic order
//! (servers and tools sorted, members in the order above).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The members of a tool that make its definition, in the order the lock writes them.
pub const MEMBERS: [&str; 6] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

/// The lock file's format version.
const VERSION: u32 = 1;

/// Why the lock file could not be read or written; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("pinning lock file {path}: cannot read it: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("pinning lock file {path} is not a valid lock ({reason}); fix or remove it (removing it pins every tool again as it is now)")]
    Corrupt { path: PathBuf, reason: String },
    #[error("pinning lock file {path}: cannot write it: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

/// One tool's definition as pinned (or as seen), and its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    /// Hex SHA-256 of the RFC 8785 canonical JSON of `definition`.
    pub sha256: String,
    pub definition: Map<String, Value>,
}

impl Pin {
    /// The definition members of a tool as the server sent it (other members, such as
    /// `_meta`, are not part of it); `None` for an item that is not an object with a name.
    pub fn of_tool(tool: &Value) -> Option<Pin> {
        let object = tool.as_object()?;
        object.get("name")?.as_str()?;
        let definition: Map<String, Value> = (MEMBERS.iter())
            .filter_map(|m| object.get(*m).map(|v| (m.to_string(), v.clone())))
            .collect();
        Some(Pin::of_definition(definition))
    }

    /// A pin of `definition`, with its hash.
    pub fn of_definition(definition: Map<String, Value>) -> Pin {
        Pin {
            sha256: hash(&definition),
            definition,
        }
    }

    /// The tool's name (the server's own).
    pub fn name(&self) -> &str {
        self.definition
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
}

/// Hex SHA-256 of the RFC 8785 canonical JSON of `definition`.
pub fn hash(definition: &Map<String, Value>) -> String {
    // A map of JSON values always serialises; an empty text would only ever hash differently.
    let canonical = serde_json_canonicalizer::to_vec(definition).unwrap_or_default();
    let digest = ring::digest::digest(&ring::digest::SHA256, &canonical);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Every pinned definition: server name → the server's tool name → pin.
pub type Pins = BTreeMap<String, BTreeMap<String, Pin>>;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LockFile {
    version: u32,
    servers: Pins,
}

/// Read the lock at `path`; a missing file is an empty lock.
pub fn read(path: &Path) -> Result<Pins, LockError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Pins::new()),
        Err(source) => {
            return Err(LockError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let corrupt = |reason: String| LockError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let file: LockFile = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
    if file.version != VERSION {
        return Err(corrupt(format!(
            "version {} (this mcpmux reads {VERSION})",
            file.version
        )));
    }
    for (server, tools) in &file.servers {
        for (name, pin) in tools {
            if pin.name() != name {
                return Err(corrupt(format!(
                    "{server}/{name}: its definition is named {:?}",
                    pin.name()
                )));
            }
            if hash(&pin.definition) != pin.sha256 {
                return Err(corrupt(format!(
                    "{server}/{name}: sha256 does not match its definition"
                )));
            }
        }
    }
    Ok(file.servers)
}

/// The lock's text: deterministic (sorted servers and tools; members in [`MEMBERS`] order).
pub fn render(pins: &Pins) -> String {
    let servers: BTreeMap<&String, BTreeMap<&String, Pin>> = (pins.iter())
        .map(|(server, tools)| {
            let tools = (tools.iter())
                .map(|(name, pin)| {
                    let definition = (MEMBERS.iter())
                        .filter_map(|m| pin.definition.get(*m).map(|v| (m.to_string(), v.clone())))
                        .collect();
                    let ordered = Pin {
                        sha256: pin.sha256.clone(),
                        definition,
                    };
                    (name, ordered)
                })
                .collect();
            (server, tools)
        })
        .collect();
    let value = serde_json::json!({ "version": VERSION, "servers": servers });
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
    text.push('\n');
    text
}

/// Write `pins` to `path` atomically: a temporary file beside it, synced, renamed over it.
pub fn write(path: &Path, pins: &Pins) -> Result<(), LockError> {
    let failed = |source| LockError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(render(pins).as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        // The rename itself reaches the disk with the folder.
        if let Ok(folder) = std::fs::File::open(&dir) {
            let _ = folder.sync_all();
        }
        Ok(())
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written.map_err(failed)
}
