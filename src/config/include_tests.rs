//! `include` and `mcp_json` read from real files: the merge rules, errors naming the included
//! file and its line, cycles, relative paths following the file that wrote them.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh folder with `files` written in it.
fn folder(files: &[(&str, &str)]) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("mcpmux-include-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn load(dir: &Path) -> Result<Config, String> {
    Config::load(&dir.join("main.toml")).map_err(|e| e.to_string())
}

const KEYS: &str = "[[auth.api_keys]]\nname = \"ci\"\nkey = \"k\"\n";

#[test]
fn later_keys_win_tables_merge_and_arrays_of_tables_append() {
    let dir = folder(&[
        (
            "main.toml",
            "include = [\"team.toml\"]\n[gateway]\npage_size = 9\n\
             [servers.a]\nargs = [\"mine\"]\n[servers.c]\ncommand = \"c\"\n\
             [[policy]]\nallow = [\"a__*\"]\n",
        ),
        (
            "team.toml",
            &format!(
                "[gateway]\npage_size = 7\nseparator = \"--\"\n[servers.a]\ncommand = \"a\"\nargs = [\"team\", \"x\"]\n\
                 [servers.b]\nurl = \"http://127.0.0.1:9/mcp\"\n{KEYS}[[policy]]\nallow = [\"b--*\"]\n"
            ),
        ),
    ]);
    let config = load(&dir).unwrap();
    assert_eq!(config.gateway.page_size, 9, "the including file's own key wins");
    assert_eq!(
        config.gateway.separator, "--",
        "a key only the included file has is kept"
    );
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["a", "b", "c"],
        "included servers first, then the file's own"
    );
    let TransportConfig::Stdio { command, args, .. } = &config.servers[0].transport else {
        panic!()
    };
    assert_eq!(
        (command.as_str(), args.as_slice()),
        ("a", &["mine".to_string()][..]),
        "a list is replaced whole"
    );
    let allows: Vec<String> = config.policy.iter().map(|r| format!("{:?}", r.allow)).collect();
    assert_eq!(config.policy.len(), 2, "{allows:?}");
    assert!(
        allows[0].contains("b--*") && allows[1].contains("a__*"),
        "{allows:?}"
    );
    assert!(config.auth.is_some(), "[auth] from the included file");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_policy_rule_in_an_included_file_is_named_by_that_file_and_line() {
    let dir = folder(&[
        (
            "main.toml",
            "include = [\"team.toml\"]\n\n[servers.a]\ncommand = \"a\"\n[[policy]]\nallow = [\"a__*\"]\n",
        ),
        (
            "team.toml",
            &format!("{KEYS}\n\n[[policy]]\nallow = [\"b__*\"]\n"),
        ),
    ]);
    let config = load(&dir).unwrap();
    let team = dir.join("team.toml").display().to_string();
    let main = dir.join("main.toml").display().to_string();
    let sites: Vec<String> = config.policy.iter().map(|r| r.site()).collect();
    assert_eq!(sites, [format!("{team} line 6"), "line 5".to_string()]);
    assert_eq!(config.policy[0].at(&main), format!("{team}:6"));
    assert_eq!(config.policy[1].at(&main), format!("{main}:5"));

    // A rule's own refusals found after parsing name its file too.
    std::fs::write(
        dir.join("team.toml"),
        format!("{KEYS}\n[[policy]]\nallow = [\"b__*\"]\naudit_arguments = true\n"),
    )
    .unwrap();
    let err = load(&dir).unwrap_err();
    assert!(
        err.starts_with(&format!("{team}:5: policy[0].audit_arguments")),
        "{err}"
    );
    std::fs::write(dir.join("team.toml"), "\n[[policy]]\nallow = [\"b__*\"]\n").unwrap();
    let err = load(&dir).unwrap_err();
    assert!(
        err.starts_with(&format!("{team}:2: [[policy]] needs [auth]")),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_error_in_an_included_file_names_that_file_and_line() {
    let dir = folder(&[
        (
            "main.toml",
            "include = [\"conf/team.toml\"]\n[servers.a]\ncommand = \"a\"\n",
        ),
        (
            "conf/team.toml",
            "# team servers\n\n[servers.b]\ncommand = \"b\"\nbogus = 1\n",
        ),
    ]);
    let err = load(&dir).unwrap_err();
    let team = dir.join("conf/team.toml").display().to_string();
    assert!(
        err.starts_with(&format!("{team}:5:1: unknown key `bogus`")),
        "{err}"
    );

    // A value the included file got wrong, found after parsing: its line too.
    std::fs::write(dir.join("conf/team.toml"), "[gateway]\n\nlisten = \"nowhere\"\n").unwrap();
    let err = load(&dir).unwrap_err();
    assert!(err.starts_with(&format!("{team}:3: gateway.listen")), "{err}");

    // A syntax error in it.
    std::fs::write(dir.join("conf/team.toml"), "[servers.b]\ncommand = \n").unwrap();
    let err = load(&dir).unwrap_err();
    assert!(err.starts_with(&format!("{team}:2:")), "{err}");

    // And the including file's own errors still name it.
    std::fs::write(dir.join("conf/team.toml"), "").unwrap();
    std::fs::write(
        dir.join("main.toml"),
        "include = [\"conf/team.toml\"]\n\n[servers.a]\nurl = \"ftp://x\"\n",
    )
    .unwrap();
    let err = load(&dir).unwrap_err();
    let main = dir.join("main.toml").display().to_string();
    assert!(err.starts_with(&format!("{main}:4:")), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn includes_nest_relative_to_their_file_and_cycles_are_refused() {
    let dir = folder(&[
        ("main.toml", "include = \"a/one.toml\"\n"),
        (
            "a/one.toml",
            "include = [\"b/two.toml\"]\n[servers.one]\ncommand = \"./run\"\n",
        ),
        (
            "a/b/two.toml",
            "[servers.two]\ncommand = \"two\"\ncwd = \"work\"\n",
        ),
    ]);
    let config = load(&dir).unwrap();
    let stdio = |i: usize| match &config.servers[i].transport {
        TransportConfig::Stdio { command, cwd, .. } => (command.clone(), cwd.clone().unwrap()),
        other => panic!("{other:?}"),
    };
    let a = std::fs::canonicalize(dir.join("a")).unwrap_or(dir.join("a"));
    let (two, two_cwd) = stdio(0);
    assert_eq!(
        (two.as_str(), two_cwd),
        ("two", dir.join("a/b/work")),
        "cwd follows two.toml"
    );
    let (one, one_cwd) = stdio(1);
    assert!(
        one == dir.join("a/run").display().to_string() || one == a.join("run").display().to_string(),
        "{one}"
    );
    assert_eq!(
        one_cwd,
        dir.join("a"),
        "a server runs in the folder of the file that wrote it"
    );

    std::fs::write(dir.join("a/b/two.toml"), "include = [\"../../main.toml\"]\n").unwrap();
    let err = load(&dir).unwrap_err();
    let two = dir.join("a/b/two.toml").display().to_string();
    assert!(err.starts_with(&format!("{two}:1: include cycle: ")), "{err}");
    assert!(
        err.contains("main.toml -> ") && err.ends_with("main.toml"),
        "{err}"
    );

    std::fs::write(dir.join("a/b/two.toml"), "\ninclude = [\"gone.toml\"]\n").unwrap();
    let err = load(&dir).unwrap_err();
    assert!(
        err.starts_with(&format!("{two}:2: include ")) && err.contains("cannot read it"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mcp_json_servers_join_the_toml_ones_and_the_toml_wins_a_clash() {
    let dir = folder(&[
        (
            "main.toml",
            "mcp_json = [\"proj/.mcp.json\", \"missing/mcp.json\"]\n[servers.same]\nurl = \"http://127.0.0.1:9/toml\"\n",
        ),
        (
            "proj/.mcp.json",
            r#"{"mcpServers": {"same": {"type": "http", "url": "http://127.0.0.1:9/json"},
                "files": {"command": "./bin/files", "args": ["${MCPMUX_TEST_UNSET_VAR:-dflt}"]}}}"#,
        ),
    ]);
    let main = dir.join("main.toml");
    let (config, files) = Config::load_tracked(&main);
    let config = config.unwrap();
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["same", "files"]);
    let TransportConfig::Http { url, .. } = &config.servers[0].transport else {
        panic!()
    };
    assert_eq!(url, "http://127.0.0.1:9/toml", "the TOML server wins");
    let TransportConfig::Stdio {
        command, args, cwd, ..
    } = &config.servers[1].transport
    else {
        panic!()
    };
    assert_eq!(args, &["dflt"]);
    assert_eq!(
        cwd.as_deref(),
        Some(dir.join("proj").as_path()),
        "the JSON file's folder"
    );
    assert_eq!(command, &dir.join("proj/bin/files").display().to_string());
    assert_eq!(
        files,
        [
            main.clone(),
            dir.join("proj/.mcp.json"),
            dir.join("missing/mcp.json")
        ],
        "all are watched"
    );

    std::fs::write(dir.join("proj/.mcp.json"), "{\"mcpServers\": {\n  \"x\": }").unwrap();
    let err = Config::load(&main).unwrap_err().to_string();
    let json = dir.join("proj/.mcp.json").display().to_string();
    assert!(err.starts_with(&format!("{json}:2:")), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_included_audit_path_follows_its_file_and_the_operator_address_is_read_through_includes() {
    let dir = folder(&[
        ("main.toml", "include = [\"ops/ops.toml\"]\n"),
        (
            "ops/ops.toml",
            "[audit]\npath = \"audit.jsonl\"\n[gateway]\nadmin_listen = \"0.0.0.0:9191\"\n",
        ),
    ]);
    let config = load(&dir).unwrap();
    let sink = config.audit.map(|a| a.sink);
    assert_eq!(sink, Some(AuditSink::File(dir.join("ops/audit.jsonl"))));
    let endpoint = operator_address(&dir.join("main.toml")).unwrap();
    assert_eq!(
        endpoint.addr,
        SocketAddr::from(([127, 0, 0, 1], 9191)),
        "a wildcard is reached on loopback"
    );
    assert_eq!(
        (endpoint.base(), endpoint.pinned_cert),
        ("http://127.0.0.1:9191".to_string(), None)
    );
    // The rest of the file wrong: the address is still read.
    std::fs::write(
        dir.join("main.toml"),
        "include = [\"ops/ops.toml\"]\n[servers.x]\nbogus = 1\n",
    )
    .unwrap();
    assert!(load(&dir).is_err());
    assert_eq!(
        operator_address(&dir.join("main.toml")).unwrap().addr.port(),
        9191
    );
    // With TLS (written in the included file): HTTPS, trusting its certificate file, which
    // follows the file that names it.
    std::fs::write(
        dir.join("ops/ops.toml"),
        "[gateway]\nadmin_listen = \"127.0.0.1:9191\"\ntls = { cert = \"certs/gw.pem\", key = \"k.pem\" }\n",
    )
    .unwrap();
    let endpoint = operator_address(&dir.join("main.toml")).unwrap();
    assert_eq!(endpoint.base(), "https://127.0.0.1:9191");
    assert_eq!(endpoint.pinned_cert, Some(dir.join("ops/certs/gw.pem")));
    let _ = std::fs::remove_dir_all(&dir);
}
