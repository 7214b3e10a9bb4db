//! One server entry of a client's file (`"name": { "command": ... }`) turned into an
//! [`ImportedServer`]: its transport from `type`/`command`/`url`, its strings rewritten by
//! [`Vars`], and a comment for every key mcpmux cannot carry.

use super::vars::{escape, Rewritten, Vars};
use super::{HttpMode, ImportedServer, Transport};
use serde_json::{Map, Value};

/// Keys every format may use that mcpmux carries (the rest get a comment).
const CARRIED: &[&str] = &[
    "type",
    "transport",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "serverUrl",
    "headers",
    "envFile",
    "disabled",
];

/// Why a known key of some client cannot be carried.
fn why_not_carried(key: &str) -> &'static str {
    match key {
        "alwaysAllow" | "autoApprove" | "disabledTools" => {
            "tool approval is the host's business; mcpmux decides access with [[policy]] under [auth]"
        }
        "timeout" => "set request_timeout_secs (seconds) by hand if the server needs a longer timeout",
        "oauth" | "auth" => {
            "mcpmux does not sign in to upstreams with OAuth; give a token in `headers` (with ${VAR})"
        }
        "headersHelper" => "mcpmux runs no command for headers; give them in `headers` (with ${VAR})",
        "dev" => "VS Code's watch/debug settings are for developing a server",
        "sandbox" | "sandboxEnabled" => "mcpmux does not sandbox servers",
        _ => "mcpmux has no such setting",
    }
}

/// Convert the entry `name` (its JSON `value`); `project` names the Claude Code project it
/// belongs to, if any.
pub fn convert(vars: &Vars, name: &str, value: &Value, project: Option<&str>) -> ImportedServer {
    let mut server = ImportedServer {
        name: super::names::valid_name(name),
        source_name: name.to_string(),
        project: project.map(str::to_string),
        transport: Transport::Unsupported(String::new()),
        disabled: false,
        notes: Vec::new(),
        dropped: Vec::new(),
        needs_env: Vec::new(),
    };
    let Some(entry) = value.as_object() else {
        server.transport = Transport::Unsupported(format!("its value is {}, not an object", kind_of(value)));
        return server;
    };
    let mut conv = Converter {
        vars,
        entry,
        server: &mut server,
    };
    let transport = conv.transport();
    conv.uncarried();
    server.disabled = entry.get("disabled").and_then(Value::as_bool) == Some(true);
    server.transport = transport;
    server
}

struct Converter<'a> {
    vars: &'a Vars,
    entry: &'a Map<String, Value>,
    server: &'a mut ImportedServer,
}

impl Converter<'_> {
    fn transport(&mut self) -> Transport {
        let kind = match self.entry.get("type").or_else(|| self.entry.get("transport")) {
            None => None,
            Some(Value::String(kind)) => Some(kind.as_str()),
            Some(other) => return unsupported(format!("its `type` is {}, not a string", kind_of(other))),
        };
        let url = self.entry.get("url").or_else(|| self.entry.get("serverUrl"));
        let command = self.entry.get("command");
        let http = |mode| (mode, url);
        let (mode, url) = match kind.map(str::to_ascii_lowercase).as_deref() {
            Some("stdio") => return self.stdio(command, url.is_some()),
            Some("http" | "streamable-http" | "streamablehttp" | "streamable_http") => {
                http(HttpMode::StreamableHttp)
            }
            Some("sse") => http(HttpMode::Sse),
            Some("ws" | "websocket") => {
                return unsupported("WebSocket (`type: \"ws\"`) is not a transport mcpmux speaks".into())
            }
            Some(other) => return unsupported(format!("unknown `type` {other:?}")),
            None if command.is_some() => return self.stdio(command, url.is_some()),
            None => http(HttpMode::Auto),
        };
        let Some(url) = url else {
            return unsupported("neither `command` (stdio) nor `url` (HTTP) is set".into());
        };
        if command.is_some() {
            self.drop_key("command", "the entry is an HTTP server (`url`)");
        }
        self.http(url, mode)
    }

    fn stdio(&mut self, command: Option<&Value>, has_url: bool) -> Transport {
        let Some(command) = command else {
            return unsupported("a stdio server without `command`".into());
        };
        let Some(command) = self.string("command", command) else {
            return unsupported("its `command` is not a string".into());
        };
        if command.trim().is_empty() {
            return unsupported("its `command` is empty".into());
        }
        if has_url {
            self.drop_key("url", "the entry is a stdio server (`command`)");
        }
        if self.entry.contains_key("headers") {
            self.drop_key("headers", "headers are for HTTP servers");
        }
        let args = match self.entry.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => (items.iter().enumerate())
                .filter_map(|(i, v)| self.string(&format!("args[{i}]"), v))
                .collect(),
            Some(other) => {
                self.dropped(format!("`args` is {}, not a list: not carried", kind_of(other)));
                Vec::new()
            }
        };
        let env = self.table("env", |n| !n.is_empty() && !n.contains(['=', '\0']));
        let cwd = match self.entry.get("cwd") {
            None | Some(Value::Null) => self.vars.workspace.clone().map(Cwd::Workspace),
            Some(v) => self.string("cwd", v).filter(|c| !c.is_empty()).map(|c| {
                match (&self.vars.workspace, c.starts_with(['/', '$'])) {
                    (Some(dir), false) => Cwd::Given(format!("{}/{c}", escape(dir.trim_end_matches('/')))),
                    _ => Cwd::Given(c),
                }
            }),
        };
        let env_file = match self.entry.get("envFile") {
            None | Some(Value::Null) => None,
            Some(v) => {
                self.string("envFile", v)
                    .map(|f| match (&self.vars.workspace, f.starts_with(['/', '$'])) {
                        (Some(dir), false) => format!("{}/{f}", escape(dir.trim_end_matches('/'))),
                        _ => f,
                    })
            }
        };
        let (cwd, cwd_is_workspace) = match cwd {
            Some(Cwd::Workspace(dir)) => (Some(escape(&dir)), true),
            Some(Cwd::Given(dir)) => (Some(dir), false),
            None => (None, false),
        };
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
            cwd_is_workspace,
            env_file,
        }
    }

    fn http(&mut self, url: &Value, mode: HttpMode) -> Transport {
        let Some(url) = self.string("url", url) else {
            return unsupported("its `url` is not a string".into());
        };
        let lower = url.to_ascii_lowercase();
        let rest = (lower.strip_prefix("http://")).or_else(|| lower.strip_prefix("https://"));
        let literal = !url.contains('$');
        if literal && rest.is_none_or(|r| r.is_empty() || r.starts_with('/')) {
            return unsupported(format!(
                "its `url` {url:?} is not an http:// or https:// URL with a host"
            ));
        }
        for key in ["args", "env", "cwd", "envFile"] {
            if self.entry.get(key).is_some_and(|v| !is_empty(v)) {
                self.drop_key(key, "the entry is an HTTP server (`url`)");
            }
        }
        let headers = self.table("headers", header_name);
        Transport::Http { url, headers, mode }
    }

    /// An object of strings (`env`, `headers`); names `valid` refuses are dropped with a comment.
    fn table(&mut self, key: &str, valid: fn(&str) -> bool) -> Vec<(String, String)> {
        let map = match self.entry.get(key) {
            None | Some(Value::Null) => return Vec::new(),
            Some(Value::Object(map)) => map,
            Some(other) => {
                self.dropped(format!(
                    "`{key}` is {}, not an object: not carried",
                    kind_of(other)
                ));
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for (name, value) in map {
            if !valid(name) {
                self.dropped(format!(
                    "`{key}` entry {name:?} is not a valid name there: not carried"
                ));
                continue;
            }
            if let Some(text) = self.string(&format!("{key}.{name}"), value) {
                out.push((name.clone(), text));
            }
        }
        out
    }

    /// A string value rewritten for mcpmux; numbers and booleans are taken as their text (with a
    /// note), anything else is dropped (with a note).
    fn string(&mut self, key: &str, value: &Value) -> Option<String> {
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(_) | Value::Bool(_) => {
                self.server
                    .notes
                    .push(format!("`{key}` was the JSON {value}, written as a string"));
                value.to_string()
            }
            other => {
                self.dropped(format!(
                    "`{key}` is {}, not a string: not carried",
                    kind_of(other)
                ));
                return None;
            }
        };
        let Rewritten { text, notes, needs } = self.vars.rewrite(&text);
        for note in notes {
            if !self.server.notes.contains(&note) {
                self.server.notes.push(note);
            }
        }
        for var in needs {
            if !self.server.needs_env.contains(&var) {
                self.server.needs_env.push(var);
            }
        }
        Some(text)
    }

    /// A comment for every key that is not carried.
    fn uncarried(&mut self) {
        for (key, value) in self.entry {
            if CARRIED.contains(&key.as_str()) {
                continue;
            }
            let shown = short_json(value);
            self.server.dropped.push(format!(
                "not carried: \"{key}\": {shown} ({})",
                why_not_carried(key)
            ));
        }
        if self.entry.get("disabled").is_some_and(|v| !v.is_boolean()) {
            self.dropped("`disabled` is not true or false: not carried".into());
        }
    }

    fn drop_key(&mut self, key: &str, why: &str) {
        let shown = self.entry.get(key).map(short_json).unwrap_or_default();
        self.dropped(format!("not carried: \"{key}\": {shown} ({why})"));
    }

    fn dropped(&mut self, text: String) {
        self.server.dropped.push(text);
    }
}

enum Cwd {
    /// The client's workspace folder, where it runs the server when the entry names no `cwd`.
    Workspace(String),
    Given(String),
}

/// An HTTP header name (a token).
fn header_name(name: &str) -> bool {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    !name.is_empty() && name.bytes().all(token)
}

fn unsupported(why: String) -> Transport {
    Transport::Unsupported(why)
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

/// What a JSON value is, for messages.
pub fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Compact JSON, cut to about 80 characters.
pub fn short_json(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(80) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}
