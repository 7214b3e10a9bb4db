//! `mcpmux import FILE… [--out FILE] [--force]`: read each client file, write one TOML
//! configuration to stdout or `--out` (never over an existing file without `--force`), and say
//! on stderr what was not carried. Exit status 0 written, 1 a file that does not parse (file,
//! line and column named), 2 a file that cannot be read or an output that cannot be written.

use super::names::Namer;
use super::vars::valid_var;
use super::{parse, render, ImportedServer, SourceFile, Transport};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Run the command; returns the exit status.
pub fn command(files: &[PathBuf], out: Option<&Path>, force: bool) -> u8 {
    if let Some(out) = out.filter(|o| o.exists() && !force) {
        eprintln!(
            "error: {} exists: not overwriting it (pass --force to replace it, or choose another --out)",
            out.display()
        );
        return 2;
    }
    let mut sources: Vec<(String, SourceFile)> = Vec::new();
    let (mut unreadable, mut unparsable) = (false, false);
    for file in files {
        let path = std::path::absolute(file).unwrap_or_else(|_| file.clone());
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(err) => {
                eprintln!("error: cannot read {}: {err}", file.display());
                unreadable = true;
                continue;
            }
        };
        match parse(&path, &text) {
            Ok(mut source) => {
                source.servers.iter_mut().for_each(read_env_file);
                sources.push((path.display().to_string(), source));
            }
            Err(err) => {
                eprintln!("error: {err}");
                unparsable = true;
            }
        }
    }
    if unreadable || unparsable {
        eprintln!("nothing written");
        return if unreadable { 2 } else { 1 };
    }
    let out_dir = match out {
        Some(out) => std::path::absolute(out)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf)),
        None => std::env::current_dir().ok(),
    };
    let out_dir = out_dir.map(|d| d.display().to_string()).unwrap_or_default();
    let rendered = render(&sources, &out_dir, &mut Namer::default());
    for warning in &rendered.warnings {
        eprintln!("warning: {warning}");
    }
    let written = match out {
        Some(out) => write_new(out, &rendered.text, force).map(|()| format!(" into {}", out.display())),
        None => (std::io::stdout().write_all(rendered.text.as_bytes())).map(|()| String::new()),
    };
    match written {
        Ok(into) => {
            eprintln!(
                "imported {} server(s) from {} file(s){into}",
                rendered.servers,
                sources.len()
            );
            0
        }
        Err(err) => {
            let to = out.map_or("stdout".to_string(), |o| o.display().to_string());
            eprintln!("error: cannot write {to}: {err}");
            2
        }
    }
}

/// Write `text` to `path`: a new file, or (with `force`) over the existing one.
fn write_new(path: &Path, text: &str, force: bool) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(force)
        .create_new(!force)
        .truncate(force)
        .open(path)?;
    file.write_all(text.as_bytes())
}

/// The variable names an env file (`NAME=value` lines, `#` comments, `export ` allowed) sets.
pub fn env_file_names(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((name, _)) = line.split_once('=') else {
            continue;
        };
        let name = name.trim();
        if !line.starts_with('#') && valid_var(name) && !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    names
}

/// A stdio server's `envFile` read (file I/O): each variable it sets that `env` does not becomes
/// `NAME = "${NAME}"` (values stay out of the TOML; mcpmux reads them from its environment).
pub fn read_env_file(server: &mut ImportedServer) {
    let Transport::Stdio {
        env,
        env_file: Some(file),
        ..
    } = &mut server.transport
    else {
        return;
    };
    if file.contains("${") {
        let line = format!("not carried: envFile {file:?} names variables, so it was not read at import");
        server.dropped.push(line);
        return;
    }
    let path = file.replace("$$", "$");
    let names = match std::fs::read_to_string(&path) {
        Ok(text) => env_file_names(&text),
        Err(err) => {
            let line = format!(
                "not carried: envFile {path:?} could not be read ({err}): set its variables in `env`"
            );
            server.dropped.push(line);
            return;
        }
    };
    let added: Vec<String> = names
        .into_iter()
        .filter(|n| !env.iter().any(|(k, _)| k == n))
        .collect();
    for name in &added {
        env.push((name.clone(), format!("${{{name}}}")));
    }
    server.notes.push(format!(
        "envFile {path:?}: its variables ({}) are read from mcpmux's environment: load the file into it \
         (e.g. `set -a; . {path}; set +a`, or systemd's EnvironmentFile=)",
        added.join(", ")
    ));
}

#[cfg(test)]
mod tests {
    use super::env_file_names;

    #[test]
    fn env_file_names_are_read_without_their_values() {
        let text =
            "# secrets\nAPI_KEY=abc\nexport REGION = eu\n\nbad name=1\nAPI_KEY=again\n#X=1\nnot a pair\n";
        assert_eq!(env_file_names(text), ["API_KEY", "REGION"]);
    }
}
