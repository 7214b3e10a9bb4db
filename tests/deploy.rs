//! Checks of `deploy/`, with the tools the files are meant for: hadolint on the Dockerfile;
//! `kubectl kustomize` (the pinned kubectl from PyPI) on every overlay, with the Secret made from
//! a `secret.env` written as the docs say (tests/deploy/secrets.rs), `kubernetes-validate --strict` on the output and the
//! overlay's invariants (tests/deploy/kube.rs); `mcpmux check-config` on the configs in the
//! ConfigMaps; `haproxy -c`, `nginx -t` and `systemd-analyze verify` on the balancer examples
//! and the unit when those programs are installed. The image itself is not built (no registry
//! for base images here). Every failure names the file and the problem.

// The tests' support drives processes the Unix way (signals, process groups, waitid): on
// Windows this test crate is empty (docs/development.md, "Windows").
#![cfg(unix)]

mod support;

#[path = "deploy/kube.rs"]
mod kube;
#[path = "deploy/secrets.rs"]
mod secrets;

use kube::{Expect, Rendered};
use std::fs;
use std::io::ErrorKind;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The Kubernetes version the manifests are validated against (kubernetes-validate's schemas).
const KUBERNETES_VERSION: &str = "1.37.0";
/// The kustomizations rendered (the base is applicable on its own too) and what each must be.
static OVERLAYS: [(&str, Expect); 3] = [
    (
        "deploy/kubernetes/base",
        Expect {
            replicas: 1,
            ha: false,
        },
    ),
    (
        "deploy/kubernetes/overlays/single",
        Expect {
            replicas: 1,
            ha: false,
        },
    ),
    (
        "deploy/kubernetes/overlays/ha",
        Expect {
            replicas: 3,
            ha: true,
        },
    ),
];

fn repo() -> PathBuf {
    support::repo_root()
}

/// `target/deploy-test/`, for rendered manifests and extracted configs.
fn work_dir() -> PathBuf {
    let dir = repo().join("target").join("deploy-test");
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    dir
}

fn read(rel: &str) -> String {
    fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: cannot read it: {e}"))
}

/// Run `cmd`; `None` when its program is not installed.
fn run_if_installed(cmd: &mut Command) -> Option<Output> {
    match cmd.output() {
        Ok(out) => Some(out),
        Err(e) if e.kind() == ErrorKind::NotFound => None,
        Err(e) => panic!("cannot run {cmd:?}: {e}"),
    }
}

fn run(cmd: &mut Command) -> Output {
    run_if_installed(cmd).unwrap_or_else(|| panic!("{cmd:?}: program not found"))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

// ---------------------------------------------------------------------------------------------
// Dockerfile
// ---------------------------------------------------------------------------------------------

#[test]
fn dockerfile_passes_hadolint_and_builds_both_targets_as_non_root() {
    // A config of our own: a developer's ~/.config/hadolint.yaml or ./.hadolint.yaml cannot
    // relax the check.
    let config = work_dir().join("hadolint.yaml");
    fs::write(&config, "failure-threshold: warning\n")
        .unwrap_or_else(|e| panic!("write {}: {e}", config.display()));
    let out = run(Command::new(&support::peers().hadolint)
        .arg("--config")
        .arg(&config)
        .args([
            "--no-color",
            "--failure-threshold",
            "warning",
            "deploy/Dockerfile",
        ])
        .current_dir(repo()));
    assert!(
        out.status.success(),
        "deploy/Dockerfile: hadolint reports problems of level warning or above:\n{}",
        text(&out)
    );

    let dockerfile = read("deploy/Dockerfile");
    // (stage name, lines of the stage)
    let mut stages: Vec<(String, Vec<&str>)> = Vec::new();
    for line in dockerfile.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first().is_some_and(|w| w.eq_ignore_ascii_case("FROM")) {
            let name = match words.as_slice() {
                [_, _, as_, name] if as_.eq_ignore_ascii_case("AS") => name.to_string(),
                _ => String::new(),
            };
            stages.push((name, Vec::new()));
        } else if let Some((_, lines)) = stages.last_mut() {
            lines.push(line);
        }
    }
    let names: Vec<&str> = stages.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        dockerfile.contains("cargo build --release --locked"),
        "deploy/Dockerfile: no `cargo build --release --locked`"
    );
    assert!(
        names.contains(&"with-runtimes"),
        "deploy/Dockerfile: no stage `AS with-runtimes` (stages: {names:?})"
    );
    let default = names.last().copied().unwrap_or_default();
    assert!(
        stages.len() >= 3 && default != "with-runtimes",
        "deploy/Dockerfile: the last stage (the default target) should be the small runtime, \
         after the build and with-runtimes stages (stages: {names:?})"
    );
    for (name, lines) in stages
        .iter()
        .filter(|(n, _)| n == "with-runtimes" || n == default)
    {
        let user = lines
            .iter()
            .filter_map(|l| l.strip_prefix("USER "))
            .next_back()
            .unwrap_or("(none)")
            .trim();
        let uid = user.split(':').next().unwrap_or("");
        assert!(
            !matches!(uid, "(none)" | "0" | "root"),
            "deploy/Dockerfile: stage {name} runs as {user}, not as a non-root user"
        );
        for wanted in ["ENTRYPOINT", "COPY --from=build"] {
            assert!(
                lines.iter().any(|l| l.starts_with(wanted)),
                "deploy/Dockerfile: stage {name} has no {wanted}"
            );
        }
    }
    let runtimes = &stages[names.iter().position(|n| *n == "with-runtimes").unwrap_or(0)];
    for wanted in ["python3", "python3-venv"] {
        assert!(
            runtimes
                .1
                .iter()
                .any(|l| l.split_whitespace().any(|w| w == wanted)),
            "deploy/Dockerfile: stage with-runtimes does not install {wanted}"
        );
    }

    let ignore = read(".dockerignore");
    for wanted in ["target/", ".git/"] {
        assert!(
            ignore.lines().any(|l| l.trim() == wanted),
            ".dockerignore: does not exclude {wanted}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Kubernetes
// ---------------------------------------------------------------------------------------------

/// One overlay, rendered.
struct Overlay {
    rendered: Rendered,
    /// The rendered YAML, under target/deploy-test.
    yaml: PathBuf,
    expect: &'static Expect,
}

/// Every overlay rendered once per test binary, by the pinned kubectl's kustomize, from a copy
/// of `deploy/kubernetes` with `secret.env` written as docs/deploying.md says.
fn rendered() -> &'static [Overlay] {
    static RENDERED: OnceLock<Vec<Overlay>> = OnceLock::new();
    RENDERED.get_or_init(|| {
        let tree = secrets::tree_with_secret_env("render", true);
        let mut all = Vec::new();
        for (label, expect) in &OVERLAYS {
            let (label, overlay) = (label.to_string(), label.rsplit('/').next().unwrap_or("overlay"));
            let out = run(Command::new(&support::peers().kubectl)
                .args(["kustomize", &label])
                .current_dir(&tree));
            assert!(
                out.status.success(),
                "{label}: `kubectl kustomize` fails:\n{}",
                text(&out)
            );
            let yaml = work_dir().join(format!("{overlay}.yaml"));
            fs::write(&yaml, &out.stdout).unwrap_or_else(|e| panic!("write {}: {e}", yaml.display()));
            let objects = yaml_objects(&label, &yaml);
            all.push(Overlay {
                rendered: Rendered {
                    config_sources: toml_files(&[&label, "deploy/kubernetes/base"]),
                    label,
                    objects,
                },
                yaml,
                expect,
            });
        }
        all
    })
}

/// The objects of a (multi-document) YAML file, read with PyYAML's safe loader.
fn yaml_objects(label: &str, yaml: &std::path::Path) -> Vec<serde_json::Value> {
    let json = run(Command::new(&support::peers().deploy_python)
        .arg("-c")
        .arg(YAML_TO_JSON)
        .arg(yaml));
    assert!(
        json.status.success(),
        "{label}: the YAML does not load:\n{}",
        text(&json)
    );
    serde_json::from_slice(&json.stdout).unwrap_or_else(|e| panic!("{label}: the YAML as JSON: {e}"))
}

/// The `*.toml` files in these folders of the repository: (path, text).
fn toml_files(dirs: &[&str]) -> Vec<(String, String)> {
    let mut files = Vec::new();
    for dir in dirs {
        let entries = fs::read_dir(repo().join(dir)).unwrap_or_else(|e| panic!("{dir}: {e}"));
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".toml") {
                let path = format!("{dir}/{name}");
                files.push((path.clone(), read(&path)));
            }
        }
    }
    files
}

/// The objects of a multi-document YAML file as one JSON array (PyYAML, safe loader).
const YAML_TO_JSON: &str = "import json, sys, yaml\n\
    with open(sys.argv[1]) as f:\n    docs = [d for d in yaml.safe_load_all(f) if d is not None]\n\
    json.dump(docs, sys.stdout)\n";

#[test]
fn every_overlay_renders_to_valid_kubernetes_objects() {
    let all = rendered();
    for Overlay {
        rendered: r, yaml, ..
    } in all
    {
        let out = run(Command::new(&support::peers().kubernetes_validate)
            .args(["--strict", "--quiet", "--kubernetes-version", KUBERNETES_VERSION])
            .arg(yaml));
        assert!(
            out.status.success(),
            "{} (rendered to {}): kubernetes-validate --strict for Kubernetes {KUBERNETES_VERSION} fails:\n{}",
            r.label,
            yaml.display(),
            text(&out)
        );
    }
}

#[test]
fn every_overlay_keeps_the_deployment_invariants() {
    let all = rendered();
    let problems: Vec<String> = all.iter().flat_map(|o| o.rendered.problems(o.expect)).collect();
    assert!(
        problems.is_empty(),
        "deploy/kubernetes:\n  {}",
        problems.join("\n  ")
    );
}

/// Run `mcpmux check-config` on `toml` (written as `file` under target/deploy-test) with every
/// `${VAR}` it uses set to a placeholder (a `[cluster]` key variable to a real key from
/// `mcpmux keygen`, since a key that is not base64 of 32 bytes is refused).
fn check_config(label: &str, file: &str, toml: &str) -> Output {
    let path = work_dir().join(file);
    fs::write(&path, toml).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpmux"));
    cmd.arg("check-config").arg("--config").arg(&path);
    let table: toml::Table = toml::from_str(toml).unwrap_or_else(|e| panic!("{label}: not TOML: {e}"));
    for var in kube::config_vars(&table) {
        match var.ends_with("CLUSTER_KEY") {
            true => cmd.env(var, keygen()),
            false => cmd.env(var, "placeholder"),
        };
    }
    run(&mut cmd)
}

#[test]
fn the_configs_in_the_configmaps_pass_check_config() {
    let all = rendered();
    for Overlay { rendered: r, .. } in all {
        let (path, toml) = r.config_toml().unwrap_or_else(|e| panic!("{e}"));
        let label = format!("{}: {path}", r.label);
        let file = format!("{}.toml", r.label.rsplit('/').next().unwrap_or("overlay"));
        let out = check_config(&label, &file, &toml);
        assert!(
            out.status.success(),
            "{label}: `mcpmux check-config` fails:\n{}",
            text(&out)
        );
    }
}

#[test]
fn the_ha_config_is_the_base_config_plus_cluster() {
    let (base, ha) = (
        "deploy/kubernetes/base/mcpmux.toml",
        "deploy/kubernetes/overlays/ha/mcpmux.toml",
    );
    let parse = |file: &str| -> toml::Table {
        toml::from_str(&read(file)).unwrap_or_else(|e| panic!("{file}: not TOML: {e}"))
    };
    let mut ha_table = parse(ha);
    assert!(ha_table.remove("cluster").is_some(), "{ha}: no [cluster]");
    assert!(
        ha_table == parse(base),
        "{ha}: differs from {base} in more than [cluster]: keep the two in step"
    );
}

/// A new `[cluster]` key, as `mcpmux keygen` prints it.
fn keygen() -> String {
    let out = run(Command::new(env!("CARGO_BIN_EXE_mcpmux")).arg("keygen"));
    assert!(out.status.success(), "mcpmux keygen: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

// ---------------------------------------------------------------------------------------------
// Balancers and the systemd unit
// ---------------------------------------------------------------------------------------------

fn assert_contains(file: &str, text: &str, wanted: &[&str]) {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    for w in wanted {
        assert!(flat.contains(w), "{file}: no `{w}`");
    }
}

#[test]
fn the_haproxy_example_hashes_on_the_session_and_checks_readyz() {
    let file = "deploy/balancers/haproxy.cfg";
    assert_contains(
        file,
        &read(file),
        &[
            "balance hdr(Mcp-Session-Id)",
            "hash-type consistent",
            "option httpchk",
            "uri /readyz",
        ],
    );
    let path = repo().join(file);
    match run_if_installed(Command::new("haproxy").arg("-c").arg("-f").arg(&path)) {
        None => eprintln!("SKIPPED: haproxy is not installed, so `haproxy -c -f {file}` did not run"),
        Some(out) => assert!(
            out.status.success(),
            "{file}: `haproxy -c` fails:\n{}",
            text(&out)
        ),
    }
}

#[test]
fn the_nginx_example_hashes_on_the_session() {
    let file = "deploy/balancers/nginx.conf";
    assert_contains(
        file,
        &read(file),
        &["hash $http_mcp_session_id consistent;", "proxy_buffering off;"],
    );
    let path = repo().join(file);
    let prefix = work_dir();
    let mut cmd = Command::new("nginx");
    cmd.args(["-t", "-q", "-e", "stderr", "-p"])
        .arg(&prefix)
        .arg("-c")
        .arg(&path);
    match run_if_installed(&mut cmd) {
        None => eprintln!("SKIPPED: nginx is not installed, so `nginx -t -c {file}` did not run"),
        Some(out) => assert!(out.status.success(), "{file}: `nginx -t` fails:\n{}", text(&out)),
    }
}

#[test]
fn the_systemd_unit_is_hardened_and_drains_before_it_is_killed() {
    let file = "deploy/systemd/mcpmux.service";
    let unit = read(file);
    let value = |key: &str| -> Vec<&str> {
        unit.lines()
            .filter_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
            .map(str::trim)
            .collect()
    };
    let one = |key: &str| value(key).last().copied().unwrap_or("");
    assert!(
        one("DynamicUser") == "yes" || !one("User").is_empty(),
        "{file}: neither DynamicUser=yes nor a User="
    );
    for (key, want) in [
        ("ProtectSystem", "strict"),
        ("NoNewPrivileges", "yes"),
        ("KillSignal", "SIGTERM"),
        // SIGTERM to mcpmux alone: it drains, then stops its stdio servers itself.
        ("KillMode", "mixed"),
    ] {
        assert_eq!(one(key), want, "{file}: {key}= should be {want}");
    }
    assert!(
        one("ExecReload").contains("-HUP") && one("ExecReload").contains("$MAINPID"),
        "{file}: ExecReload= should send SIGHUP to $MAINPID (it reloads the configuration), found {:?}",
        one("ExecReload")
    );
    // SIGHUP reloads the whole configuration (src/main.rs), not only the policy.
    for stale in ["re-reads the policy", "configuration's policy"] {
        assert!(
            !unit.contains(stale),
            "{file}: says SIGHUP {stale:?}; it re-reads the whole configuration"
        );
    }
    // ProtectSystem=strict leaves only the state and cache directories writable: the [audit]
    // log needs the state directory, and the docs say to put it there.
    assert_eq!(
        one("StateDirectory"),
        "mcpmux",
        "{file}: StateDirectory= should be mcpmux"
    );
    let docs = read("docs/deploying.md");
    assert!(
        docs.contains("path = \"/var/lib/mcpmux/audit.jsonl\"")
            && unit.contains("path = \"/var/lib/mcpmux/audit.jsonl\""),
        "docs/deploying.md and {file} should point [audit] path into the StateDirectory \
         (/var/lib/mcpmux/audit.jsonl)"
    );
    let default_drain = mcpmux::config::GatewayConfig::default().drain_timeout.as_secs();
    let stop = one("TimeoutStopSec")
        .parse::<u64>()
        .unwrap_or_else(|_| panic!("{file}: TimeoutStopSec= should be a number of seconds"));
    assert!(
        stop > default_drain + kube::CHILD_STOP_SECS,
        "{file}: TimeoutStopSec={stop} is not above the default drain_timeout_secs {default_drain} \
         + {} s to stop the stdio servers",
        kube::CHILD_STOP_SECS
    );

    // `systemd-analyze verify` wants ExecStart's program to exist: point it at this build.
    let copy = work_dir().join("mcpmux.service");
    let binary = env!("CARGO_BIN_EXE_mcpmux");
    assert!(
        unit.contains("ExecStart=/usr/local/bin/mcpmux "),
        "{file}: ExecStart= is not /usr/local/bin/mcpmux"
    );
    fs::write(
        &copy,
        unit.replace(
            "ExecStart=/usr/local/bin/mcpmux ",
            &format!("ExecStart={binary} "),
        ),
    )
    .unwrap_or_else(|e| panic!("write {}: {e}", copy.display()));
    match run_if_installed(Command::new("systemd-analyze").arg("verify").arg(&copy)) {
        None => eprintln!("SKIPPED: systemd-analyze is not installed, so {file} is not verified"),
        Some(out) => {
            // Only what it says about this unit: other units of the machine are not ours.
            let said = text(&out);
            let about_ours = said.lines().any(|l| l.contains("mcpmux.service"));
            assert!(
                out.status.success() && !about_ours,
                "{file}: `systemd-analyze verify` complains:\n{said}"
            );
        }
    }
}
