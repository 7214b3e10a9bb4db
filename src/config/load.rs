//! Loading a configuration file in full: every problem of the file, its includes and its
//! `mcp_json` files at once (a file that does not read is one problem, not the end of the
//! check), what could be built of the rest, and where each key was written, so that the checks
//! on the machine (`preflight`) point at the line that caused them, in the same run.

use super::preflight::{Finding, Severity};
use super::sources::Sources;
use super::{include, mcp_json, paths, Config, ConfigError};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What loading a configuration file found.
pub struct Loaded {
    /// Every problem, in the order of the files and their lines.
    errors: Vec<ConfigError>,
    /// The configuration, or when there are problems, what of it built (the sections that had
    /// none); `None` when nothing could be built.
    config: Option<Config>,
    /// Every file read or looked for: what to watch for changes.
    files: Vec<PathBuf>,
    sources: Sources,
    /// Dotted keys (`servers.NAME.command`) and the offset they were written at.
    sites: Vec<(String, usize)>,
}

impl Config {
    /// Load `path` with its includes and `mcp_json` files, interpolating from the process
    /// environment, keeping every problem and what could be built despite them.
    pub fn load_all(path: &Path) -> Loaded {
        let mut sources = Sources::default();
        let mut files = Vec::new();
        let mut errors = Vec::new();
        let tree = match include::read(path, &mut sources, &mut files, &mut errors) {
            Ok(tree) => tree,
            Err(err) => {
                // The file itself does not read or parse: nothing else can be said.
                return Loaded {
                    errors: vec![err],
                    config: None,
                    files,
                    sources,
                    sites: Vec::new(),
                };
            }
        };
        files.extend(tree.mcp_json.iter().map(|f| f.path.clone()));
        let mut root = tree.root;
        mcp_json::add_servers(&mut sources, &mut root, &tree.mcp_json, &mut errors);
        let mut sites = Vec::new();
        let env = |var: &str| std::env::var(var).ok();
        let (errors, config) = Config::from_tree_partial(root, &sources, &env, errors, &mut sites);
        let config = config.map(|mut config| {
            config.resolve_paths(&paths::base_dir(path));
            config
        });
        Loaded {
            errors,
            config,
            files,
            sources,
            sites,
        }
    }
}

impl Loaded {
    /// The configuration, or its problems; and the files to watch.
    pub fn into_result(self) -> (Result<Config, ConfigError>, Vec<PathBuf>) {
        let result = match (ConfigError::gather(self.errors), self.config) {
            (Some(err), _) => Err(err),
            (None, Some(config)) => Ok(config),
            (None, None) => Err(ConfigError::Invalid {
                message: format!("{}: the configuration does not load", self.sources.main()),
            }),
        };
        (result, self.files)
    }

    /// The configuration or what of it built.
    pub fn config(&self) -> Option<&Config> {
        self.config.as_ref()
    }

    /// [`Config::preflight`] of what built, each finding at the line of the key it is about
    /// (the server's `command` or `cwd` in whichever file wrote it; its table when the key is
    /// not written; the configuration file for the whole of it), in the order of the files.
    /// When the files have problems, only the checks of what built are made (a command, a
    /// working directory, the audit log): what the rest would say of the whole configuration
    /// (no servers, an open endpoint) follows from what is missing.
    pub fn preflight(&self, path: Option<OsString>, workdir: &Path) -> Vec<Finding> {
        let Some(config) = &self.config else {
            return Vec::new();
        };
        let mut found = config.preflight(path, workdir);
        if !self.errors.is_empty() {
            found.retain(|f| {
                f.key
                    .as_deref()
                    .is_some_and(|k| k.starts_with("servers.") || k.starts_with("audit."))
            });
        }
        for finding in &mut found {
            finding.at = Some(self.site(finding.key.as_deref()));
        }
        found.sort_by_cached_key(|f| self.sources.order_of(f.at.as_deref().unwrap_or_default()));
        found
    }

    /// `file:line` of `key`, else of the nearest enclosing key written, else the file's name.
    fn site(&self, key: Option<&str>) -> String {
        let mut key = key;
        while let Some(k) = key {
            if let Some((_, offset)) = self.sites.iter().find(|(s, _)| s == k) {
                return self.sources.at(*offset);
            }
            key = k.rsplit_once('.').map(|(parent, _)| parent);
        }
        self.sources.main().to_string()
    }

    /// `mcpmux check-config`: every problem of the files and every finding on the machine, in
    /// the order of the files and lines (problems first at the same line), and how many errors
    /// and warnings that makes.
    pub fn check(&self, path: Option<OsString>, workdir: &Path) -> Report {
        let findings = self.preflight(path, workdir);
        let mut lines: Vec<((usize, usize), u8, String)> = (self.errors.iter())
            .map(|e| {
                let text = e.to_string();
                (self.sources.order_of(&text), 0, text)
            })
            .collect();
        lines.extend(findings.iter().map(|f| {
            let order = self.sources.order_of(f.at.as_deref().unwrap_or_default());
            (order, 1, f.to_string())
        }));
        lines.sort_by_key(|line| (line.0, line.1));
        let warnings = (findings.iter())
            .filter(|f| f.severity == Severity::Warning)
            .count();
        Report {
            lines: lines.into_iter().map(|(_, _, text)| text).collect(),
            errors: self.errors.len() + findings.len() - warnings,
            warnings,
        }
    }
}

/// What `mcpmux check-config` prints.
#[derive(Debug)]
pub struct Report {
    /// One problem or finding each, each starting with its `file:line`.
    pub lines: Vec<String>,
    pub errors: usize,
    pub warnings: usize,
}
