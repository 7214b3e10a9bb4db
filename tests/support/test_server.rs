//! Where the `mcpmux-test-server` binary is: a package of its own in this workspace (so that it is
//! never installed with mcpmux), hence not in `CARGO_BIN_EXE_*` of mcpmux's tests.
//!
//! `cargo test` at the workspace root builds it next to the test binaries (the test server's own
//! smoke test needs it), so normally it is only found. When it is missing or older than its
//! sources (`cargo test --test e2e`, `cargo test -p mcpmux`, an edited fixture), it is built
//! once with the same cargo, profile and target directory, under a file lock so that test
//! processes running side by side (nextest) build it only once.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::SystemTime;

const PACKAGE: &str = "mcpmux-test-server";

/// Path of an up-to-date `mcpmux-test-server` binary (built first if needed). Panics with
/// cargo's output if building it fails.
pub fn test_server_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let build = BuildDirs::of_this_test();
        let bin = build
            .profile_dir
            .join(format!("{PACKAGE}{}", std::env::consts::EXE_SUFFIX));
        let sources = sources();
        if is_fresh(&bin, &sources) {
            return bin;
        }
        fs::create_dir_all(&build.target_dir).expect("create the target directory");
        super::under_file_lock(&build.target_dir.join("test-server.lock"), || {
            if !is_fresh(&bin, &sources) {
                build.cargo_build();
            }
        });
        assert!(
            bin.is_file(),
            "cargo built {PACKAGE} but {} is missing",
            bin.display()
        );
        bin
    })
}

/// The target directory, profile and target triple this test binary was built for, read from
/// its own path: `<target>/[<triple>/]<profile>/deps/<test>-<hash>`.
struct BuildDirs {
    target_dir: PathBuf,
    profile_dir: PathBuf,
    triple: Option<String>,
}

impl BuildDirs {
    fn of_this_test() -> BuildDirs {
        let exe = std::env::current_exe().expect("the test binary's path");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .unwrap_or_else(|| panic!("unexpected test binary location {}", exe.display()))
            .to_path_buf();
        let above = profile_dir.parent().expect("a target directory").to_path_buf();
        // Cargo marks the root of every target directory with CACHEDIR.TAG; a directory between
        // it and the profile is the triple of a `--target` build.
        let (target_dir, triple) = match above.join("CACHEDIR.TAG").exists() {
            true => (above, None),
            false => match above.parent() {
                Some(root) if root.join("CACHEDIR.TAG").exists() => {
                    let triple = above.file_name().map(|n| n.to_string_lossy().into_owned());
                    (root.to_path_buf(), triple)
                }
                _ => (above, None),
            },
        };
        BuildDirs {
            target_dir,
            profile_dir,
            triple,
        }
    }

    /// `cargo build -p mcpmux-test-server` into this test's target directory and profile.
    fn cargo_build(&self) {
        let profile = match self.profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => "dev".to_string(),
            Some(other) => other.to_string(),
        };
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
            .args([
                "build",
                "--quiet",
                "-p",
                PACKAGE,
                "--bin",
                PACKAGE,
                "--profile",
                &profile,
            ])
            .arg("--target-dir")
            .arg(&self.target_dir)
            .stdin(Stdio::null());
        if let Some(triple) = &self.triple {
            cmd.args(["--target", triple]);
        }
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("failed to run cargo: {e}"));
        assert!(
            out.status.success(),
            "building {PACKAGE} failed ({})\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The test server's source files (the `.rs` files of its package directory; cargo rebuilds
/// the binary whenever one of them is newer than its last build).
fn sources() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/test_server");
    let entries = fs::read_dir(&dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect()
}

/// The binary exists and was built after every source last changed.
fn is_fresh(bin: &Path, sources: &[PathBuf]) -> bool {
    let modified = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
    let Some(built) = modified(bin) else { return false };
    sources
        .iter()
        .filter_map(|p| modified(p))
        .all(|changed: SystemTime| changed <= built)
}
