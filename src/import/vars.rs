//! The clients' variable syntaxes rewritten into mcpmux's interpolation (`${VAR}`,
//! `${VAR:-default}`, `$$` for a literal `$`): Claude Code's `${VAR}`/`${VAR:-default}`, Cursor's
//! and VS Code's `${env:NAME}`, `${userHome}`, `${workspaceFolder}`, `${/}`, and VS Code's
//! `${input:ID}` (read from the variable named after the input). Claude Desktop expands nothing.

use super::Format;
use std::collections::BTreeMap;

/// A VS Code `inputs` entry, and the variable it becomes.
#[derive(Clone, Debug)]
pub struct Input {
    pub var: String,
    /// `promptString`, `pickString`, `command`...
    pub kind: String,
    pub description: Option<String>,
    pub password: bool,
    pub default: Option<String>,
}

/// What a file's strings are rewritten with.
pub struct Vars {
    pub format: Format,
    /// The folder `${workspaceFolder}` names (and where the client runs stdio servers), if known.
    pub workspace: Option<String>,
    /// VS Code inputs by id.
    pub inputs: BTreeMap<String, Input>,
}

/// One rewritten string and what the rewrite wants said about it.
#[derive(Default)]
pub struct Rewritten {
    pub text: String,
    /// Sentences for the server's comments (inputs used, variables left unexpanded...).
    pub notes: Vec<String>,
    /// The variables of VS Code inputs without a default: the server cannot start without
    /// them (its `needs_env`).
    pub needs: Vec<String>,
}

impl Vars {
    /// `value` (as the client reads it) in mcpmux's interpolation syntax.
    pub fn rewrite(&self, value: &str) -> Rewritten {
        let mut out = Rewritten::default();
        let mut rest = value;
        while let Some(pos) = rest.find('$') {
            out.text.push_str(&rest[..pos]);
            let after = &rest[pos + 1..];
            let placeholder = after
                .strip_prefix('{')
                .and_then(|tail| tail.find('}').map(|end| &tail[..end]));
            match placeholder {
                Some(inner) if self.format != Format::ClaudeDesktop => {
                    self.placeholder(inner, &mut out);
                    rest = &after[inner.len() + 2..];
                }
                _ => {
                    out.text.push_str("$$");
                    rest = after;
                }
            }
        }
        out.text.push_str(rest);
        out
    }

    /// One `${inner}` of a client that expands placeholders.
    fn placeholder(&self, inner: &str, out: &mut Rewritten) {
        let literal = |out: &mut Rewritten, why: &str| {
            out.text.push_str(&escape(&format!("${{{inner}}}")));
            out.notes
                .push(format!("\"${{{inner}}}\" is kept as literal text: {why}"));
        };
        if self.format.is_claude_code() {
            let (name, default) = match inner.split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (inner, None),
            };
            if !valid_var(name) {
                return literal(out, "not a variable name mcpmux reads");
            }
            push_var(out, name, default);
            return;
        }
        if let Some(name) = inner.strip_prefix("env:") {
            if valid_var(name) {
                return push_var(out, name, None);
            }
            return literal(out, "not a variable name mcpmux reads");
        }
        if let Some(id) = inner.strip_prefix("input:") {
            if self.format == Format::VsCode {
                return self.input(id, out);
            }
        }
        match inner {
            "userHome" => push_var(out, "HOME", None),
            "/" | "pathSeparator" => out.text.push('/'),
            "workspaceFolder" | "workspaceRoot" => match &self.workspace {
                Some(dir) => out.text.push_str(&escape(dir)),
                None => {
                    push_var(out, "workspaceFolder", None);
                    out.notes.push(
                        "this file belongs to no workspace: set workspaceFolder in mcpmux's environment"
                            .into(),
                    );
                }
            },
            "workspaceFolderBasename" => match self.workspace.as_deref().map(basename) {
                Some(base) => out.text.push_str(&escape(base)),
                None => literal(out, "this file belongs to no workspace"),
            },
            _ => literal(out, "mcpmux has no such variable"),
        }
    }

    /// `${input:ID}`: the input's variable, with the input's default when it has one.
    fn input(&self, id: &str, out: &mut Rewritten) {
        let Some(input) = self.inputs.get(id) else {
            let var = input_var(id);
            push_var(out, &var, None);
            out.needs.push(var.clone());
            out.notes.push(format!(
                "${{{var}}} stands for VS Code input \"{id}\", which the file does not declare: set {var} in mcpmux's environment"
            ));
            return;
        };
        push_var(out, &input.var, input.default.as_deref());
        if input.default.is_none() {
            out.needs.push(input.var.clone());
        }
        let mut what = input.kind.clone();
        if let Some(description) = &input.description {
            what.push_str(&format!(" {description:?}"));
        }
        if input.password {
            what.push_str(", a secret");
        }
        let default = match &input.default {
            Some(_) => " (its default is kept)",
            None => " (until it is set, this server is not started: needs_env)",
        };
        out.notes.push(format!(
            "${{{}}} is VS Code input \"{id}\" ({what}): set {} in mcpmux's environment{default}",
            input.var, input.var
        ));
    }
}

fn push_var(out: &mut Rewritten, name: &str, default: Option<&str>) {
    match default {
        Some(default) => out.text.push_str(&format!("${{{name}:-{}}}", escape(default))),
        None => out.text.push_str(&format!("${{{name}}}")),
    }
}

/// Literal text for mcpmux: every `$` doubled.
pub fn escape(text: &str) -> String {
    text.replace('$', "$$")
}

/// Whether mcpmux reads `name` as a variable (a letter or `_`, then letters, digits and `_`).
pub fn valid_var(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The variable a VS Code input id becomes: upper case, anything but letters and digits `_`
/// (`api-key` is `API_KEY`), `_` in front of a leading digit.
pub fn input_var(id: &str) -> String {
    let mut var: String = (id.chars())
        .map(|c| match c.is_ascii_alphanumeric() {
            true => c.to_ascii_uppercase(),
            false => '_',
        })
        .collect();
    if !var.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        var.insert(0, '_');
    }
    var
}

fn basename(dir: &str) -> &str {
    let trimmed = dir.trim_end_matches('/');
    trimmed.rsplit('/').next().unwrap_or(trimmed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(format: Format) -> Vars {
        let mut inputs = BTreeMap::new();
        inputs.insert(
            "api-key".to_string(),
            Input {
                var: "API_KEY".into(),
                kind: "promptString".into(),
                description: Some("Your key".into()),
                password: true,
                default: None,
            },
        );
        inputs.insert(
            "region".to_string(),
            Input {
                var: "REGION".into(),
                kind: "pickString".into(),
                description: None,
                password: false,
                default: Some("eu-$1".into()),
            },
        );
        Vars {
            format,
            workspace: Some("/home/u/proj".into()),
            inputs,
        }
    }

    fn text(format: Format, value: &str) -> String {
        vars(format).rewrite(value).text
    }

    #[test]
    fn claude_desktop_expands_nothing() {
        assert_eq!(
            text(Format::ClaudeDesktop, "${HOME}/x $y $$"),
            "$${HOME}/x $$y $$$$"
        );
    }

    #[test]
    fn claude_code_keeps_vars_and_defaults() {
        let f = Format::ClaudeCode;
        assert_eq!(text(f, "Bearer ${TOKEN}"), "Bearer ${TOKEN}");
        assert_eq!(text(f, "${URL:-http://x:1/$p}"), "${URL:-http://x:1/$$p}");
        assert_eq!(text(f, "$HOME and $"), "$$HOME and $$");
        let odd = vars(f).rewrite("${env:X}");
        assert_eq!(odd.text, "$${env:X}");
        assert!(odd.notes[0].contains("literal"), "{:?}", odd.notes);
        assert_eq!(text(Format::ClaudeCodeUser, "${A:-b}"), "${A:-b}");
    }

    #[test]
    fn cursor_and_vs_code_variables() {
        for f in [Format::Cursor, Format::VsCode] {
            assert_eq!(text(f, "${env:TOKEN}"), "${TOKEN}");
            assert_eq!(text(f, "${userHome}/.x"), "${HOME}/.x");
            assert_eq!(text(f, "${workspaceFolder}${/}a"), "/home/u/proj/a");
            assert_eq!(text(f, "${workspaceFolderBasename}"), "proj");
            assert_eq!(text(f, "${VAR}"), "$${VAR}");
            assert_eq!(text(f, "${command:x.y}"), "$${command:x.y}");
        }
        let no_workspace = Vars {
            workspace: None,
            ..vars(Format::Cursor)
        };
        let r = no_workspace.rewrite("${workspaceFolder}/srv");
        assert_eq!(r.text, "${workspaceFolder}/srv");
        assert!(r.notes[0].contains("workspaceFolder"), "{:?}", r.notes);
    }

    #[test]
    fn vs_code_inputs_become_variables_with_a_note() {
        let r = vars(Format::VsCode).rewrite("Bearer ${input:api-key}");
        assert_eq!(r.text, "Bearer ${API_KEY}");
        assert!(
            r.notes[0].contains("VS Code input \"api-key\"")
                && r.notes[0].contains("promptString \"Your key\"")
                && r.notes[0].contains("a secret"),
            "{:?}",
            r.notes
        );
        assert_eq!(text(Format::VsCode, "${input:region}"), "${REGION:-eu-$$1}");
        let undeclared = vars(Format::VsCode).rewrite("${input:9-lives}");
        assert_eq!(undeclared.text, "${_9_LIVES}");
        assert!(undeclared.notes[0].contains("does not declare"));
        assert_eq!(text(Format::Cursor, "${input:api-key}"), "$${input:api-key}");
    }
}
