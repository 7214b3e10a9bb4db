//! Relative paths in a configuration file follow the file, not the directory mcpmux happens to
//! be started from: a stdio server runs in the file's directory unless `cwd` says otherwise, a
//! relative `cwd` is taken from the file's directory, and a relative `command` naming a path
//! (`./bin/server`, with a `/`) from the server's working directory. A bare command name is
//! still looked up on `PATH`.

use super::{Config, TransportConfig};
use std::path::{Component, Path, PathBuf};

impl Config {
    /// Make every stdio server's working directory absolute against `base` (the directory of
    /// the configuration file), and its command too when it is a relative path; the audit log's
    /// path too.
    pub fn resolve_paths(&mut self, base: &Path) {
        if let Some(super::AuditConfig {
            sink: super::AuditSink::File(path),
            ..
        }) = &mut self.audit
        {
            *path = join(base, path);
        }
        self.vault.path = join(base, &self.vault.path);
        self.pinning.path = join(base, &self.pinning.path);
        for server in &mut self.servers {
            if let TransportConfig::Stdio { command, cwd, .. } = &mut server.transport {
                let dir = match cwd.take() {
                    Some(dir) => join(base, &dir),
                    None => base.to_path_buf(),
                };
                if let Some(resolved) = command_path(command, &dir) {
                    *command = resolved;
                }
                *cwd = Some(dir);
            }
        }
    }
}

/// A relative command with a `/` resolved against `dir`; `None` to keep the command as it is
/// (a bare name, an absolute path, or a directory that is not UTF-8).
pub(super) fn command_path(command: &str, dir: &Path) -> Option<String> {
    let path = Path::new(command);
    if !command.contains('/') || path.is_absolute() {
        return None;
    }
    join(dir, path).to_str().map(str::to_string)
}

/// `rel` under `base` (`rel` itself when absolute), without `.` components.
pub(super) fn join(base: &Path, rel: &Path) -> PathBuf {
    let rel: PathBuf = (rel.components()).filter(|c| *c != Component::CurDir).collect();
    match rel.as_os_str().is_empty() {
        true => base.to_path_buf(),
        false => base.join(rel),
    }
}

/// The directory of the configuration file at `path`, absolute.
pub(super) fn base_dir(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    match absolute.parent() {
        Some(dir) => dir.to_path_buf(),
        None => PathBuf::from("/"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str, base: &str) -> Config {
        let mut config = Config::from_toml_str(text, "t.toml", &|_| None).expect("valid");
        config.resolve_paths(Path::new(base));
        config
    }

    fn stdio(config: &Config, i: usize) -> (&str, Option<&Path>) {
        match &config.servers[i].transport {
            TransportConfig::Stdio { command, cwd, .. } => (command, cwd.as_deref()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn relative_paths_follow_the_config_file() {
        let config = load(
            "[servers.a]\ncommand = \"node\"\n\
             [servers.b]\ncommand = \"./bin/x\"\ncwd = \"srv\"\n\
             [servers.c]\ncommand = \"/usr/bin/env\"\ncwd = \"/tmp\"\n\
             [servers.d]\ncommand = \"bin/y\"\n\
             [servers.e]\nurl = \"http://127.0.0.1:1/mcp\"\n\
             [servers.f]\ncommand = \"node\"\ncwd = \".\"\n",
            "/etc/mcpmux",
        );
        assert_eq!(stdio(&config, 0), ("node", Some(Path::new("/etc/mcpmux"))));
        assert_eq!(
            stdio(&config, 1),
            ("/etc/mcpmux/srv/bin/x", Some(Path::new("/etc/mcpmux/srv")))
        );
        assert_eq!(stdio(&config, 2), ("/usr/bin/env", Some(Path::new("/tmp"))));
        assert_eq!(
            stdio(&config, 3),
            ("/etc/mcpmux/bin/y", Some(Path::new("/etc/mcpmux")))
        );
        assert!(matches!(
            config.servers[4].transport,
            TransportConfig::Http { .. }
        ));
        assert_eq!(stdio(&config, 5), ("node", Some(Path::new("/etc/mcpmux"))));
    }

    #[test]
    fn a_relative_audit_path_follows_the_config_file() {
        use crate::config::AuditSink;
        let sink = |text: &str| load(text, "/etc/mcpmux").audit.map(|a| a.sink);
        let file = |p: &str| Some(AuditSink::File(p.into()));
        assert_eq!(
            sink("[audit]\npath = \"audit.jsonl\""),
            file("/etc/mcpmux/audit.jsonl")
        );
        assert_eq!(
            sink("[audit]\npath = \"./log/a.jsonl\""),
            file("/etc/mcpmux/log/a.jsonl")
        );
        assert_eq!(
            sink("[audit]\npath = \"/var/log/a.jsonl\""),
            file("/var/log/a.jsonl")
        );
        assert_eq!(sink("[audit]\npath = \"-\""), Some(AuditSink::Stdout));
        assert_eq!(sink(""), None);
    }

    #[test]
    fn the_base_is_the_files_directory_made_absolute() {
        let cwd = std::env::current_dir().expect("cwd");
        assert_eq!(base_dir(Path::new("mcpmux.toml")), cwd);
        assert_eq!(base_dir(Path::new("conf/mcpmux.toml")), cwd.join("conf"));
        assert_eq!(
            base_dir(Path::new("/etc/mcpmux/m.toml")),
            Path::new("/etc/mcpmux")
        );
    }
}
