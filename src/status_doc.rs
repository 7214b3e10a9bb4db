//! The `/status` document, one set of types for the gateway that writes it and for
//! `mcpmux status` that reads it. Field order and names are the wire format; it imports only serde.

use serde::{Deserialize, Serialize};

/// What `GET /status` answers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StatusDocument {
    pub server: ServerInfo,
    pub uptime_secs: u64,
    /// Host sessions open (session era and legacy SSE).
    pub sessions: u64,
    pub listen_streams: u64,
    pub calls_waiting_for_input: u64,
    /// Calls this replica runs for hosts now, both eras (what a `kill -9` of it would fail); a
    /// request it relays to another replica counts there.
    pub calls_in_flight: u64,
    /// Requests this replica relays to another replica now (`[cluster]`): session-era requests
    /// and GET streams of sessions homed there, input-required retries of calls parked there.
    pub relayed_in_flight: u64,
    /// One entry per configured upstream, in the order of the configuration.
    pub upstreams: Vec<UpstreamStatus>,
    /// The servers configured with `enabled = false` (never started, nothing in the catalog), in
    /// the order of the configuration; absent when there is none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disabled: Vec<String>,
    /// Why a server of `disabled` is not started when its table does not say `enabled = false`
    /// (a variable of its `needs_env` is not set), by name; absent when there is none.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub disabled_reasons: std::collections::BTreeMap<String, String>,
    /// The `[profiles.NAME]` endpoints, in the order of the configuration; absent when there is
    /// none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub profiles: Vec<ProfileStatus>,
    /// The open host sessions, oldest first.
    pub session_list: Vec<SessionStatus>,
    /// The audit log, when `[audit]` keeps one (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit: Option<AuditStatus>,
    /// The replicas' shared store (`[cluster] store`), when one is set (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_store: Option<SharedStoreStatus>,
    /// The configuration in force and how the last reload went.
    pub config: ConfigStatus,
}

/// The shared store as this replica last found it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SharedStoreStatus {
    /// Its URL, the password shown as `***`.
    pub url: String,
    /// `up` (its last answer came), `down` (its last operation failed: rate limits are counted
    /// by each replica alone meanwhile) or `unknown` (nothing asked of it yet).
    pub state: String,
}

/// The configuration in force (its last good load) and the last reload.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConfigStatus {
    /// When the configuration in force was loaded, at start or by the last good reload (Unix
    /// time, seconds).
    pub loaded_at_unix: u64,
    /// The first 16 hex digits of the SHA-256 of the file in force (the log's `config_digest`).
    pub digest: Option<String>,
    /// The last reload, once there was one.
    pub last_reload: Option<ReloadStatus>,
}

/// How one reload went.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReloadStatus {
    /// `ok`, or `error` (nothing changed).
    pub outcome: String,
    /// Unix time, seconds.
    pub at_unix: u64,
    /// Why it was refused.
    pub error: Option<String>,
    /// The digest of the file it read (when it could be read).
    pub digest: Option<String>,
    /// What changed in the file but keeps its running value until a restart (`gateway.listen`,
    /// `[cluster]`, ...); left out when nothing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub needs_restart: Vec<String>,
}

/// One profile: where it is served, its servers and what it sees of the catalog now.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProfileStatus {
    pub name: String,
    pub path: String,
    /// The servers whose items it sees (every configured one when `servers` is not set).
    pub servers: Vec<String>,
    pub tools: u64,
    pub prompts: u64,
    pub resources: u64,
    pub resource_templates: u64,
    /// Host sessions open on its endpoint.
    pub sessions: u64,
    /// How its hosts discover tools: "list", "search" or "auto".
    #[serde(default)]
    pub discovery: String,
}

/// The audit log's writer: how many lines it wrote, and how many it could not.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuditStatus {
    /// The file, or `-` for stdout.
    pub path: String,
    pub lines_written: u64,
    /// Lines dropped because the writer's queue was full.
    pub dropped: u64,
    /// Lines lost to failed writes.
    pub write_errors: u64,
    /// The last write failure.
    pub last_error: Option<String>,
    /// The sequence number and hash of the last line in the file (`audit verify` prints the same
    /// for an intact file): kept elsewhere, they show whether lines were cut from its end.
    pub last_seq: u64,
    pub last_hash: Option<String>,
}

/// One open host session. The id is cut short: the whole id lets whoever has it act in the
/// session, and this document is for reading.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionStatus {
    /// The first characters of the session id.
    pub id_prefix: String,
    pub protocol_version: String,
    /// The host's `clientInfo` name and version, when it sent them.
    pub client: Option<String>,
    pub age_secs: u64,
    pub idle_secs: u64,
    /// The host's calls being served now.
    pub in_flight: u64,
    /// Whether the host has its standalone (GET) stream open.
    pub get_stream: bool,
    /// The profile whose endpoint the session was opened at (absent: the main endpoint).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
}

/// One configured upstream.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UpstreamStatus {
    pub name: String,
    pub namespace: String,
    /// `stdio`, `http` (Streamable HTTP) or `sse` (legacy HTTP+SSE).
    pub transport: String,
    /// `shared` or `per-session`.
    pub isolation: String,
    pub phase: Phase,
    /// Seconds since the phase began.
    pub for_secs: u64,
    pub restarts: u64,
    /// Why it last failed; once it is ready again this starts with `past (ready again): `.
    pub last_error: Option<String>,
    /// The negotiated protocol version, once the upstream answered.
    pub protocol_version: Option<String>,
    /// `session` or `stateless`, once the upstream answered.
    pub era: Option<String>,
    pub tools: u64,
    pub prompts: u64,
    pub resources: u64,
    #[serde(rename = "resourceTemplates")]
    pub resource_templates: u64,
    /// Tools, prompts, resources and templates of this upstream that hosts do not see because an
    /// earlier upstream exposes the same name or URI.
    pub shadowed: u64,
    /// How mcpmux signs in to it (`oauth`, `token_exchange`, `client_credentials`, `forward`),
    /// when its `auth` says more than headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<String>,
    /// How many principals hold a grant for it (`oauth` upstreams).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grants: Option<u64>,
    /// How many principals have a connection of their own open to it (isolation `per-principal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<u64>,
}

/// Where an upstream is in its life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    Starting,
    Ready,
    /// Down, waiting for the next start attempt.
    Restarting,
    /// Down after failing again and again; restarts wait the longest backoff.
    CrashLoop,
    Stopped,
    /// An `oauth` upstream no principal has signed in to yet (it shows only its
    /// `{namespace}__authorize` tool).
    #[serde(rename = "needs_authorization")]
    NeedsAuthorization,
    /// A phase this build does not know (read from a newer gateway); never entered by mcpmux.
    #[default]
    #[serde(other)]
    Unknown,
}

impl Phase {
    /// The name in the document.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::Ready => "ready",
            Phase::Restarting => "restarting",
            Phase::CrashLoop => "crash-loop",
            Phase::Stopped => "stopped",
            Phase::NeedsAuthorization => "needs_authorization",
            Phase::Unknown => "unknown",
        }
    }
}

impl StatusDocument {
    /// Whether every upstream is ready.
    pub fn all_ready(&self) -> bool {
        self.upstreams.iter().all(|u| u.phase == Phase::Ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> StatusDocument {
        StatusDocument {
            server: ServerInfo {
                name: "mcpmux".into(),
                version: "0.1.0".into(),
            },
            uptime_secs: 5,
            sessions: 2,
            listen_streams: 1,
            calls_waiting_for_input: 0,
            calls_in_flight: 3,
            relayed_in_flight: 1,
            upstreams: vec![UpstreamStatus {
                name: "time".into(),
                namespace: "time".into(),
                transport: "stdio".into(),
                isolation: "per-session".into(),
                phase: Phase::CrashLoop,
                for_secs: 3,
                restarts: 7,
                last_error: Some("exit 1".into()),
                protocol_version: None,
                era: None,
                tools: 1,
                prompts: 2,
                resources: 3,
                resource_templates: 4,
                shadowed: 1,
                auth: Some("oauth".into()),
                grants: Some(1),
                connections: None,
            }],
            disabled: Vec::new(),
            disabled_reasons: Default::default(),
            profiles: Vec::new(),
            session_list: vec![SessionStatus {
                id_prefix: "0123abcd".into(),
                protocol_version: "2025-11-25".into(),
                client: Some("inspector 2.12.0".into()),
                age_secs: 9,
                idle_secs: 2,
                in_flight: 1,
                get_stream: true,
                profile: None,
            }],
            audit: Some(AuditStatus {
                path: "/var/log/mcpmux/audit.jsonl".into(),
                lines_written: 10,
                dropped: 1,
                write_errors: 2,
                last_error: Some("No space left on device (os error 28)".into()),
                last_seq: 12,
                last_hash: Some("ab".repeat(32)),
            }),
            shared_store: Some(SharedStoreStatus {
                url: "redis://:***@cache:6379/0".into(),
                state: "down".into(),
            }),
            config: ConfigStatus {
                loaded_at_unix: 1_800_000_000,
                digest: Some("e3b0c44298fc1c14".into()),
                last_reload: Some(ReloadStatus {
                    outcome: "error".into(),
                    at_unix: 1_800_000_100,
                    error: Some("t.toml:3:1: unknown key".into()),
                    digest: Some("0123456789abcdef".into()),
                    needs_restart: Vec::new(),
                }),
            },
        }
    }

    #[test]
    fn writes_the_wire_format_in_order() {
        let text = serde_json::to_string(&sample()).expect("serialises");
        assert_eq!(
            text,
            concat!(
                r#"{"server":{"name":"mcpmux","version":"0.1.0"},"uptime_secs":5,"sessions":2,"#,
                r#""listen_streams":1,"calls_waiting_for_input":0,"calls_in_flight":3,"#,
                r#""relayed_in_flight":1,"upstreams":[{"name":"time","#,
                r#""namespace":"time","transport":"stdio","isolation":"per-session","#,
                r#""phase":"crash-loop","for_secs":3,"restarts":7,"last_error":"exit 1","#,
                r#""protocol_version":null,"era":null,"tools":1,"prompts":2,"resources":3,"#,
                r#""resourceTemplates":4,"shadowed":1,"auth":"oauth","grants":1}],"#,
                r#""session_list":[{"id_prefix":"0123abcd","#,
                r#""protocol_version":"2025-11-25","client":"inspector 2.12.0","age_secs":9,"#,
                r#""idle_secs":2,"in_flight":1,"get_stream":true}],"audit":{"path":"/var/log/mcpmux/audit.jsonl","#,
                r#""lines_written":10,"dropped":1,"write_errors":2,"#,
                r#""last_error":"No space left on device (os error 28)","last_seq":12,"#,
                r#""last_hash":"abababababababababababababababababababababababababababababababab"},"#,
                r#""shared_store":{"url":"redis://:***@cache:6379/0","state":"down"},"#,
                r#""config":{"loaded_at_unix":1800000000,"digest":"e3b0c44298fc1c14","#,
                r#""last_reload":{"outcome":"error","at_unix":1800000100,"#,
                r#""error":"t.toml:3:1: unknown key","digest":"0123456789abcdef"}}}"#
            )
        );
        let back: StatusDocument = serde_json::from_str(&text).expect("reads back");
        assert_eq!(back, sample());
        assert!(!back.all_ready());
    }

    #[test]
    fn names_disabled_servers_after_the_upstreams_only_when_there_are_some() {
        let doc = StatusDocument {
            disabled: vec!["github".into()],
            ..StatusDocument::default()
        };
        let text = serde_json::to_string(&doc).expect("serialises");
        assert!(
            text.contains(r#""upstreams":[],"disabled":["github"],"session_list""#),
            "{text}"
        );
        assert_eq!(
            serde_json::from_str::<StatusDocument>(&text).expect("reads back"),
            doc
        );
        let none = serde_json::to_string(&StatusDocument::default()).expect("serialises");
        assert!(!none.contains("disabled"), "{none}");
    }

    #[test]
    fn reads_leniently() {
        let doc: StatusDocument = serde_json::from_str(
            r#"{"upstreams":[{"name":"a","phase":"ready"},{"name":"b","phase":"draining","extra":1}]}"#,
        )
        .expect("missing and unknown fields are fine");
        assert_eq!(doc.upstreams[0].phase, Phase::Ready);
        assert_eq!(doc.upstreams[1].phase, Phase::Unknown);
        assert!(!doc.all_ready());
        for phase in [
            Phase::Starting,
            Phase::Ready,
            Phase::Restarting,
            Phase::CrashLoop,
            Phase::Stopped,
        ] {
            let text = serde_json::to_string(&phase).expect("serialises");
            assert_eq!(text, format!("\"{}\"", phase.as_str()));
        }
    }
}
