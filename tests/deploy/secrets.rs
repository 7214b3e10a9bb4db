//! The Kubernetes Secret: never committed, made by kustomize from `secret.env`, a file the user
//! writes (git ignores it; `secret.env.example` shows its keys). Applying the manifests can then
//! never overwrite a real Secret with placeholders, and the steps of docs/deploying.md work as
//! written: the test runs the docs' own command that writes the file.

use super::{rendered, repo, run, support, text, work_dir, yaml_objects};
use serde_json::Value;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const BASE: &str = "deploy/kubernetes/base";
const SECRET_ENV: &str = "deploy/kubernetes/base/secret.env";

/// The line of docs/deploying.md that writes `secret.env`, run from the repository's root.
fn docs_secret_command() -> String {
    let docs = fs::read_to_string(repo().join("docs/deploying.md")).expect("docs/deploying.md");
    docs.lines()
        .map(str::trim)
        .find(|l| l.ends_with(&format!("> {SECRET_ENV}")))
        .unwrap_or_else(|| panic!("docs/deploying.md: no command that writes {SECRET_ENV}"))
        .to_string()
}

/// A copy of `deploy/kubernetes` under target/deploy-test/NAME (a developer's own secret.env
/// left out), with `secret.env` written by the docs' command when `with_secret`. Returns the
/// folder to run kustomize in (the copy's root, as the repository's).
pub fn tree_with_secret_env(name: &str, with_secret: bool) -> PathBuf {
    let root = work_dir().join(name);
    let _ = fs::remove_dir_all(&root);
    copy_dir(&repo().join("deploy/kubernetes"), &root.join("deploy/kubernetes"));
    if with_secret {
        let bin_dir = Path::new(env!("CARGO_BIN_EXE_mcpmux"))
            .parent()
            .expect("the binary's folder");
        let path = format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let command = docs_secret_command();
        let out = run(Command::new("sh")
            .args(["-ec", &command])
            .env("PATH", path)
            .current_dir(&root));
        assert!(
            out.status.success(),
            "docs/deploying.md: `{command}` fails:\n{}",
            text(&out)
        );
    }
    root
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap_or_else(|e| panic!("create {}: {e}", to.display()));
    let entries = fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    for entry in entries.flatten() {
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst);
        } else if entry.file_name() != "secret.env" {
            fs::copy(&src, &dst).unwrap_or_else(|e| panic!("copy {}: {e}", src.display()));
        }
    }
}

/// Every `kustomization.yaml` under deploy/kubernetes: (its folder, relative to the repository).
fn kustomizations(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(repo().join(dir)).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries.flatten() {
        let rel = dir.join(entry.file_name());
        if entry.path().is_dir() {
            kustomizations(&rel, out);
        } else if entry.file_name() == "kustomization.yaml" {
            out.push(dir.to_path_buf());
        }
    }
}

fn strings(v: &Value) -> Vec<String> {
    (v.as_array().into_iter().flatten())
        .filter_map(|s| s.as_str().map(String::from))
        .collect()
}

#[test]
fn no_kustomization_commits_a_secret() {
    let mut dirs = Vec::new();
    kustomizations(Path::new("deploy/kubernetes"), &mut dirs);
    assert!(dirs.len() >= 3, "kustomizations found: {dirs:?}");
    let mut problems = Vec::new();
    for dir in dirs {
        let file = dir.join("kustomization.yaml");
        let label = file.display().to_string();
        let kustomization = yaml_objects(&label, &repo().join(&file));
        for resource in kustomization.iter().flat_map(|k| strings(&k["resources"])) {
            let path = repo().join(&dir).join(&resource);
            if !path.is_file() {
                continue; // another kustomization, checked on its own
            }
            for object in yaml_objects(&label, &path) {
                if object["kind"] == "Secret" {
                    problems.push(format!(
                        "{label}: resource {resource} is a Secret ({}): `kubectl apply -k` would \
                         overwrite the user's Secret with it; use a secretGenerator",
                        object["metadata"]["name"]
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_secret_is_generated_from_a_secret_env_that_git_ignores() {
    let file = format!("{BASE}/kustomization.yaml");
    let base = yaml_objects(&file, &repo().join(&file));
    let generator = (base.iter())
        .flat_map(|k| k["secretGenerator"].as_array().cloned().unwrap_or_default())
        .find(|g| g["name"] == "mcpmux")
        .unwrap_or_else(|| panic!("{file}: no secretGenerator named mcpmux"));
    assert_eq!(
        strings(&generator["envs"]),
        ["secret.env"],
        "{file}: the Secret mcpmux should come from envs: [secret.env]"
    );

    // The example names exactly the keys the Deployments read, and leaves them empty.
    let example_file = format!("{SECRET_ENV}.example");
    let example =
        fs::read_to_string(repo().join(&example_file)).unwrap_or_else(|e| panic!("{example_file}: {e}"));
    let mut example_keys = BTreeSet::new();
    for line in example.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("{example_file}: `{line}` is not key=value"));
        assert!(
            value.is_empty(),
            "{example_file}: {key} holds a value: never ship one"
        );
        example_keys.insert(key.to_string());
    }
    let mut used = BTreeSet::new();
    for overlay in rendered() {
        for object in overlay
            .rendered
            .objects
            .iter()
            .filter(|o| o["kind"] == "Deployment")
        {
            for container in object["spec"]["template"]["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
            {
                for env in container["env"].as_array().into_iter().flatten() {
                    if let Some(key) = env["valueFrom"]["secretKeyRef"]["key"].as_str() {
                        used.insert(key.to_string());
                    }
                }
            }
        }
        // The rendered Secret (from the docs' command) holds a value for every key.
        for secret in overlay.rendered.objects.iter().filter(|o| o["kind"] == "Secret") {
            for (key, value) in secret["data"].as_object().into_iter().flatten() {
                assert!(
                    value.as_str().is_some_and(|v| !v.is_empty()),
                    "{}: Secret key {key} is empty after the docs' command",
                    overlay.rendered.label
                );
            }
        }
    }
    assert_eq!(
        example_keys, used,
        "{example_file}: its keys differ from those the Deployments read"
    );

    // git ignores secret.env (and not the example).
    let ignored = |path: &str| {
        run(Command::new("git")
            .args(["check-ignore", "-q", "--no-index", path])
            .current_dir(repo()))
        .status
        .success()
    };
    assert!(ignored(SECRET_ENV), "{SECRET_ENV} is not ignored by git");
    assert!(!ignored(&example_file), "{example_file} is ignored by git");

    // Without secret.env nothing renders, so nothing half-made can be applied.
    let bare = tree_with_secret_env("render-without-secret", false);
    let out = run(Command::new(&support::peers().kubectl)
        .args(["kustomize", "deploy/kubernetes/overlays/single"])
        .current_dir(&bare));
    assert!(
        !out.status.success() && text(&out).contains("secret.env"),
        "deploy/kubernetes/overlays/single renders without secret.env:\n{}",
        text(&out)
    );
}
