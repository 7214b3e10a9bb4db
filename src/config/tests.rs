//! Tests for the config module: parsing, interpolation, validation and error positions.

use super::*;

fn no_env(_: &str) -> Option<String> {
    None
}

fn test_env(var: &str) -> Option<String> {
    match var {
        "DOCS_TOKEN" => Some("abc".to_string()),
        "HOME_DIR" => Some("/home/u".to_string()),
        "PORT" => Some("9090".to_string()),
        "DOLLAR" => Some("${NOT_EXPANDED}".to_string()),
        _ => None,
    }
}

pub(super) fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml_str(text, "config.toml", &test_env)
}

pub(super) fn err(text: &str) -> String {
    match parse(text) {
        Ok(c) => panic!("expected an error, got {c:?}"),
        Err(e) => e.to_string(),
    }
}

type Stdio<'a> = (&'a str, &'a [String], &'a [(String, Secret)], Option<&'a Path>);

fn stdio(server: &ServerConfig) -> Stdio<'_> {
    match &server.transport {
        TransportConfig::Stdio {
            command,
            args,
            env,
            cwd,
            ..
        } => (command, args, env, cwd.as_deref()),
        other => panic!("expected stdio, got {other:?}"),
    }
}

fn http(server: &ServerConfig) -> (&str, &[(String, Secret)]) {
    match &server.transport {
        TransportConfig::Http { url, headers, .. } => (url, headers),
        other => panic!("expected http, got {other:?}"),
    }
}

const EXAMPLE: &str = r#"[gateway]
listen = "127.0.0.1:8080"

[servers.everything]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-everything@2026.8.31"]
env = { LOG_LEVEL = "info" }

[servers.docs]
url = "http://127.0.0.1:3001/mcp"
headers = { Authorization = "Bearer ${DOCS_TOKEN}" }
"#;

#[test]
fn empty_file_gives_defaults() {
    let c = Config::from_toml_str("", "config.toml", &no_env).unwrap();
    assert!(c.servers.is_empty());
    let g = &c.gateway;
    assert_eq!(g, &GatewayConfig::default());
    assert_eq!(g.listen, "127.0.0.1:8080".parse::<SocketAddr>().unwrap());
    assert_eq!(g.path, "/mcp");
    assert_eq!(g.separator, "__");
    assert_eq!(g.session_idle_timeout, Duration::from_secs(1800));
    assert_eq!(g.request_timeout, Duration::from_secs(300));
    assert_eq!(g.page_size, 500);
    assert_eq!(g.max_body_bytes, 16 * 1024 * 1024);
    assert!(g.allowed_hosts.is_empty() && g.allowed_origins.is_empty());
    let c = parse("[gateway]\n").unwrap();
    assert_eq!(c.gateway, GatewayConfig::default());
}

#[test]
fn full_example_parses() {
    let c = parse(EXAMPLE).unwrap();
    let names: Vec<_> = c.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["everything", "docs"]);
    let every = &c.servers[0];
    assert_eq!(every.namespace, "everything");
    assert_eq!(every.isolation, Isolation::Shared);
    assert_eq!(every.request_timeout, None);
    assert_eq!(every.max_line_bytes, 16 * 1024 * 1024);
    let (cmd, args, env, cwd) = stdio(every);
    assert_eq!(cmd, "npx");
    assert_eq!(args, ["-y", "@modelcontextprotocol/server-everything@2026.8.31"]);
    assert_eq!(env, [("LOG_LEVEL".to_string(), Secret::new("info"))]);
    assert_eq!(cwd, None);
    let (url, headers) = http(&c.servers[1]);
    assert_eq!(url, "http://127.0.0.1:3001/mcp");
    assert_eq!(headers.len(), 1);
    assert_eq!(headers[0].0, "Authorization");
    assert_eq!(headers[0].1.expose(), "Bearer abc");
    assert_eq!(
        c.servers[1].effective_request_timeout(&c.gateway),
        Duration::from_secs(300)
    );
}

#[test]
fn servers_keep_file_order() {
    let text = "[servers.zeta]\ncommand = \"z\"\n[servers.alpha]\nurl = \"https://a\"\n\
                [gateway]\npath = \"/\"\n[servers.mid]\ncommand = \"m\"\n[servers.beta]\ncommand = \"b\"\n";
    let names: Vec<_> = parse(text).unwrap().servers.into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["zeta", "alpha", "mid", "beta"]);
    let inline = "servers = { b = { command = \"b\" }, a = { command = \"a\" } }\n";
    let names: Vec<_> = parse(inline)
        .unwrap()
        .servers
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["b", "a"]);
}

#[test]
fn all_optional_keys() {
    let text = r#"
[gateway]
listen = "[::1]:${PORT}"
path = "/"
separator = "."
session_idle_timeout_secs = 60
request_timeout_secs = 5
page_size = 1
max_body_bytes = 1024
allowed_hosts = ["example.com", "localhost:${PORT}"]
allowed_origins = ["https://app.example"]

[servers."my server"]
command = "srv"
cwd = "${HOME_DIR}/work"
namespace = "mine"
isolation = "per-session"
request_timeout_secs = 7
max_line_bytes = 4096
"#;
    let c = parse(text).unwrap();
    let g = &c.gateway;
    assert_eq!(g.listen, "[::1]:9090".parse::<SocketAddr>().unwrap());
    assert_eq!((g.path.as_str(), g.separator.as_str()), ("/", "."));
    assert_eq!(g.session_idle_timeout, Duration::from_secs(60));
    assert_eq!(g.request_timeout, Duration::from_secs(5));
    assert_eq!((g.page_size, g.max_body_bytes), (1, 1024));
    assert_eq!(g.allowed_hosts, ["example.com", "localhost:9090"]);
    assert_eq!(g.allowed_origins, ["https://app.example"]);
    let s = &c.servers[0];
    assert_eq!((s.name.as_str(), s.namespace.as_str()), ("my server", "mine"));
    assert_eq!(s.isolation, Isolation::PerSession);
    assert_eq!(s.request_timeout, Some(Duration::from_secs(7)));
    assert_eq!(s.effective_request_timeout(g), Duration::from_secs(7));
    assert_eq!(s.max_line_bytes, 4096);
    assert_eq!(stdio(s).3, Some(Path::new("/home/u/work")));
}

#[test]
fn unknown_key_in_gateway_names_key_and_line() {
    let e = err("# comment\n[gateway]\nlisten = \"127.0.0.1:1\"\n\nlistn = \"x\"\n");
    assert!(e.starts_with("config.toml:5:"), "{e}");
    assert!(e.contains("unknown key `listn`"), "{e}");
    assert!(e.contains("[gateway]"), "{e}");
}

#[test]
fn an_unknown_key_suggests_the_nearest_valid_one_and_lists_them_only_when_none_is_near() {
    let e = err("[gateway]\nlistn = \"127.0.0.1:1\"\n");
    assert_eq!(
        e,
        "config.toml:2:1: unknown key `listn`: did you mean `listen`? (in [gateway])"
    );
    let e = err("[servers.a]\ncomand = \"sh\"\n");
    assert_eq!(
        e,
        "config.toml:2:1: unknown key `comand`: did you mean `command`? (in [servers.a])"
    );
    // Nothing near: the valid keys, so that the right one can be found.
    let e = err("[gateway]\nport = 8080\n");
    assert!(
        e.starts_with("config.toml:2:1: unknown key `port`, expected one of `listen`, "),
        "{e}"
    );
    assert!(!e.contains("did you mean"), "{e}");
}

#[test]
fn unknown_key_in_server_names_key_and_line() {
    let text = "[gateway]\n\n[servers.other]\nurl = \"http://x\"\n\n[servers.everything]\ncomand = \"npx\"\n";
    let e = err(text);
    assert!(e.starts_with("config.toml:7:"), "{e}");
    assert!(e.contains("unknown key `comand`"), "{e}");
    assert!(e.contains("[servers.everything]"), "{e}");
    let e = err("[gatway]\n");
    assert!(e.starts_with("config.toml:1:") && e.contains("`gatway`"), "{e}");
    assert!(!e.contains("(in"), "{e}");
}

#[test]
fn type_error_points_at_value_line() {
    let e = err("[gateway]\nlisten = \"127.0.0.1:1\"\npage_size = \"ten\"\n");
    assert!(e.starts_with("config.toml:3:13:"), "{e}");
    assert!(e.contains("invalid type"), "{e}");
    let e = err("[servers.a]\ncommand = \"x\"\nargs = [\"a\",\n  2]\n");
    assert!(e.starts_with("config.toml:4:"), "{e}");
    let e = err("[servers]\na = 5\n");
    assert!(e.contains("server table") && !e.contains("Raw"), "{e}");
}

#[test]
fn syntax_error_has_line() {
    let e = err("[gateway]\nlisten = \n");
    assert!(e.starts_with("config.toml:2:"), "{e}");
}

#[test]
fn command_and_url_exactly_one() {
    let e = err("[servers.both]\ncommand = \"x\"\nurl = \"http://x\"\n");
    assert!(e.contains("\"both\"") && e.contains("not both"), "{e}");
    let e = err("[gateway]\n[servers.none]\nnamespace = \"n\"\n");
    assert!(e.starts_with("config.toml:2:") && e.contains("\"none\""), "{e}");
    assert!(e.contains("missing `command`"), "{e}");
}

#[test]
fn inherit_env_is_off_unless_set() {
    let inherits = |text: &str| match parse(text).unwrap().servers[0].transport {
        TransportConfig::Stdio { inherit_env, .. } => inherit_env,
        ref other => panic!("{other:?}"),
    };
    assert!(!inherits("[servers.s]\ncommand = \"x\"\n"));
    assert!(!inherits("[servers.s]\ncommand = \"x\"\ninherit_env = false\n"));
    assert!(inherits("[servers.s]\ncommand = \"x\"\ninherit_env = true\n"));
    let e = err("[servers.s]\ncommand = \"x\"\ninherit_env = \"yes\"\n");
    assert!(e.starts_with("config.toml:3:"), "{e}");
}

#[test]
fn transport_specific_keys() {
    for key in [
        "args = [\"a\"]",
        "env = { A = \"b\" }",
        "cwd = \"/tmp\"",
        "inherit_env = true",
    ] {
        let e = err(&format!("[servers.h]\nurl = \"http://x\"\n{key}\n"));
        assert!(
            e.contains("server \"h\"") && e.contains("only valid for `command`"),
            "{e}"
        );
    }
    let e = err("[servers.s]\ncommand = \"x\"\nheaders = { A = \"b\" }\n");
    assert!(e.contains("server \"s\"") && e.contains("`headers`"), "{e}");
    let c = parse("[servers.h]\nurl = \"http://x\"\nmax_line_bytes = 10\n").unwrap();
    assert_eq!(c.servers[0].max_line_bytes, 10);
}

#[test]
fn url_scheme_checked() {
    for url in ["ftp://x", "127.0.0.1:3001/mcp", "http://", ""] {
        let e = err(&format!("[servers.h]\nurl = \"{url}\"\n"));
        assert!(e.starts_with("config.toml:2:") && e.contains("http://"), "{e}");
    }
    assert!(parse("[servers.h]\nurl = \"HTTPS://x/mcp\"\n").is_ok());
}

#[test]
fn interpolation_everywhere() {
    let text = r#"
[servers.s]
command = "${HOME_DIR}/bin/srv"
args = ["--token=${DOCS_TOKEN}", "plain"]
env = { TOKEN = "${DOCS_TOKEN}", HOME = "${HOME_DIR}" }
namespace = "ns${PORT}"
[servers.h]
url = "http://127.0.0.1:${PORT}/mcp"
headers = { Authorization = "Bearer ${DOCS_TOKEN}", X-Raw = "${DOLLAR}" }
"#;
    let c = parse(text).unwrap();
    let (cmd, args, env, _) = stdio(&c.servers[0]);
    assert_eq!(cmd, "/home/u/bin/srv");
    assert_eq!(args, ["--token=abc", "plain"]);
    assert_eq!(env[0].1.expose(), "abc");
    assert_eq!(env[1], ("HOME".to_string(), Secret::new("/home/u")));
    assert_eq!(c.servers[0].namespace, "ns9090");
    let (url, headers) = http(&c.servers[1]);
    assert_eq!(url, "http://127.0.0.1:9090/mcp");
    assert_eq!(headers[0].1.expose(), "Bearer abc");
    // substituted values are not expanded again
    assert_eq!(headers[1].1.expose(), "${NOT_EXPANDED}");
}

#[test]
fn missing_variable_is_named() {
    let r = parse("[servers.docs]\nurl = \"http://x\"\nheaders = { Authorization = \"Bearer ${NOPE}\" }\n");
    match r {
        Err(ConfigError::MissingEnv { var, location }) => {
            assert_eq!(var, "NOPE");
            assert!(location.contains("config.toml:3"), "{location}");
            assert!(
                location.contains("servers.docs.headers.Authorization"),
                "{location}"
            );
        }
        other => panic!("expected MissingEnv, got {other:?}"),
    }
    let e = err("[gateway]\nlisten = \"${ADDR}\"\n");
    assert!(
        e.contains("\"ADDR\"") && e.contains("gateway.listen") && e.contains("not set"),
        "{e}"
    );
}

#[test]
fn dollar_escapes() {
    let env = |_: &str| None;
    let ok = |s: &str| match interpolate(s, &env) {
        Ok(v) => v,
        Err(_) => panic!("interpolate({s:?}) failed"),
    };
    assert_eq!(ok("a$$b"), "a$b");
    assert_eq!(ok("$${X}"), "${X}");
    assert_eq!(ok("$$$$"), "$$");
    assert_eq!(ok("cost $5 $"), "cost $5 $");
    assert_eq!(ok("$X"), "$X");
    assert!(matches!(
        interpolate("naïve ${X", &env),
        Err(InterpError::Syntax(_))
    ));
    assert!(matches!(interpolate("${X}", &env), Err(InterpError::Missing(v)) if v == "X"));
}

#[test]
fn unterminated_and_invalid_placeholders() {
    let e = err("[servers.s]\ncommand = \"x\"\nargs = [\"${FOO\"]\n");
    assert!(
        e.starts_with("config.toml:3:") && e.contains("unterminated"),
        "{e}"
    );
    assert!(e.contains("servers.s.args[0]"), "{e}");
    let e = err("[servers.s]\ncommand = \"${}\"\n");
    assert!(e.contains("invalid variable name"), "{e}");
    let e = err("[servers.s]\ncommand = \"${A B}\"\n");
    assert!(e.contains("invalid variable name"), "{e}");
}

#[test]
fn dollar_literal_in_config() {
    let c = parse("[servers.s]\ncommand = \"echo\"\nargs = [\"$$HOME\", \"$PATH\", \"a$\"]\n").unwrap();
    assert_eq!(stdio(&c.servers[0]).1, ["$HOME", "$PATH", "a$"]);
}

#[test]
fn namespace_rules() {
    for ns in ["a b", "a/b", "ü", &"x".repeat(65)] {
        let e = err(&format!("[servers.s]\ncommand = \"x\"\nnamespace = \"{ns}\"\n"));
        assert!(e.starts_with("config.toml:3:") && e.contains("namespace"), "{e}");
    }
    let ok = parse(&format!(
        "[servers.s]\ncommand = \"x\"\nnamespace = \"{}\"\n",
        "A.b-_9".repeat(10)
    ));
    assert!(ok.is_ok());
    let e = err("[servers.\"bad key\"]\ncommand = \"x\"\n");
    assert!(e.contains("set `namespace` explicitly"), "{e}");
    let e = err("[servers.\"\"]\ncommand = \"x\"\n");
    assert!(e.contains("must not be empty"), "{e}");
}

#[test]
fn duplicate_namespace_rejected() {
    let e = err("[servers.a]\ncommand = \"x\"\n[servers.b]\ncommand = \"y\"\nnamespace = \"a\"\n");
    assert!(e.starts_with("config.toml:3:"), "{e}");
    assert!(
        e.contains("\"a\"") && e.contains("\"b\"") && e.contains("namespace"),
        "{e}"
    );
}

#[test]
fn empty_namespace_allowed_repeatedly() {
    let c = parse(
        "[servers.a]\ncommand = \"x\"\nnamespace = \"\"\n[servers.b]\nurl = \"http://y\"\nnamespace = \"\"\n",
    )
    .unwrap();
    assert_eq!(c.servers[0].namespace, "");
    assert_eq!(c.servers[1].namespace, "");
}

#[test]
fn isolation_values() {
    let iso = |v: &str| parse(&format!("[servers.s]\ncommand = \"x\"\nisolation = \"{v}\"\n"));
    assert_eq!(iso("shared").unwrap().servers[0].isolation, Isolation::Shared);
    assert_eq!(
        iso("per-session").unwrap().servers[0].isolation,
        Isolation::PerSession
    );
    let e = iso("per_session").unwrap_err().to_string();
    assert!(
        e.starts_with("config.toml:3:") && e.contains("\"per_session\""),
        "{e}"
    );
}

#[test]
fn debug_masks_secrets() {
    let text = "[servers.s]\ncommand = \"x\"\nenv = { KEY = \"hunter2\" }\n\
                [servers.h]\nurl = \"http://x\"\nheaders = { Authorization = \"Bearer abc\" }\n";
    let c = Config::from_toml_str(text, "config.toml", &no_env).unwrap();
    let dbg = format!("{c:?} {c:#?}");
    assert!(!dbg.contains("abc") && !dbg.contains("hunter2"), "{dbg}");
    assert!(dbg.contains("Authorization") && dbg.contains("\"***\""), "{dbg}");
}

#[test]
fn zero_limits_rejected() {
    for key in [
        "page_size",
        "request_timeout_secs",
        "max_body_bytes",
        "session_idle_timeout_secs",
    ] {
        let e = err(&format!("[gateway]\n{key} = 0\n"));
        assert!(e.starts_with("config.toml:2:") && e.contains(key), "{e}");
    }
    let e = err("[servers.s]\ncommand = \"x\"\nrequest_timeout_secs = 0\n");
    assert!(e.contains("servers.s.request_timeout_secs"), "{e}");
    let e = err("[gateway]\npage_size = -1\n");
    assert!(e.starts_with("config.toml:2:"), "{e}");
}

#[test]
fn bad_header_and_env_names() {
    let e = err("[servers.h]\nurl = \"http://x\"\nheaders = { \"Bad Header\" = \"v\" }\n");
    assert!(e.contains("header name"), "{e}");
    let e = err("[servers.s]\ncommand = \"x\"\nenv = { \"A=B\" = \"v\" }\n");
    assert!(e.contains("environment variable name"), "{e}");
}

#[test]
fn load_reads_file_and_reports_io_errors() {
    let dir = std::env::temp_dir().join(format!("mcpmux-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config.toml");
    std::fs::write(&path, "[gateway]\npath = \"/x\"\n[servers.a]\ncommand = \"x\"\n").unwrap();
    let c = Config::load(&path).unwrap();
    assert_eq!(c.gateway.path, "/x");
    std::fs::write(&path, "[gateway]\nbogus = 1\n").unwrap();
    let e = Config::load(&path).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}:2:", path.display())), "{e}");
    let missing = dir.join("missing.toml");
    let e = Config::load(&missing).unwrap_err();
    assert!(matches!(e, ConfigError::Io { .. }), "{e:?}");
    assert!(e.to_string().contains("missing.toml"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn era_values() {
    let era = |v: &str| parse(&format!("[servers.s]\ncommand = \"x\"\nera = \"{v}\"\n"));
    assert_eq!(era("auto").unwrap().servers[0].era, Era::Auto);
    assert_eq!(era("session").unwrap().servers[0].era, Era::Session);
    assert_eq!(
        parse("[servers.s]\ncommand = \"x\"\n").unwrap().servers[0].era,
        Era::Auto
    );
    let e = era("modern").unwrap_err().to_string();
    assert!(e.starts_with("config.toml:3:") && e.contains("\"modern\""), "{e}");
}

#[test]
fn limits_timeouts_and_health_checks_have_defaults_and_bounds() {
    let c = parse("[servers.a]\ncommand = \"x\"\n").expect("minimal config");
    let (gw, a) = (&c.gateway, &c.servers[0]);
    assert_eq!(gw.max_request_timeout, Duration::from_secs(3600));
    assert_eq!(
        (gw.max_in_flight_per_session, gw.drain_timeout),
        (64, Duration::from_secs(10))
    );
    assert_eq!(gw.shutdown_delay, Duration::ZERO);
    assert_eq!((a.max_in_flight, a.timeout_resets_on_progress), (256, false));
    assert_eq!(a.health_check_interval, Some(Duration::from_secs(30)));
    assert_eq!(a.health_check_timeout, Duration::from_secs(10));
    assert_eq!(a.handshake_timeout, Duration::from_secs(30));

    let c = parse(
        "[gateway]\nmax_request_timeout_secs = 60\nmax_in_flight_per_session = 4\ndrain_timeout_secs = 0\n\
         shutdown_delay_secs = 3\n[servers.a]\ncommand = \"x\"\nrequest_timeout_secs = 30\ntimeout_resets_on_progress = true\n\
         max_in_flight = 9\nhealth_check_interval_secs = 0\nhealth_check_timeout_secs = 2\n\
         handshake_timeout_secs = 7\n",
    )
    .expect("full config");
    let (gw, a) = (&c.gateway, &c.servers[0]);
    // The default request timeout (300 s) is brought under the hard maximum.
    assert_eq!(gw.request_timeout, Duration::from_secs(60));
    assert_eq!(
        (gw.max_in_flight_per_session, gw.drain_timeout),
        (4, Duration::ZERO)
    );
    assert_eq!(gw.shutdown_delay, Duration::from_secs(3));
    assert_eq!((a.max_in_flight, a.timeout_resets_on_progress), (9, true));
    assert_eq!(a.health_check_interval, None);
    assert_eq!(a.handshake_timeout, Duration::from_secs(7));
    assert_eq!(a.effective_request_timeout(gw), Duration::from_secs(30));

    let e = err(
        "[gateway]\nmax_request_timeout_secs = 10\n[servers.a]\ncommand = \"x\"\nrequest_timeout_secs = 11\n",
    );
    assert!(
        e.contains("config.toml:5") && e.contains("max_request_timeout_secs"),
        "{e}"
    );
    let e = err("[gateway]\nrequest_timeout_secs = 20\nmax_request_timeout_secs = 10\n");
    assert!(e.contains("config.toml:2"), "{e}");
    let e = err("[servers.a]\ncommand = \"x\"\nmax_in_flight = 0\n");
    assert!(e.contains("servers.a.max_in_flight must be at least 1"), "{e}");
    let e = err("[servers.a]\ncommand = \"x\"\nhandshake_timeout_secs = 0\n");
    assert!(
        e.contains("config.toml:3") && e.contains("servers.a.handshake_timeout_secs must be at least 1"),
        "{e}"
    );
}

#[test]
fn transport_values() {
    let mode = |v: &str| {
        parse(&format!(
            "[servers.s]\nurl = \"http://x/sse\"\ntransport = \"{v}\"\n"
        ))
        .map(|c| match &c.servers[0].transport {
            TransportConfig::Http { mode, .. } => *mode,
            other => panic!("expected http, got {other:?}"),
        })
    };
    assert_eq!(mode("sse").unwrap(), HttpMode::LegacySse);
    assert_eq!(mode("streamable-http").unwrap(), HttpMode::StreamableHttp);
    assert_eq!(mode("auto").unwrap(), HttpMode::Auto);
    match &parse("[servers.s]\nurl = \"http://x\"\n").unwrap().servers[0].transport {
        TransportConfig::Http { mode, .. } => assert_eq!(*mode, HttpMode::Auto),
        other => panic!("expected http, got {other:?}"),
    }
    let e = mode("websocket").unwrap_err().to_string();
    assert!(e.starts_with("config.toml:3:"), "{e}");
    assert!(
        e.contains("transport") && e.contains("\"websocket\"") && e.contains("\"sse\""),
        "{e}"
    );
    let e = err("[servers.s]\ncommand = \"x\"\ntransport = \"sse\"\n");
    assert!(e.contains("server \"s\"") && e.contains("`transport`"), "{e}");
}

#[test]
fn two_servers_with_one_namespace_are_refused_at_the_second_ones_line() {
    let e = err("[servers.a]\ncommand = \"x\"\n\n[servers.b]\ncommand = \"y\"\nnamespace = \"a\"\n");
    assert!(e.starts_with("config.toml:4:"), "{e}");
    assert!(
        e.contains("servers \"a\" and \"b\" both use namespace \"a\""),
        "{e}"
    );
}
