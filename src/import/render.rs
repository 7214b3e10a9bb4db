//! The TOML `mcpmux import` writes: a header naming the sources, then per file its servers as
//! `[servers.NAME]` tables, each under comments saying what was converted and what was not;
//! a disabled entry is written commented out, one mcpmux cannot serve only as a comment.

use super::names::{Namer, Placed};
use super::{HttpMode, ImportedServer, SourceFile, Transport};
use std::fmt::Write as _;

/// The output and what the user should be told.
pub struct Rendered {
    pub text: String,
    /// One line each: what was not carried, renamed or left out.
    pub warnings: Vec<String>,
    /// How many `[servers.NAME]` tables were written (not counting commented-out ones).
    pub servers: usize,
}

/// Write `sources` (each with the path to show for it) as one TOML file that will live in
/// `out_dir` (stdio servers run in their client's workspace folder when it is another one).
/// `namer` gives each server its final name.
pub fn render(sources: &[(String, SourceFile)], out_dir: &str, namer: &mut Namer) -> Rendered {
    let mut out = Rendered {
        text: String::new(),
        warnings: Vec::new(),
        servers: 0,
    };
    let mut text = String::new();
    text.push_str("# mcpmux configuration written by `mcpmux import` from:\n");
    for (path, file) in sources {
        let _ = writeln!(text, "#   {} ({})", one_line(path), file.format.label());
    }
    text.push_str(
        "# Check it with `mcpmux check-config --config FILE`, serve it with `mcpmux serve --config FILE`.\n\
         # ${VAR} is read from mcpmux's environment when the file loads (${VAR:-default} when unset or\n\
         # empty); $$ is a literal $.\n",
    );
    out.text = text;
    for (path, file) in sources {
        let text = &mut out.text;
        let _ = write!(
            text,
            "\n# ---- {} ({}) ----\n",
            one_line(path),
            file.format.label()
        );
        for note in &file.notes {
            let _ = writeln!(text, "# {}", one_line(note));
        }
        for warning in file.warnings() {
            out.warnings.push(format!("{path}: {warning}"));
        }
        if file.servers.is_empty() {
            out.text.push_str("# (no servers)\n");
        }
        for server in &file.servers {
            let origin = format!("{path}, {:?}", server.source_name);
            server_block(&mut out, server, &origin, out_dir, namer);
        }
    }
    out
}

/// One server: its comments, then its table (commented out when it is disabled).
fn server_block(out: &mut Rendered, server: &ImportedServer, origin: &str, out_dir: &str, namer: &mut Namer) {
    let mut block = String::from("\n");
    let placed = place(out, &mut block, server, origin, out_dir, namer);
    out.text.push_str(&block);
    out.servers += usize::from(placed);
}

/// Write `server`'s comments and table into `text`; whether a table was written.
fn place(
    out: &mut Rendered,
    text: &mut String,
    server: &ImportedServer,
    origin: &str,
    out_dir: &str,
    namer: &mut Namer,
) -> bool {
    let _ = writeln!(text, "# From {}", one_line(origin));
    for note in server.notes.iter().chain(&server.dropped) {
        let _ = writeln!(text, "# {}", one_line(note));
    }
    if let Transport::Unsupported(why) = &server.transport {
        let _ = writeln!(text, "# not converted: {}", one_line(why));
        return false;
    }
    let name = match namer.place(server, origin) {
        Placed::Named(name) => name,
        Placed::Duplicate { name, origin: first } => {
            let line = format!("the same server as [servers.{name}] (from {first}): kept once");
            let _ = writeln!(text, "# {}", one_line(&line));
            out.warnings.push(format!("{origin}: {line}"));
            return false;
        }
    };
    if name != server.name {
        let first = namer.origin(&server.name).unwrap_or("another entry");
        let line = format!("named {name}: {} is taken (by {first})", server.name);
        let _ = writeln!(text, "# {}", one_line(&line));
        out.warnings.push(format!("{origin}: {line}"));
    } else if server.name != server.source_name && server.project.is_none() {
        out.warnings
            .push(format!("{origin}: named {name} (not a valid server name)"));
    }
    let table = server_toml(&name, server, Some(out_dir));
    if server.disabled {
        text.push_str("# disabled there (\"disabled\": true): kept here commented out\n");
        for line in table.lines() {
            let _ = writeln!(text, "# {line}");
        }
        out.warnings
            .push(format!("{origin}: disabled there, written commented out"));
        return false;
    }
    text.push_str(&table);
    true
}

/// The `[servers.NAME]` table of `server` (nothing for one mcpmux cannot serve). Its `cwd` is
/// left out when it is only the client's workspace folder and that is `out_dir` (where mcpmux
/// runs servers of a file by default).
pub fn server_toml(name: &str, server: &ImportedServer, out_dir: Option<&str>) -> String {
    let mut t = String::new();
    let table = format!("servers.{}", key(name));
    match &server.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
            cwd_is_workspace,
            env_file: _,
        } => {
            let _ = writeln!(t, "[{table}]");
            let _ = writeln!(t, "command = {}", string(command));
            if !args.is_empty() {
                let items: Vec<String> = args.iter().map(|a| string(a)).collect();
                let _ = writeln!(t, "args = [{}]", items.join(", "));
            }
            let implicit = *cwd_is_workspace && cwd.as_deref().map(unescape) == out_dir.map(str::to_string);
            if let Some(cwd) = cwd.as_ref().filter(|_| !implicit) {
                let _ = writeln!(t, "cwd = {}", string(cwd));
            }
            needs_env(&mut t, &server.needs_env);
            pairs(&mut t, &table, "env", env);
        }
        Transport::Http { url, headers, mode } => {
            let _ = writeln!(t, "[{table}]");
            let _ = writeln!(t, "url = {}", string(url));
            match mode {
                HttpMode::Auto => {}
                HttpMode::StreamableHttp => t.push_str("transport = \"streamable-http\"\n"),
                HttpMode::Sse => t.push_str("transport = \"sse\"\n"),
            }
            needs_env(&mut t, &server.needs_env);
            pairs(&mut t, &table, "headers", headers);
        }
        Transport::Unsupported(_) => {}
    }
    t
}

/// `needs_env = [...]`: the variables the server waits for (none: no line).
fn needs_env(t: &mut String, vars: &[String]) {
    if vars.is_empty() {
        return;
    }
    let items: Vec<String> = vars.iter().map(|v| string(v)).collect();
    let _ = writeln!(t, "needs_env = [{}]", items.join(", "));
}

fn pairs(t: &mut String, table: &str, name: &str, pairs: &[(String, String)]) {
    if pairs.is_empty() {
        return;
    }
    let _ = writeln!(t, "\n[{table}.{name}]");
    for (k, v) in pairs {
        let _ = writeln!(t, "{} = {}", key(k), string(v));
    }
}

/// A TOML key: bare when it can be, else quoted.
fn key(k: &str) -> String {
    let bare = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    match bare {
        true => k.to_string(),
        false => string(k),
    }
}

/// A TOML basic string.
fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A comment's text on one line.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// mcpmux's text for a literal path back to the path (`$$` is `$`).
fn unescape(s: &str) -> String {
    s.replace("$$", "$")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_keys_are_valid_toml() {
        let nasty = "a\"b\\c\nd\te\u{1}f\u{7f}é";
        let doc = format!("{} = {}\n", key("x.y z"), string(nasty));
        let parsed: toml::Table = toml::from_str(&doc).expect("valid TOML");
        assert_eq!(parsed["x.y z"].as_str(), Some(nasty));
        assert_eq!(key("API_KEY-2"), "API_KEY-2");
    }
}
