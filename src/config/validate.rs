//! The rules a whole configuration keeps, checked on typed values, whatever the configuration
//! was read from (a TOML file today; a client's `mcpServers` JSON file needs the same rules). The
//! TOML loader points a broken rule at its line; other sources report the dotted path.

use super::{Config, UpstreamId};
use std::collections::HashMap;
use std::fmt;

/// What a namespace may be.
pub(super) const NS_RULE: &str = "1 to 64 characters of A-Z a-z 0-9 _ . -";

/// Whether `name` is an exposed tool or prompt name every model API accepts within `budget`
/// characters: `[A-Za-z0-9_-]` only, starting with a letter or `_` (the Claude, OpenAI and
/// Gemini rules at once).
pub fn valid_exposed_name(name: &str, budget: usize) -> bool {
    let starts_well = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
    let alphabet = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    starts_well && name.len() <= budget && name.chars().all(alphabet)
}

/// Whether `ns` is a namespace (the empty one, "no prefix", is allowed separately).
pub(super) fn valid_namespace(ns: &str) -> bool {
    (1..=64).contains(&ns.len())
        && ns
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// A rule the configuration breaks: where (a dotted path such as `servers.docs.namespace`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub path: String,
    /// The server the problem is about, if it is about one.
    pub server: Option<UpstreamId>,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

fn problem(server: &UpstreamId, key: &str, message: String) -> Problem {
    Problem {
        path: format!("servers.{server}.{key}"),
        server: Some(server.clone()),
        message,
    }
}

impl Config {
    /// Check the rules that hold for any configuration: a usable separator, one server per id,
    /// each id its server's name, valid and distinct namespaces, nonzero limits.
    pub fn validate(&self) -> Result<(), Problem> {
        match self.problems().into_iter().next() {
            Some(problem) => Err(problem),
            None => Ok(()),
        }
    }

    /// Every rule of [`Config::validate`] the configuration breaks (at most one per server).
    pub fn problems(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        if self.gateway.separator.is_empty() {
            out.push(Problem {
                path: "gateway.separator".into(),
                server: None,
                message: "gateway.separator must not be empty".into(),
            });
        }
        let mut ids: HashMap<&UpstreamId, &str> = HashMap::new();
        let mut namespaces: HashMap<&str, &str> = HashMap::new();
        for server in &self.servers {
            if server.id.as_str() != server.name || server.name.is_empty() {
                let message = format!("server {:?} must be known by its name", server.name);
                out.push(problem(&server.id, "name", message));
                continue;
            }
            if ids.insert(&server.id, &server.name).is_some() {
                let message = format!("two servers are named {:?}", server.name);
                out.push(problem(&server.id, "name", message));
                continue;
            }
            let ns = server.namespace.as_str();
            if !ns.is_empty() && !valid_namespace(ns) {
                let message = format!("namespace {ns:?} must be {NS_RULE} (or \"\" for no prefix)");
                out.push(problem(&server.id, "namespace", message));
                continue;
            }
            if let Some(other) = (!ns.is_empty())
                .then(|| namespaces.insert(ns, &server.name))
                .flatten()
            {
                let message = format!(
                    "servers {other:?} and {:?} both use namespace {ns:?}; set a distinct `namespace`",
                    server.name
                );
                out.push(problem(&server.id, "namespace", message));
                continue;
            }
            if server.max_in_flight == 0 || server.max_line_bytes == 0 {
                let message = "max_in_flight and max_line_bytes must be at least 1".to_string();
                out.push(problem(&server.id, "max_in_flight", message));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::from_toml_str(text, "t.toml", &|_| None).unwrap()
    }

    #[test]
    fn typed_values_are_checked_whatever_their_source() {
        let mut c = config("[servers.a]\ncommand = \"x\"\n[servers.b]\ncommand = \"y\"\n");
        assert_eq!(c.validate(), Ok(()));
        c.servers[1].namespace = "a".into();
        let p = c.validate().unwrap_err();
        assert_eq!(p.path, "servers.b.namespace");
        assert!(p.message.contains("both use namespace \"a\""), "{p}");
        c.servers[1].namespace = "no spaces".into();
        assert_eq!(c.validate().unwrap_err().path, "servers.b.namespace");
        c.servers[1] = c.servers[0].clone();
        assert!(c
            .validate()
            .unwrap_err()
            .message
            .contains("two servers are named"));
        c.servers.truncate(1);
        c.servers[0].max_in_flight = 0;
        assert_eq!(c.validate().unwrap_err().path, "servers.a.max_in_flight");
        c.servers[0].max_in_flight = 1;
        c.gateway.separator.clear();
        assert_eq!(c.validate().unwrap_err().path, "gateway.separator");
    }
}
