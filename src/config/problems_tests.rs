//! Every problem of a configuration at once, each at the file and line that wrote it: one
//! configuration spread over a main file, an included file and an `mcp_json` file.

use super::{Config, ConfigError};
use std::path::{Path, PathBuf};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpmux-problems-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path.display().to_string()
}

pub(crate) const MAIN: &str = r#"include = ["team.toml"]
mcp_json = ["clients.json"]

[gateway]
page_size = 0

[servers.alpha]
command = "sh"
colour = "red"

[servers.beta]
url = "ftp://nowhere"

[profiles.review]
path = "/mcp/review"
servers = ["alpha", "ghost", "gamma"]
"#;

pub(crate) const TEAM: &str = r#"[servers.gamma]
command = "sh"
max_in_flight = "lots"

[servers.delta]
command = "sh"
env = { TOKEN = "${MCPMUX_TEST_SURELY_UNSET_1}", OTHER = "${MCPMUX_TEST_SURELY_UNSET_2}" }

[servers.epsilon]
command = "sh"
rename = { echo = "say", add = "say" }
"#;

pub(crate) const CLIENTS: &str = r#"{
  "mcpServers": {
    "local": {
      "command": "sh",
      "env": { "KEY": "${MCPMUX_TEST_SURELY_UNSET_3}" }
    }
  }
}
"#;

#[test]
fn every_problem_is_reported_at_once_at_its_file_and_line() {
    let dir = scratch("many");
    let main = write(&dir, "main.toml", MAIN);
    let team = write(&dir, "team.toml", TEAM);
    let clients = write(&dir, "clients.json", CLIENTS);
    let err = Config::load(Path::new(&main)).expect_err("eight problems");
    assert!(matches!(err, ConfigError::Many { .. }), "{err}");
    let lines: Vec<String> = err.each().iter().map(|e| e.to_string()).collect();
    let expected = [
        (format!("{main}:9:1: "), "unknown key `colour`"),
        (format!("{main}:5: "), "gateway.page_size must be at least 1"),
        (
            format!("{main}:12: "),
            "`url` \"ftp://nowhere\" must be an http:// or https:// URL",
        ),
        (
            format!("{main}:16: "),
            "profiles.review.servers[1]: no server \"ghost\"",
        ),
        (
            format!("{team}:3:17: "),
            "invalid type: string \"lots\", expected usize",
        ),
        (format!("{team}:7: "), "\"MCPMUX_TEST_SURELY_UNSET_1\" is not set"),
        (format!("{team}:7: "), "\"MCPMUX_TEST_SURELY_UNSET_2\" is not set"),
        (
            format!("{team}:11: "),
            "rename: tools \"echo\" and \"add\" would both be exposed as \"say\"",
        ),
        (
            format!("{clients}:5: "),
            "servers.local.env.KEY: environment variable \"MCPMUX_TEST_SURELY_UNSET_3\" is not set",
        ),
    ];
    for (at, what) in &expected {
        let found = lines
            .iter()
            .filter(|l| l.starts_with(at.as_str()) && l.contains(what))
            .count();
        assert_eq!(found, 1, "{at}{what} in:\n{err}");
    }
    // Nothing else: the server with a wrong type is still a known name for the profile, and
    // the server with unset variables says nothing about its empty values.
    assert_eq!(lines.len(), expected.len(), "{err}");
    assert_eq!(err.to_string(), lines.join("\n"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn several_unknown_keys_and_wrong_types_in_one_table_are_all_reported() {
    let text = "[gateway]\nlisten_on = 1\npage_size = \"x\"\n\n[servers.a]\ncomand = \"x\"\nargz = []\ncommand = \"sh\"\n";
    let err = Config::from_toml_str(text, "t.toml", &|_| None).expect_err("problems");
    let lines: Vec<String> = err.each().iter().map(|e| e.to_string()).collect();
    assert_eq!(lines.len(), 4, "{err}");
    for at in [
        "t.toml:2:1: unknown key `listen_on`",
        "t.toml:3:13: invalid type",
        "t.toml:6:1: unknown key `comand`",
        "t.toml:7:1: unknown key `argz`",
    ] {
        assert!(lines.iter().any(|l| l.starts_with(at)), "{at} in:\n{err}");
    }
}

#[test]
fn a_section_that_fails_does_not_cascade() {
    // A misspelt key is not also the key missing: the server is not checked further.
    let text = "[servers.a]\ncomand = \"sh\"\n[profiles.p]\npath = \"/p\"\nservers = [\"a\"]\n";
    let err = Config::from_toml_str(text, "t.toml", &|_| None).expect_err("a problem");
    assert_eq!(err.each().len(), 1, "{err}");
    assert!(
        err.to_string().starts_with("t.toml:2:1: unknown key `comand`"),
        "{err}"
    );
    // [auth] with a wrong type: no "[[policy]] needs [auth]" and no "listen needs [auth]".
    let text = "[gateway]\nlisten = \"0.0.0.0:8080\"\n[auth]\nissuer = 3\n[[policy]]\nallow = [\"*\"]\n";
    let err = Config::from_toml_str(text, "t.toml", &|_| None).expect_err("a problem");
    assert_eq!(err.each().len(), 1, "{err}");
    assert!(err.to_string().starts_with("t.toml:4:10: invalid type"), "{err}");
    // A rule that does not build is still a rule: no "needs [audit]" about the others, and the
    // other rules are each checked.
    let text = "[auth]\n[[auth.api_keys]]\nname = \"a\"\nkey = \"k\"\n[[policy]]\nallow = [\"[\"]\n[[policy]]\nrate_limit = \"0/min\"\n";
    let err = Config::from_toml_str(text, "t.toml", &|_| None).expect_err("two problems");
    let lines: Vec<String> = err.each().iter().map(|e| e.to_string()).collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(lines[0].starts_with("t.toml:6: policy[0].allow[0]"), "{err}");
    assert!(lines[1].starts_with("t.toml:8: policy[1].rate_limit"), "{err}");
}

#[test]
fn a_valid_configuration_over_three_files_loads_as_the_same_text_in_one() {
    let dir = scratch("valid");
    let main = write(
        &dir,
        "main.toml",
        "include = [\"team.toml\"]\nmcp_json = [\"clients.json\"]\n[gateway]\npage_size = 7\n[servers.alpha]\ncommand = \"/bin/sh\"\ncwd = \"/\"\n[profiles.review]\npath = \"/mcp/review\"\nservers = [\"alpha\", \"local\"]\n",
    );
    write(
        &dir,
        "team.toml",
        "[servers.gamma]\nurl = \"http://127.0.0.1:9/mcp\"\nmax_in_flight = 3\n",
    );
    write(
        &dir,
        "clients.json",
        "{\"mcpServers\": {\"local\": {\"command\": \"/bin/sh\", \"cwd\": \"/\"}}}\n",
    );
    let loaded = Config::load(Path::new(&main)).expect("loads");
    let one = "[gateway]\npage_size = 7\n[servers.gamma]\nurl = \"http://127.0.0.1:9/mcp\"\nmax_in_flight = 3\n[servers.alpha]\ncommand = \"/bin/sh\"\ncwd = \"/\"\n[servers.local]\ncommand = \"/bin/sh\"\ncwd = \"/\"\n[profiles.review]\npath = \"/mcp/review\"\nservers = [\"alpha\", \"local\"]\n";
    let single = Config::from_toml_str(one, "one.toml", &|_| None).expect("loads");
    assert_eq!(loaded.servers, single.servers);
    assert_eq!(loaded.gateway, single.gateway);
    assert_eq!(loaded.profiles.len(), 1);
    assert_eq!(loaded.profiles[0].servers, single.profiles[0].servers);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_that_does_not_read_is_one_problem_among_the_others() {
    let dir = scratch("broken-files");
    let main = write(
        &dir,
        "main.toml",
        "include = [\"team.toml\", \"broken.toml\"]\nmcp_json = [\"clients.json\"]\n\n\
         [servers.alpha]\ncomand = \"oops\"\n\n[profiles.p]\npath = \"/p\"\nservers = [\"local\", \"kappa\"]\n",
    );
    let team = write(
        &dir,
        "team.toml",
        "[servers.delta]\ncommand = \"sh\"\nenv = { TOKEN = \"${MCPMUX_TEST_SURELY_UNSET_4}\" }\n",
    );
    let broken = write(
        &dir,
        "broken.toml",
        "[servers.kappa]\ncommand = \"sh\"\nargs = [\n",
    );
    let clients = write(
        &dir,
        "clients.json",
        "{\n  \"mcpServers\": {\n    \"local\": { \"command\": \"sh\" },,\n  }\n}\n",
    );
    let err = Config::load(Path::new(&main)).expect_err("four problems");
    let lines: Vec<String> = err.each().iter().map(|e| e.to_string()).collect();
    // In the order of the files: the main file, its includes in order, then the JSON file;
    // the profile naming servers of the broken files says nothing (they may be there).
    let expected = [
        format!("{main}:5:1: unknown key `comand`: did you mean `command`? (in [servers.alpha])"),
        format!(
            "{team}:3: servers.delta.env.TOKEN: environment variable \"MCPMUX_TEST_SURELY_UNSET_4\" is not set"
        ),
        format!("{broken}:4:1: invalid array, expected `]` (in [servers.kappa])"),
        format!("{clients}:4:3: not JSON: trailing comma (mcp_json, named at {main}:2)"),
    ];
    assert_eq!(lines.len(), expected.len(), "{err}");
    for (line, want) in lines.iter().zip(&expected) {
        assert_eq!(line, want, "in:\n{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_checks_on_the_machine_point_at_their_key_in_the_same_run_as_the_files_problems() {
    let dir = scratch("machine");
    let main = write(
        &dir,
        "main.toml",
        "include = [\"team.toml\"]\nmcp_json = [\"clients.json\"]\n\n[gateway]\npage_size = 0\n",
    );
    let team = write(
        &dir,
        "team.toml",
        "[servers.far]\ncommand = \"mcpmux-surely-not-installed\"\n\n\
         [servers.lost]\nargs = []\ncwd = \"/mcpmux/no/such/dir\"\ncommand = \"sh\"\n\n\
         [servers.off]\nenabled = false\ncommand = \"\"\n",
    );
    let clients = write(
        &dir,
        "clients.json",
        "{\n  \"mcpServers\": {\n    \"local\": {\n      \"args\": [],\n      \"command\": \"./bin/none\"\n    }\n  }\n}\n",
    );
    let loaded = Config::load_all(Path::new(&main));
    let report = loaded.check(Some("/usr/bin:/bin".into()), Path::new("/"));
    let expected = [
        format!("{main}:5: gateway.page_size must be at least 1"),
        format!(
            "{team}:2: error: servers.far.command: `mcpmux-surely-not-installed` is not found on PATH \
             (/usr/bin:/bin); install it or give its full path"
        ),
        format!(
            "{team}:6: error: servers.lost.cwd: the working directory /mcpmux/no/such/dir does not exist"
        ),
        format!(
            "{team}:9: warning: servers.off has enabled = false, and as written it could not start once \
             enabled: {team}:11: server \"off\": `command` must not be empty"
        ),
        format!(
            "{clients}:5: error: servers.local.command: `{dir}/bin/none` does not exist",
            dir = dir.display()
        ),
    ];
    assert_eq!(report.lines, expected, "{report:#?}");
    assert_eq!((report.errors, report.warnings), (4, 1));
    // What a whole configuration would be warned about is not said of a partial one.
    assert!(
        !report.lines.iter().any(|l| l.contains("empty catalog")),
        "{report:#?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
