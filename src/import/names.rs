//! Server names: a client's name made a valid mcpmux server name (which is also its namespace:
//! 1 to 64 of `A-Z a-z 0-9 _ . -`), and one name per server across every file read, a second
//! server wanting a taken name getting `-2`, `-3`... and an identical one kept once.

use super::{ImportedServer, Transport};
use std::collections::HashMap;

/// The longest server name (a namespace is at most 64 characters).
const MAX: usize = 64;

/// What a name may be.
pub const NAME_RULE: &str = "1 to 64 characters of A-Z a-z 0-9 _ . -";

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

/// `name` as a valid server name: kept when it is one; otherwise each run of other characters
/// becomes one `-`, `-` at either end goes, it is cut to 64 characters, and nothing left is
/// `server`.
pub fn valid_name(name: &str) -> String {
    if (1..=MAX).contains(&name.len()) && name.chars().all(allowed) {
        return name.to_string();
    }
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if allowed(c) {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let mut out = out.trim_matches('-').to_string();
    out.truncate(MAX);
    match out.is_empty() {
        true => "server".to_string(),
        false => out,
    }
}

/// The name of a Claude Code project entry (`projects.<path>.mcpServers.<name>` of
/// `~/.claude.json`): the project folder's name, `-`, the entry's name.
pub fn project_name(project: &str, name: &str) -> String {
    let trimmed = project.trim_end_matches(['/', '\\']);
    let folder = trimmed.rsplit(['/', '\\']).next().unwrap_or(trimmed);
    let folder = match folder.is_empty() {
        true => "project",
        false => folder,
    };
    valid_name(&format!("{folder}-{name}"))
}

/// The names given so far.
#[derive(Default)]
pub struct Namer {
    /// Name → the server that has it (`None`: a name reserved by the caller) and where it is from.
    taken: HashMap<String, (Option<Transport>, String)>,
}

/// Where a server went.
#[derive(Debug, PartialEq, Eq)]
pub enum Placed {
    /// Under this name (the one it wanted, or that name with a `-N` suffix).
    Named(String),
    /// Not at all: the server named so, from there, is the same.
    Duplicate { name: String, origin: String },
}

impl Namer {
    /// Keep `name` for a server defined elsewhere (say, in the TOML file that reads these).
    pub fn reserve(&mut self, name: &str, origin: &str) {
        self.taken.insert(name.to_string(), (None, origin.to_string()));
    }

    /// Place `server` (from `origin`): under its name if free, nowhere if the server with that
    /// name is identical, else under the first free `name-N`.
    pub fn place(&mut self, server: &ImportedServer, origin: &str) -> Placed {
        let wanted = &server.name;
        if let Some((Some(transport), first)) = self.taken.get(wanted) {
            if *transport == server.transport {
                return Placed::Duplicate {
                    name: wanted.clone(),
                    origin: first.clone(),
                };
            }
        }
        let mut name = wanted.clone();
        let mut n = 2;
        while self.taken.contains_key(&name) {
            let suffix = format!("-{n}");
            let mut base = wanted.clone();
            base.truncate(MAX - suffix.len());
            name = format!("{base}{suffix}");
            n += 1;
        }
        let entry = (Some(server.transport.clone()), origin.to_string());
        self.taken.insert(name.clone(), entry);
        Placed::Named(name)
    }

    /// Where the server named `name` came from.
    pub fn origin(&self, name: &str) -> Option<&str> {
        self.taken.get(name).map(|(_, origin)| origin.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_names_are_made_valid() {
        assert_eq!(valid_name("github"), "github");
        assert_eq!(valid_name("my.server_1-x"), "my.server_1-x");
        assert_eq!(valid_name("My Server (beta)"), "My-Server-beta");
        assert_eq!(valid_name("@scope/pkg"), "scope-pkg");
        assert_eq!(valid_name("日本"), "server");
        assert_eq!(valid_name(""), "server");
        assert_eq!(valid_name(&"a".repeat(70)).len(), 64);
        assert_eq!(project_name("/home/u/src/api", "db"), "api-db");
        assert_eq!(project_name("/home/u/my app/", "db"), "my-app-db");
        assert_eq!(project_name("/", "db"), "project-db");
        assert_eq!(project_name("C:\\work\\web", "db"), "web-db");
    }

    fn server(name: &str, command: &str) -> ImportedServer {
        ImportedServer {
            name: name.into(),
            source_name: name.into(),
            project: None,
            transport: Transport::Stdio {
                command: command.into(),
                args: Vec::new(),
                env: Vec::new(),
                cwd: None,
                cwd_is_workspace: false,
                env_file: None,
            },
            disabled: false,
            notes: Vec::new(),
            dropped: Vec::new(),
            needs_env: Vec::new(),
        }
    }

    #[test]
    fn collisions_get_a_suffix_and_twins_are_kept_once() {
        let mut namer = Namer::default();
        namer.reserve("kept", "mcpmux.toml");
        assert_eq!(namer.place(&server("a", "x"), "one"), Placed::Named("a".into()));
        assert_eq!(
            namer.place(&server("a", "x"), "two"),
            Placed::Duplicate {
                name: "a".into(),
                origin: "one".into()
            }
        );
        assert_eq!(namer.place(&server("a", "y"), "two"), Placed::Named("a-2".into()));
        assert_eq!(
            namer.place(&server("a", "z"), "three"),
            Placed::Named("a-3".into())
        );
        assert_eq!(
            namer.place(&server("kept", "x"), "two"),
            Placed::Named("kept-2".into())
        );
        let long = "b".repeat(64);
        namer.place(&server(&long, "x"), "one");
        let Placed::Named(second) = namer.place(&server(&long, "y"), "two") else {
            panic!("not placed")
        };
        assert_eq!(second.len(), 64);
        assert!(second.ends_with("-2"));
        assert_eq!(namer.origin("a-2"), Some("two"));
    }
}
