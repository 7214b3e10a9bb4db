//! The texts a configuration was read from (the file, its includes, its `mcp_json` files as
//! converted), laid end to end in one space of byte offsets so that every span of the merged
//! tree names its own file and line: each file is parsed after as many blank lines as there are
//! bytes before it, which TOML ignores.

use super::raw::{enclosing_table, line_col, table_header};
use super::ConfigError;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml_edit::{ImDocument, Table};

/// One text of the configuration.
pub(super) struct Source {
    /// How errors name it (the path as given, or a test's name).
    pub(super) name: String,
    /// The folder relative paths written in it follow (`None`: not a file; left as written).
    pub(super) dir: Option<PathBuf>,
    /// Where it starts in the shared space of offsets.
    start: usize,
    pub(super) text: String,
}

#[derive(Default)]
pub(super) struct Sources {
    files: Vec<Source>,
    next: usize,
}

impl Sources {
    /// Add a text and parse it into a tree whose spans are in the shared space.
    pub(super) fn parse(&mut self, name: &str, dir: Option<&Path>, text: &str) -> Result<Table, ConfigError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let start = self.next;
        self.next = start + text.len() + 1;
        self.files.push(Source {
            name: name.to_string(),
            dir: dir.map(Path::to_path_buf),
            start,
            text: text.to_string(),
        });
        let mut padded = "\n".repeat(start);
        padded.push_str(text);
        let doc = ImDocument::parse(padded).map_err(|e| {
            let e = toml_edit::de::Error::from(e);
            self.parse_error(e.message(), e.span())
        })?;
        Ok(doc.into_table())
    }

    /// The name of the first text (the configuration file itself).
    pub(super) fn main(&self) -> &str {
        self.files.first().map_or("", |f| f.name.as_str())
    }

    /// The text holding `offset`, and the offset within it.
    pub(super) fn locate(&self, offset: usize) -> Option<(&Source, usize)> {
        let file = self.files.iter().rev().find(|f| f.start <= offset)?;
        Some((file, offset - file.start))
    }

    /// `file:line` of `offset`.
    pub(super) fn at(&self, offset: usize) -> String {
        match self.locate(offset) {
            Some((file, local)) => format!("{}:{}", file.name, line_col(&file.text, local).0),
            None => self.main().to_string(),
        }
    }

    /// The folder relative paths at `offset` follow.
    pub(super) fn dir_at(&self, offset: usize) -> Option<&Path> {
        self.locate(offset).and_then(|(file, _)| file.dir.as_deref())
    }

    /// A TOML syntax, unknown-key or type error: `file:line:column: message (in [table])`.
    pub(super) fn parse_error(&self, message: &str, span: Option<Range<usize>>) -> ConfigError {
        let msg = super::raw::friendly(message);
        let located = span.and_then(|span| self.locate(span.start));
        let message = match located {
            Some((file, local)) => {
                let text = &file.text;
                let (line, col) = line_col(text, local);
                let context = enclosing_table(text, local)
                    .map(|t| format!(" (in {t})"))
                    .unwrap_or_default();
                let header = text.lines().nth(line - 1).and_then(table_header);
                let hint = match header.as_deref() {
                    Some("[policy]") => " (write [[policy]]: each rule is a table of its own)",
                    _ => "",
                };
                format!("{}:{line}:{col}: {msg}{context}{hint}", file.name)
            }
            None => format!("{}: {msg}", self.main()),
        };
        ConfigError::Parse { message }
    }
}
