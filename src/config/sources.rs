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
    /// For an `mcp_json` file: its JSON text (`text` is the TOML it was converted to), so that
    /// errors name the JSON file's lines.
    json: Option<String>,
}

impl Source {
    /// 1-based (line, column) of `local` in the file as written (for a converted JSON file,
    /// the line of the server's entry and key there; column 1).
    pub(super) fn line_col(&self, local: usize) -> (usize, usize) {
        let (line, col) = line_col(&self.text, local);
        match &self.json {
            None => (line, col),
            Some(json) => (json_line(json, &self.text, line), 1),
        }
    }
}

/// The line of `json` that wrote line `line` of `converted` (`mcpmux import`'s TOML, where each
/// server follows a `# From FILE, "NAME"` comment): the first line naming the TOML line's key
/// after the line naming the server, else that line, else 1.
fn json_line(json: &str, converted: &str, line: usize) -> usize {
    let lines: Vec<&str> = converted.lines().take(line).collect();
    let key = (lines.last())
        .and_then(|l| l.split_once('='))
        .map(|(k, _)| k.trim().trim_matches('"').to_string())
        .filter(|k| !k.is_empty() && !k.starts_with('['));
    let name = lines.iter().rev().find_map(|l| {
        let rest = l.strip_prefix("# From ")?;
        let start = rest.rfind(", \"")?;
        Some(rest[start + 2..].trim_end().trim_matches('"').to_string())
    });
    let Some(name) = name else { return 1 };
    let quoted = |k: &str| format!("\"{k}\"");
    let json_lines: Vec<&str> = json.lines().collect();
    let Some(entry) = json_lines.iter().position(|l| l.contains(&quoted(&name))) else {
        return 1;
    };
    let within = key.and_then(|k| json_lines[entry..].iter().position(|l| l.contains(&quoted(&k))));
    entry + within.unwrap_or(0) + 1
}

#[derive(Default)]
pub(super) struct Sources {
    files: Vec<Source>,
    next: usize,
}

impl Sources {
    /// Add a text and parse it into a tree whose spans are in the shared space.
    pub(super) fn parse(&mut self, name: &str, dir: Option<&Path>, text: &str) -> Result<Table, ConfigError> {
        self.parse_converted(name, dir, text, None)
    }

    /// [`Sources::parse`] of the TOML an `mcp_json` file named `name` was converted to, its
    /// errors pointing at the lines of `json` (the file as written).
    pub(super) fn parse_converted(
        &mut self,
        name: &str,
        dir: Option<&Path>,
        text: &str,
        json: Option<&str>,
    ) -> Result<Table, ConfigError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let start = self.next;
        self.next = start + text.len() + 1;
        self.files.push(Source {
            name: name.to_string(),
            dir: dir.map(Path::to_path_buf),
            start,
            text: text.to_string(),
            json: json.map(str::to_string),
        });
        let mut padded = "\n".repeat(start);
        padded.push_str(text);
        let doc = ImDocument::parse(padded).map_err(|e| {
            let e = toml_edit::de::Error::from(e);
            self.parse_error(e.message(), e.span())
        })?;
        Ok(doc.into_table())
    }

    /// Count `name` among the texts although it could not be read (an `mcp_json` file that is
    /// not JSON): its errors then sort in its place.
    pub(super) fn name_unread(&mut self, name: &str) {
        self.files.push(Source {
            name: name.to_string(),
            dir: None,
            start: self.next,
            text: String::new(),
            json: None,
        });
        self.next += 1;
    }

    /// Where a message starting with `file:line` points: the file's place among the texts (in
    /// the order they were read) and the line; messages naming no text come last.
    pub(super) fn order_of(&self, message: &str) -> (usize, usize) {
        let found = self.files.iter().enumerate().find_map(|(i, file)| {
            let rest = message.strip_prefix(file.name.as_str())?.strip_prefix(':')?;
            let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
            Some((i, rest[..digits].parse().unwrap_or(0)))
        });
        found.unwrap_or((usize::MAX, 0))
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
            Some((file, local)) => format!("{}:{}", file.name, file.line_col(local).0),
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
                let (line, col) = file.line_col(local);
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
