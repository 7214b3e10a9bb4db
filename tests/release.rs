//! What a release ships, checked here with the tools that build it: `dist plan` (cargo-dist, the
//! version dist-workspace.toml pins) lists an archive with a checksum for every platform (a .zip
//! for Windows) and the shell and PowerShell installers, and fails when
//! `.github/workflows/release.yml` is not what `dist generate` makes of the config; actionlint
//! checks every workflow; the container workflow builds deploy/Dockerfile's images for amd64 and
//! arm64 and pushes them only for a tag; the release profile carries no debug info (a profiling
//! profile does); the README's one-line installs point at the repository's releases. The builds
//! themselves run only on GitHub, on a version tag.

// The tests' support drives processes the Unix way (signals, process groups, waitid): on
// Windows this test crate is empty (docs/development.md, "Windows").
#![cfg(unix)]

mod support;

use serde_json::Value;
use std::fs;
use std::path::PathBuf;
use std::process::{Command, Output};

/// The archives every release must have, by target and archive format: Linux (gnu and static
/// musl) and macOS as .tar.xz, Windows as .zip.
const ARCHIVES: [(&str, &str); 6] = [
    ("x86_64-unknown-linux-gnu", "tar.xz"),
    ("aarch64-unknown-linux-gnu", "tar.xz"),
    ("x86_64-unknown-linux-musl", "tar.xz"),
    ("x86_64-apple-darwin", "tar.xz"),
    ("aarch64-apple-darwin", "tar.xz"),
    ("x86_64-pc-windows-msvc", "zip"),
];

fn repo() -> PathBuf {
    support::repo_root()
}

fn read(rel: &str) -> String {
    fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: cannot read it: {e}"))
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn cargo_toml() -> toml::Table {
    toml::from_str(&read("Cargo.toml")).unwrap_or_else(|e| panic!("Cargo.toml: {e}"))
}

#[test]
fn the_release_plan_has_every_archive_with_checksums_and_the_installer() {
    let out = run(Command::new(&support::peers().dist)
        .args(["plan", "--output-format=json", "--no-local-paths"])
        .current_dir(repo()));
    assert!(
        out.status.success(),
        "`dist plan` fails (is .github/workflows/release.yml what `dist generate` makes?):\n{}",
        text(&out)
    );
    let plan: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("`dist plan` JSON: {e}\n{}", text(&out)));
    let artifacts = plan["artifacts"]
        .as_object()
        .unwrap_or_else(|| panic!("`dist plan`: no artifacts\n{plan}"));
    let mut wanted: Vec<String> = ["mcpmux-installer.sh", "mcpmux-installer.ps1", "sha256.sum"]
        .map(String::from)
        .to_vec();
    for (target, format) in ARCHIVES {
        wanted.push(format!("mcpmux-{target}.{format}"));
        wanted.push(format!("mcpmux-{target}.{format}.sha256"));
    }
    let missing: Vec<&String> = wanted.iter().filter(|w| !artifacts.contains_key(*w)).collect();
    assert!(
        missing.is_empty(),
        "the release lacks {missing:?}; it has {:?}",
        artifacts.keys().collect::<Vec<_>>()
    );
    // Each archive holds the mcpmux binary (`mcpmux.exe` on Windows).
    for (target, format) in ARCHIVES {
        let archive = &artifacts[&format!("mcpmux-{target}.{format}")];
        let assets = archive["assets"].as_array().cloned().unwrap_or_default();
        let file = if target.contains("windows") {
            "mcpmux.exe"
        } else {
            "mcpmux"
        };
        assert!(
            assets
                .iter()
                .any(|a| a["kind"] == "executable" && a["name"] == "mcpmux" && a["path"] == file),
            "mcpmux-{target}.{format} holds no {file} executable: {archive}"
        );
    }
}

#[test]
fn every_workflow_passes_actionlint() {
    let dir = repo().join(".github/workflows");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 2, "workflows found: {files:?}");
    let out = run(Command::new(&support::peers().actionlint)
        .arg("-no-color")
        .args(&files)
        .current_dir(repo()));
    assert!(out.status.success(), "actionlint:\n{}", text(&out));
}

#[test]
fn the_container_workflow_builds_both_images_for_amd64_and_arm64_and_pushes_on_a_tag() {
    let file = ".github/workflows/container.yml";
    let json = run(Command::new(&support::peers().deploy_python)
        .arg("-c")
        .arg("import json, sys, yaml\nprint(json.dumps(yaml.safe_load(open(sys.argv[1]))))")
        .arg(repo().join(file)));
    assert!(json.status.success(), "{file}: {}", text(&json));
    let workflow: Value = serde_json::from_slice(&json.stdout).expect("the workflow as JSON");
    // PyYAML reads the key `on` as true.
    let on = if workflow.get("on").is_some() {
        &workflow["on"]
    } else {
        &workflow["true"]
    };
    let tags = on["push"]["tags"].as_array().cloned().unwrap_or_default();
    let release_tags = read(".github/workflows/release.yml");
    assert!(
        !tags.is_empty()
            && tags.iter().all(|t| t
                .as_str()
                .is_some_and(|t| release_tags.contains(&format!("'{t}'")))),
        "{file}: should run on the version tags release.yml runs on, found {tags:?}"
    );
    let job = workflow["jobs"]
        .as_object()
        .and_then(|jobs| jobs.values().next())
        .unwrap_or_else(|| panic!("{file}: no job"));
    let build = job["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("docker/build-push-action@"))
        })
        .unwrap_or_else(|| panic!("{file}: no docker/build-push-action step"));
    let with = &build["with"];
    assert_eq!(
        with["file"], "deploy/Dockerfile",
        "{file}: builds another Dockerfile"
    );
    let platforms = with["platforms"].as_str().unwrap_or("");
    for platform in ["linux/amd64", "linux/arm64"] {
        assert!(
            platforms.contains(platform),
            "{file}: platforms {platforms:?} lack {platform}"
        );
    }
    assert_eq!(
        with["push"], "${{ github.event_name == 'push' }}",
        "{file}: should push only when a tag was pushed"
    );
    // Every image target of the matrix is a stage of the Dockerfile, both images are built.
    let dockerfile = read("deploy/Dockerfile");
    let targets: Vec<String> = job["strategy"]["matrix"]["include"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["target"].as_str().map(String::from))
        .collect();
    for stage in ["runtime", "with-runtimes"] {
        assert!(
            targets.iter().any(|t| t == stage),
            "{file}: does not build {stage}"
        );
    }
    for target in &targets {
        assert!(
            dockerfile
                .lines()
                .any(|l| l.starts_with("FROM ") && l.trim_end().ends_with(&format!(" AS {target}"))),
            "{file}: target {target} is no stage of deploy/Dockerfile"
        );
    }
}

#[test]
fn release_builds_are_small_and_profiling_builds_keep_line_tables() {
    let cargo = cargo_toml();
    let profile = |name: &str| -> toml::Table {
        cargo
            .get("profile")
            .and_then(|p| p.get(name))
            .and_then(|p| p.as_table())
            .cloned()
            .unwrap_or_else(|| panic!("Cargo.toml: no [profile.{name}]"))
    };
    let release = profile("release");
    let no_debug = |v: Option<&toml::Value>| {
        matches!(
            v,
            None | Some(toml::Value::Integer(0)) | Some(toml::Value::Boolean(false))
        ) || v.and_then(|v| v.as_str()) == Some("none")
    };
    assert!(
        no_debug(release.get("debug")),
        "Cargo.toml: [profile.release] has debug = {:?}: the binary a user builds carries ~90 MB of \
         debug info (use [profile.profiling] for that)",
        release.get("debug")
    );
    let strip = release.get("strip").and_then(|s| s.as_str());
    assert!(
        matches!(strip, Some("debuginfo" | "symbols"))
            || release.get("strip") == Some(&toml::Value::Boolean(true)),
        "Cargo.toml: [profile.release] should strip (std's debug info too), found {strip:?}"
    );
    let profiling = profile("profiling");
    assert_eq!(
        profiling.get("inherits").and_then(|v| v.as_str()),
        Some("release"),
        "Cargo.toml: [profile.profiling] should inherit release"
    );
    assert!(
        !no_debug(profiling.get("debug")),
        "Cargo.toml: [profile.profiling] should keep debug info"
    );
    assert!(
        read("bench/callgrind.sh").contains("--profile profiling"),
        "bench/callgrind.sh profiles a build without debug info: build --profile profiling"
    );
}

#[test]
fn the_readme_installs_from_the_repository_releases() {
    let repository = cargo_toml()
        .get("package")
        .and_then(|p| p.get("repository"))
        .and_then(|r| r.as_str())
        .map(String::from)
        .expect("Cargo.toml: package.repository (dist's download URLs come from it)");
    let shell = format!(
        "curl --proto '=https' --tlsv1.2 -LsSf {repository}/releases/latest/download/mcpmux-installer.sh | sh"
    );
    let powershell = format!(
        "powershell -ExecutionPolicy Bypass -c \"irm {repository}/releases/latest/download/mcpmux-installer.ps1 | iex\""
    );
    let readme = read("README.md");
    for command in [shell, powershell] {
        assert!(
            readme.lines().any(|l| l.trim() == command),
            "README.md: no one-line install `{command}`"
        );
    }
}
