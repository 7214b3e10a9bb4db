//! `mcp_json = [...]`: servers taken from clients' JSON files each time the configuration loads,
//! converted as `mcpmux import` converts them (`crate::import`), then added to the TOML's
//! servers. A file that does not exist is a warning (a client's file that is not on this
//! machine, or not yet: the list can name every client's, and the file is picked up when it
//! appears); one that does not parse is an error (a reload keeps the running configuration). A
//! TOML server of the same name wins (a warning says so): write `[servers.NAME]` to replace a
//! client's entry, or `enabled = false` to leave it out. Relative paths in an entry (its `cwd`,
//! an `envFile`) follow the JSON file's folder, as the client reads them.

use super::include::{merge, JsonFile};
use super::sources::Sources;
use super::ConfigError;
use crate::import::{parse, read_env_file, render, Namer, SourceFile};
use std::path::Path;
use toml_edit::{Item, Table};

/// Add the servers of `files` to `root` (after its own). A file that cannot be read or does
/// not parse goes to `errors` (named among the sources, so that it sorts in its place) and adds
/// nothing: the others, and the TOML, are still read and checked.
pub(super) fn add_servers(
    sources: &mut Sources,
    root: &mut Table,
    files: &[JsonFile],
    errors: &mut Vec<ConfigError>,
) {
    let toml_names: Vec<String> = match root.get("servers").and_then(Item::as_table) {
        Some(servers) => servers.iter().map(|(k, _)| k.to_string()).collect(),
        None => Vec::new(),
    };
    let mut namer = Namer::default();
    for name in &toml_names {
        namer.reserve(name, "the TOML configuration");
    }
    for file in files {
        let shown = file.path.display().to_string();
        let (mut source, text) = match read(file) {
            Ok(Some(read)) => read,
            Ok(None) => continue,
            Err(err) => {
                sources.name_unread(&shown);
                errors.push(err);
                continue;
            }
        };
        source.servers.retain(|server| {
            let clash = toml_names.contains(&server.name);
            if clash {
                tracing::warn!(
                    "{shown}: server {:?}: [servers.{}] of the TOML configuration is used instead",
                    server.source_name,
                    server.name
                );
            }
            !clash
        });
        source.servers.iter_mut().for_each(read_env_file);
        let dir = super::paths::base_dir(&file.path);
        let rendered = render(&[(shown.clone(), source)], &dir.display().to_string(), &mut namer);
        for warning in &rendered.warnings {
            tracing::warn!("mcp_json: {warning}");
        }
        match sources.parse_converted(&shown, Some(&dir), &rendered.text, Some(&text)) {
            Ok(converted) => merge(root, converted),
            Err(err) => errors.push(err),
        }
    }
}

/// The parsed file and its text, or `None` when it does not exist.
fn read(file: &JsonFile) -> Result<Option<(SourceFile, String)>, ConfigError> {
    let path: &Path = &file.path;
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            tracing::warn!(
                "{}: mcp_json {}: no such file: no servers from it (it is read when it appears)",
                file.at,
                path.display()
            );
            return Ok(None);
        }
        Err(err) => {
            return Err(ConfigError::Invalid {
                message: format!("{}: mcp_json {}: cannot read it: {err}", file.at, path.display()),
            })
        }
    };
    parse(path, &text)
        .map(|parsed| Some((parsed, text)))
        .map_err(|err| ConfigError::Invalid {
            message: format!("{err} (mcp_json, named at {})", file.at),
        })
}
