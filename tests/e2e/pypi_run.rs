//! `scripts/pypi-run.sh`, the way the README's example starts PyPI servers, driven for real
//! (python3's venv and pip) against a local wheel of a tiny package (no network: pip looks only
//! in a folder): an install killed midway is resumed by the next start, not thrown away; a
//! completed venv is run as it is, never made again; starts that find no venv install once
//! between them.

use crate::support::{path_str, repo_root, scratch_dir};
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const SPEC: &str = "mcpmuxfake==1.0";
/// Bounds for a venv and an install on a loaded machine.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(180);

/// A folder with the wheel of `mcpmuxfake` 1.0, whose `python -m mcpmuxfake ARGS` prints
/// "mcpmuxfake ran ARGS".
fn wheel_dir(root: &Path) -> PathBuf {
    let dir = root.join("wheels");
    fs::create_dir_all(&dir).expect("wheel dir");
    let make = r#"
import sys, zipfile
files = {
    "mcpmuxfake/__init__.py": "",
    "mcpmuxfake/__main__.py": "import sys\nprint('mcpmuxfake ran', *sys.argv[1:])\n",
    "mcpmuxfake-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: mcpmuxfake\nVersion: 1.0\n",
    "mcpmuxfake-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: mcpmux-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
files["mcpmuxfake-1.0.dist-info/RECORD"] = "".join(f"{name},,\n" for name in files) + "mcpmuxfake-1.0.dist-info/RECORD,,\n"
with zipfile.ZipFile(sys.argv[1] + "/mcpmuxfake-1.0-py3-none-any.whl", "w") as whl:
    for name, text in files.items():
        whl.writestr(name, text)
"#;
    let out = Command::new("python3")
        .args(["-c", make, &path_str(&dir)])
        .output()
        .expect("run python3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    dir
}

/// `sh scripts/pypi-run.sh mcpmuxfake==1.0 mcpmuxfake ARG`, caching under `root/cache`, pip
/// finding packages only in `wheels`; in a process group of its own.
fn pypi_run(root: &Path, wheels: &Path, arg: &str) -> Child {
    let script = repo_root().join("scripts").join("pypi-run.sh");
    Command::new("sh")
        .arg(&script)
        .args([SPEC, "mcpmuxfake", arg])
        .env("XDG_CACHE_HOME", root.join("cache"))
        .env("PIP_NO_INDEX", "1")
        .env("PIP_FIND_LINKS", wheels)
        .env("PIP_CACHE_DIR", root.join("pip-cache"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("spawn pypi-run.sh")
}

/// Wait for `child` (bounded); its output.
fn finish(child: Child) -> Output {
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(INSTALL_TIMEOUT) {
        Ok(out) => out.expect("wait for pypi-run.sh"),
        Err(_) => {
            // SAFETY: our own child's process group.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            panic!("pypi-run.sh did not finish within {INSTALL_TIMEOUT:?}");
        }
    }
}

fn venvs(root: &Path) -> PathBuf {
    root.join("cache").join("mcpmux").join("venvs")
}

/// Whether `dir` is a finished venv as pypi-run.sh marks it.
fn finished(dir: &Path) -> bool {
    dir.join(".ready").is_file() && dir.join("bin").join("python").exists()
}

/// The venv folders under the cache (whatever their names) that are under way: a python but
/// not finished.
fn unfinished(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(venvs(root)) else {
        return Vec::new();
    };
    (entries.filter_map(|e| Some(e.ok()?.path())))
        .filter(|p| p.is_dir() && p.join("bin").join("python").exists() && !finished(p))
        .collect()
}

#[track_caller]
fn assert_ran(out: &Output, arg: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim() == format!("mcpmuxfake ran {arg}"),
        "{}: stdout {stdout:?}, stderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_install_killed_midway_is_resumed_and_a_finished_one_is_kept() {
    let _suite = crate::suite::enter(module_path!());
    let root = scratch_dir("pypi-run-killed");
    let wheels = wheel_dir(&root);
    let first = pypi_run(&root, &wheels, "first");
    let pid = first.id() as i32;
    // Killed (with everything it started) once its venv is under way.
    let deadline = Instant::now() + INSTALL_TIMEOUT;
    let under_way = loop {
        if let Some(dir) = unfinished(&root).pop() {
            break dir;
        }
        assert!(Instant::now() < deadline, "no install under way");
        std::thread::sleep(Duration::from_millis(5));
    };
    // SAFETY: our own child's process group.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    let killed = finish(first);
    assert!(
        !killed.status.success(),
        "the install finished before it could be killed"
    );
    assert!(
        !finished(&under_way),
        "the install finished before it could be killed"
    );
    // Something only the unfinished install holds: the next start must keep it.
    fs::write(under_way.join("made-by-the-killed-install"), "").expect("marker");

    let resumed = finish(pypi_run(&root, &wheels, "second"));
    assert_ran(&resumed, "second");
    let venv = venvs(&root).join(SPEC);
    assert!(finished(&venv), "no finished venv at {}", venv.display());
    assert!(
        venv.join("made-by-the-killed-install").exists(),
        "the unfinished install was thrown away; stderr:\n{}",
        String::from_utf8_lossy(&resumed.stderr)
    );

    // A finished venv is run as it is: nothing installed, nothing removed.
    fs::write(venv.join("made-after-it-finished"), "").expect("marker");
    let again = finish(pypi_run(&root, &wheels, "third"));
    assert_ran(&again, "third");
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(!stderr.contains("install"), "{stderr}");
    assert!(venv.join("made-after-it-finished").exists());
    assert!(unfinished(&root).is_empty(), "{:?}", unfinished(&root));
}

#[test]
fn starts_that_find_no_venv_install_it_once_between_them() {
    let _suite = crate::suite::enter(module_path!());
    let root = scratch_dir("pypi-run-together");
    let wheels = wheel_dir(&root);
    let starts: Vec<Child> = (0..3)
        .map(|i| pypi_run(&root, &wheels, &format!("start{i}")))
        .collect();
    let outputs: Vec<Output> = starts.into_iter().map(finish).collect();
    let mut installs = 0;
    for (i, out) in outputs.iter().enumerate() {
        assert_ran(out, &format!("start{i}"));
        installs += String::from_utf8_lossy(&out.stderr)
            .matches("pypi-run: installing")
            .count();
    }
    let said: Vec<String> = (outputs.iter())
        .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
        .collect();
    assert_eq!(installs, 1, "{said:#?}");
    assert!(finished(&venvs(&root).join(SPEC)));
}
