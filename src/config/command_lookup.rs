//! Where a stdio server's `command` would be found on this machine, by the rules of the system
//! that starts it (both sets are here, so each is tested on any machine):
//!
//! - Unix: a command with a `/` is a path, taken from the server's directory; any other is the
//!   first executable file of that name in a `PATH` directory.
//! - Windows: a command with a `/`, a `\` or a drive (`C:`) is a path (`.exe` added when there is
//!   no such file and it has no extension); any other is looked for in the `PATH` directories
//!   as Windows starts it, with `.exe` added when it has no extension, then in mcpmux's own
//!   folder and the system folders (where Rust's `Command` looks too). So npm's `npx`, which is
//!   `npx.cmd` there, is given as `npx.cmd` (the finding says so). There is no executable bit.

use crate::util::platform::Platform;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Where `command` would be found: a path relative to `dir`, else the first runnable file of
/// that name in `path` (the `PATH` it is looked up in).
pub(super) fn find_command(command: &str, path: Option<OsString>, dir: &Path) -> Result<PathBuf, String> {
    let also = match Platform::HERE {
        Platform::Unix => Vec::new(),
        Platform::Windows => windows_program_dirs(),
    };
    find_command_by(Platform::HERE, command, path, &also, dir)
}

/// Where Windows also finds a program by name, after `PATH`: the folder of mcpmux's own
/// executable, then `%SystemRoot%\System32` and `%SystemRoot%`.
fn windows_program_dirs() -> Vec<PathBuf> {
    let own = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf));
    let root = std::env::var_os("SystemRoot").map(PathBuf::from);
    (own.into_iter())
        .chain(root.iter().map(|root| root.join("System32")))
        .chain(root.clone())
        .collect()
}

/// [`find_command`] by `platform`'s rules, looking in `also` after the `PATH` directories.
fn find_command_by(
    platform: Platform,
    command: &str,
    path: Option<OsString>,
    also: &[PathBuf],
    dir: &Path,
) -> Result<PathBuf, String> {
    if is_path(platform, command) {
        let file = dir.join(command);
        return match runnable(platform, &file) {
            Ok(()) => Ok(file),
            Err(why) => match with_exe(platform, command).map(|name| dir.join(name)) {
                Some(exe) if runnable(platform, &exe).is_ok() => Ok(exe),
                _ => Err(format!("`{command}` {why}")),
            },
        };
    }
    let path = path.unwrap_or_default();
    let name = with_exe(platform, command).unwrap_or_else(|| command.to_string());
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|p| !p.as_os_str().is_empty())
        .chain(also.iter().cloned())
        .collect();
    if let Some(file) = dirs
        .iter()
        .map(|d| d.join(&name))
        .find(|f| runnable(platform, f).is_ok())
    {
        return Ok(file);
    }
    let mut why = format!(
        "`{command}` is not found on PATH ({}); install it or give its full path",
        path.to_string_lossy()
    );
    if let Some(script) = script_of_that_name(platform, command, &dirs) {
        why.push_str(&format!(
            " (Windows starts `{command}` as `{name}` only; the script {} is there: give `{}` as \
             the command)",
            script.display(),
            script.file_name().unwrap_or_default().to_string_lossy()
        ));
    }
    Err(why)
}

/// Whether `command` names a file by its path rather than a program to look for on `PATH`.
fn is_path(platform: Platform, command: &str) -> bool {
    match platform {
        Platform::Unix => command.contains('/'),
        Platform::Windows => {
            let drive = command.len() >= 2 && command.as_bytes()[1] == b':';
            command.contains(['/', '\\']) || drive
        }
    }
}

/// The name with `.exe` added, when Windows would add it (a command without an extension).
fn with_exe(platform: Platform, command: &str) -> Option<String> {
    let file_name = command.rsplit(['/', '\\']).next().unwrap_or(command);
    (platform == Platform::Windows && !file_name.contains('.')).then(|| format!("{command}.exe"))
}

/// On Windows, a batch script of that name in one of `dirs` (`npx.cmd`, `foo.bat`): what a bare
/// name given for it should have been.
fn script_of_that_name(platform: Platform, command: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    with_exe(platform, command)?;
    let scripts = ["cmd", "bat"].map(|ext| format!("{command}.{ext}"));
    dirs.iter()
        .flat_map(|dir| scripts.iter().map(move |script| dir.join(script)))
        .find(|file| file.is_file())
}

/// Whether `file` is there and can be started.
fn runnable(platform: Platform, file: &Path) -> Result<(), &'static str> {
    match std::fs::metadata(file) {
        Ok(meta) if meta.is_dir() => Err("is a directory"),
        Ok(meta) if platform == Platform::Unix && !has_execute_bit(&meta) => Err("is not executable"),
        Ok(_) => Ok(()),
        Err(_) => Err("does not exist"),
    }
}

#[cfg(unix)]
fn has_execute_bit(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn has_execute_bit(_meta: &std::fs::Metadata) -> bool {
    true
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A directory holding `files` (name, executable).
    fn dir_with(tag: &str, files: &[(&str, bool)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mcpmux-lookup-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        for (name, executable) in files {
            let file = dir.join(name);
            std::fs::write(&file, "").expect("write");
            let mode = if *executable { 0o755 } else { 0o644 };
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).expect("chmod");
        }
        dir
    }

    fn on(dir: &Path) -> Option<OsString> {
        Some(dir.as_os_str().to_owned())
    }

    #[test]
    fn unix_finds_executable_files_by_their_exact_name() {
        let dir = dir_with("unix", &[("server", true), ("plain", false), ("tool.exe", true)]);
        let found = |command: &str| find_command_by(Platform::Unix, command, on(&dir), &[], Path::new("/"));
        assert_eq!(found("server"), Ok(dir.join("server")));
        assert!(found("plain").is_err(), "not executable");
        assert!(found("tool").is_err(), "no .exe is added");
        let by_path = find_command_by(Platform::Unix, "./plain", None, &[], &dir);
        assert_eq!(by_path, Err("`./plain` is not executable".to_string()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn windows_adds_exe_to_a_name_without_extension_and_has_no_execute_bit() {
        let dir = dir_with(
            "win",
            &[("tool.exe", false), ("npx.cmd", false), ("run.bat", false)],
        );
        let found =
            |command: &str| find_command_by(Platform::Windows, command, on(&dir), &[], Path::new("/"));
        assert_eq!(found("tool"), Ok(dir.join("tool.exe")));
        assert_eq!(found("tool.exe"), Ok(dir.join("tool.exe")));
        assert_eq!(found("npx.cmd"), Ok(dir.join("npx.cmd")));
        let npx = found("npx").expect_err("npx is npx.cmd");
        assert!(npx.starts_with("`npx` is not found on PATH"), "{npx}");
        assert!(npx.ends_with("give `npx.cmd` as the command)"), "{npx}");
        assert!(found("run")
            .expect_err("a .bat")
            .ends_with("give `run.bat` as the command)"));
        let plain = found("absent").expect_err("nothing of that name");
        assert!(plain.ends_with("install it or give its full path"), "{plain}");
        // After PATH, the folders Windows also looks in.
        let elsewhere = find_command_by(
            Platform::Windows,
            "tool",
            None,
            std::slice::from_ref(&dir),
            Path::new("/"),
        );
        assert_eq!(elsewhere, Ok(dir.join("tool.exe")));
        // Paths: `\` and drives too; `.exe` is added when there is no such file.
        assert!(is_path(Platform::Windows, r"bin\server") && is_path(Platform::Windows, "C:server"));
        assert!(!is_path(Platform::Unix, r"bin\server"));
        let by_path = |command: &str| find_command_by(Platform::Windows, command, None, &[], &dir);
        assert_eq!(by_path("./tool"), Ok(dir.join("./tool.exe")));
        assert_eq!(by_path("./npx.cmd"), Ok(dir.join("./npx.cmd")));
        assert_eq!(by_path("./npx"), Err("`./npx` does not exist".to_string()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
