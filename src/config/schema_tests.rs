//! The schema of `mcpmux config schema` against the parser: it accepts every configuration in
//! the repository and a representative set of those the tests build, and it refuses what the
//! parser refuses (an unknown key at each level, a wrong type, a value outside a fixed set).

use super::raw::RawConfig;
use super::schema::schema;
use super::Config;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn validator() -> jsonschema::Validator {
    jsonschema::validator_for(&schema()).expect("the schema compiles")
}

/// Panics unless the schema accepts `text`: `Config::from_toml_str` calls it in unit tests for
/// every configuration it loads, so each one the tests build is checked against the schema.
pub(super) fn assert_schema_accepts(text: &str) {
    static VALIDATOR: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    let validator = VALIDATOR.get_or_init(validator);
    let errors = schema_errors(validator, text);
    assert!(
        errors.is_empty(),
        "the schema refuses a configuration the parser accepts: {errors:#?}\n{text}"
    );
}

/// A TOML text as the JSON value the schema describes.
fn json(text: &str) -> Value {
    let value: toml::Value = toml::from_str(text).expect("TOML");
    serde_json::to_value(value).expect("JSON")
}

/// Why the schema refuses `text` (empty when it accepts it).
fn schema_errors(validator: &jsonschema::Validator, text: &str) -> Vec<String> {
    let value = json(text);
    validator
        .iter_errors(&value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// Whether the raw tables deserialise (the structural half of the parser).
fn raw_ok(text: &str) -> bool {
    toml_edit::de::from_str::<RawConfig>(text).is_ok()
}

fn toml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            toml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "toml") && !path.ends_with("Cargo.toml") {
            out.push(path);
        }
    }
}

#[test]
fn the_schema_is_a_draft_2020_12_schema_with_descriptions_and_enums() {
    let schema = schema();
    assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert!(schema["title"].is_string());
    assert!(jsonschema::meta::is_valid(&schema), "not a valid JSON Schema");
    assert_eq!(schema["additionalProperties"], false);
    let defs = schema["$defs"].as_object().expect("$defs");
    // Every key of every table has a description (the editor's hover text).
    let mut tables: Vec<(&str, &Value)> = defs.iter().map(|(k, v)| (k.as_str(), v)).collect();
    tables.push(("(root)", &schema));
    for (name, def) in tables {
        for (key, prop) in def["properties"].as_object().into_iter().flatten() {
            let text = prop["description"].as_str().unwrap_or("");
            assert!(!text.is_empty(), "{name}.{key} has no description");
        }
    }
    let server = &defs["RawServer"]["properties"];
    assert_eq!(
        server["isolation"]["enum"],
        serde_json::json!(["shared", "per-session"])
    );
    assert_eq!(server["era"]["enum"], serde_json::json!(["auto", "session"]));
    assert_eq!(
        server["transport"]["enum"],
        serde_json::json!(["auto", "streamable-http", "sse"])
    );
    let ready = &defs["RawGateway"]["properties"]["ready_when"]["enum"];
    assert_eq!(*ready, serde_json::json!(["all", "any", "attempted"]));
    assert!(!schema.to_string().contains("\"null\""), "TOML has no null");
}

#[test]
fn every_toml_configuration_in_the_repository_is_valid_against_the_schema() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let validator = validator();
    let mut shipped = vec![root.join("config.example.toml")];
    toml_files(&root.join("examples"), &mut shipped);
    toml_files(&root.join("deploy"), &mut shipped);
    assert!(shipped.len() >= 4, "{shipped:?}");
    for path in &shipped {
        let text = std::fs::read_to_string(path).expect("read");
        let errors = schema_errors(&validator, &text);
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
        assert!(raw_ok(&text), "{}", path.display());
    }
    // Under tests/ and bench/ some files are meant to be wrong (fuzz seeds): the schema and
    // the parser must agree on each one that is TOML at all.
    let mut others = Vec::new();
    toml_files(&root.join("tests"), &mut others);
    toml_files(&root.join("bench"), &mut others);
    assert!(!others.is_empty());
    for path in &others {
        let text = std::fs::read_to_string(path).expect("read");
        if toml::from_str::<toml::Value>(&text).is_err() {
            continue;
        }
        let errors = schema_errors(&validator, &text);
        if Config::from_toml_str(&text, "t.toml", &|_| Some("1".into())).is_ok() {
            assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
        }
        if errors.is_empty() {
            assert!(
                raw_ok(&text),
                "{}: the schema accepts what the parser refuses",
                path.display()
            );
        }
    }
}

/// Configurations as the unit and end-to-end tests build them, one per part of the format.
const BUILT: &[(&str, &str)] = &[
    (
        "names",
        r#"
[gateway]
listen = "127.0.0.1:0"
max_name_length = 64
name_reserve = 24
[servers.names]
command = "python"
args = ["tests/fixtures/py_names_server.py", "files.read"]
[servers.alpha]
command = "python"
args = ["tests/fixtures/py_names_server.py", "echo"]
namespace = "a"
"#,
    ),
    (
        "shaping",
        r#"
[gateway]
listen = "127.0.0.1:0"
ready_when = "any"
separator = "__"
[servers.everything]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-everything@2026.8.31"]
env = { A = "1" }
tools = { include = ["echo", "get-*"], exclude = ["get-env"] }
prompts = { exclude = ["simple"] }
resources = { include = ["test://*"] }
rename = { echo = "say" }
descriptions = { say = "Repeat a message back." }
isolation = "per-session"
era = "session"
max_in_flight = 4
health_check_interval_secs = 0
[servers.remote]
url = "http://127.0.0.1:9/mcp"
transport = "sse"
headers = { Authorization = "Bearer x" }
enabled = false
"#,
    ),
    (
        "profiles",
        r#"
[servers.time]
command = "uvx"
[servers.fetch]
url = "https://example.com/mcp"
transport = "streamable-http"
[profiles.review]
path = "/mcp/review"
servers = ["time"]
tools = { include = ["time__*"] }
[profiles.all]
path = "/mcp/all"
"#,
    ),
    ("include", "include = [\"team.toml\", \"~/more.toml\"]\nmcp_json = \".mcp.json\"\n[servers.a]\ncommand = \"x\"\n"),
    (
        "auth",
        r#"
[gateway]
listen = "0.0.0.0:8080"
public_url = "https://mcp.example.com/mcp"
[auth]
issuer = "https://auth.example.com"
jwks_uri = "https://auth.example.com/jwks"
audience = ["https://mcp.example.com/mcp"]
scopes_supported = ["mcp", "mcp:admin"]
required_scopes = ["mcp"]
groups_claim = "roles"
scope_implies = { admin = ["write"] }
[auth.introspection]
endpoint = "https://auth.example.com/introspect"
client_id = "mcpmux"
client_secret = "s3cret"
cache_secs = 30
[[auth.api_keys]]
name = "ci"
sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
groups = ["bots"]
[[auth.api_keys]]
name = "dev"
key = "dev-key"
[[auth.step_up]]
tools = ["*__delete*"]
scopes = ["mcp:admin"]
[servers.a]
command = "x"
"#,
    ),
    (
        "policy and audit",
        r#"
[auth]
[[auth.api_keys]]
name = "ci"
key = "k"
[audit]
path = "audit.log"
queue_size = 100
[[policy]]
principals = ["ci"]
allow = ["a__*"]
deny = ["a__drop"]
rate_limit = "600/min"
audit_arguments = true
[[policy]]
groups = ["admins"]
scopes = ["mcp"]
allow = ["*"]
[servers.a]
command = "x"
"#,
    ),
    (
        "cluster",
        r#"
[gateway]
listen = "127.0.0.1:8080"
admin_listen = "127.0.0.1:9090"
drain_timeout_secs = 5
shutdown_delay_secs = 1
[cluster]
key = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="
previous_keys = ["AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI="]
advertise = "http://10.0.0.1:8080"
[servers.a]
command = "x"
"#,
    ),
    (
        "vault",
        r#"
[vault]
path = "state/mcpmux-vault"
key = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="
previous_keys = ["AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI="]
[servers.a]
command = "x"
"#,
    ),
];

#[test]
fn the_configurations_the_tests_build_are_valid_against_the_schema() {
    let validator = validator();
    for (what, text) in BUILT {
        assert!(raw_ok(text), "{what}: the parser refuses it");
        let errors = schema_errors(&validator, text);
        assert!(errors.is_empty(), "{what}: {errors:#?}");
        if *what != "include" {
            let loaded = Config::from_toml_str(text, "t.toml", &|_| None);
            assert!(loaded.is_ok(), "{what}: {loaded:?}");
        }
    }
}

/// Mistakes, each one the parser refuses and the schema must refuse too.
const WRONG: &[(&str, &str)] = &[
    ("unknown top-level key", "bogus = 1\n"),
    ("unknown [gateway] key", "[gateway]\nlisten_on = \"x\"\n"),
    ("unknown server key", "[servers.a]\ncommand = \"x\"\ncomand = \"y\"\n"),
    ("unknown filter key", "[servers.a]\ncommand = \"x\"\ntools = { includes = [\"a\"] }\n"),
    ("unknown [[policy]] key", "[[policy]]\nallows = [\"*\"]\n"),
    ("unknown [auth] key", "[auth]\nissuer_url = \"https://a.example\"\n"),
    (
        "unknown [auth.introspection] key",
        "[auth.introspection]\nendpoint = \"https://a.example/i\"\nclient_id = \"c\"\nclient_secret = \"s\"\nttl = 1\n",
    ),
    ("unknown [[auth.api_keys]] key", "[[auth.api_keys]]\nname = \"a\"\nkey = \"k\"\nscope = \"x\"\n"),
    ("unknown [[auth.step_up]] key", "[[auth.step_up]]\ntools = [\"*\"]\nscopes = [\"a\"]\nwhy = \"x\"\n"),
    ("unknown [audit] key", "[audit]\npath = \"-\"\nrotate = true\n"),
    ("unknown [cluster] key", "[cluster]\nkey = \"k\"\npeers = []\n"),
    ("unknown profile key", "[profiles.p]\npath = \"/p\"\nserver = [\"a\"]\n"),
    ("wrong type: string for a number", "[gateway]\npage_size = \"10\"\n"),
    ("wrong type: number for a string", "[servers.a]\ncommand = 1\n"),
    ("wrong type: string for a list", "[servers.a]\ncommand = \"x\"\nargs = \"-y\"\n"),
    ("wrong type: table for a bool", "[servers.a]\ncommand = \"x\"\nenabled = { yes = true }\n"),
    ("wrong type: servers as a list", "servers = [\"a\"]\n"),
    ("wrong type: include as a number", "include = 3\n"),
    ("negative number", "[gateway]\ndrain_timeout_secs = -1\n"),
    ("bad enum: isolation", "[servers.a]\ncommand = \"x\"\nisolation = \"per_session\"\n"),
    ("bad enum: era", "[servers.a]\ncommand = \"x\"\nera = \"modern\"\n"),
    ("bad enum: transport", "[servers.a]\nurl = \"http://h/mcp\"\ntransport = \"websocket\"\n"),
    ("bad enum: ready_when", "[gateway]\nready_when = \"some\"\n"),
    ("zero limit", "[servers.a]\ncommand = \"x\"\nmax_in_flight = 0\n"),
];

#[test]
fn the_schema_and_the_parser_refuse_the_same_mistakes() {
    let validator = validator();
    for (what, text) in WRONG {
        assert!(
            !schema_errors(&validator, text).is_empty(),
            "the schema accepts: {what}"
        );
        // Loaded from a file, as `include` is only followed there.
        let path = std::env::temp_dir().join(format!("mcpmux-schema-{}.toml", std::process::id()));
        std::fs::write(&path, text).expect("write");
        let loaded = Config::load(&path);
        let _ = std::fs::remove_file(&path);
        assert!(loaded.is_err(), "the parser accepts: {what}");
    }
}
