//! Mutual TLS on the listener (`[gateway] tls.client_ca`): the client certificate's subject is
//! the principal `cert:<CN>` that `[[policy]]` names (the Python SDK as the host); a client
//! without a certificate, with one from another CA or an expired one is refused at the
//! handshake; with `[auth]` beside it a certificate is optional, either credential admits, and
//! a request carrying both is audited with both.

use crate::support::*;
use crate::tls::test_certs::{TestCa, Usage};
use crate::tls::{python_smoke, Files};
use std::time::Duration;

/// The `[gateway]` line requiring client certificates issued by the files' CA.
fn mtls_line(files: &Files) -> String {
    format!(
        "tls = {{ cert = {:?}, key = {:?}, client_ca = {:?} }}",
        files.path("server.pem"),
        files.path("server-key.pem"),
        files.path("ca.pem")
    )
}

/// Write a client certificate for `cn` issued by `ca` as `NAME.pem` and `NAME-key.pem`; the
/// environment the Python client presents it with.
fn client_cert(
    files: &Files,
    ca: &TestCa,
    name: &str,
    cn: &str,
    expired: bool,
) -> Vec<(&'static str, String)> {
    let issued = match expired {
        false => ca.issue(Usage::Client, cn, &[]),
        true => ca.issue_expired(Usage::Client, cn, &[]),
    };
    files.write(&format!("{name}.pem"), &issued.cert);
    files.write(&format!("{name}-key.pem"), &issued.key);
    vec![
        ("MCPMUX_TEST_CA", files.path("ca.pem")),
        ("MCPMUX_TEST_CLIENT_CERT", files.path(&format!("{name}.pem"))),
        ("MCPMUX_TEST_CLIENT_KEY", files.path(&format!("{name}-key.pem"))),
    ]
}

/// A reqwest client trusting the test CA, presenting the certificate `name` when given.
fn client(files: &Files, name: Option<&str>) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(files.ca.pem().as_bytes()).unwrap();
    let mut builder = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(ca)
        .timeout(Duration::from_secs(20));
    if let Some(name) = name {
        let cert = std::fs::read_to_string(files.dir.join(format!("{name}.pem"))).unwrap();
        let key = std::fs::read_to_string(files.dir.join(format!("{name}-key.pem"))).unwrap();
        builder = builder.identity(reqwest::Identity::from_pem(format!("{cert}{key}").as_bytes()).unwrap());
    }
    builder.build().unwrap()
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"mtls","version":"0"}}}"#;

async fn initialize(
    client: &reqwest::Client,
    url: &str,
    bearer: Option<&str>,
) -> reqwest::Result<reqwest::Response> {
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(bearer) = bearer {
        req = req.bearer_auth(bearer);
    }
    req.body(INIT).send().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_names_the_principal_policy_decides_on_and_bad_ones_are_refused() {
    let _suite = crate::suite::enter(module_path!());
    let files = Files::new("mtls-policy");
    let servers = format!(
        "{}\n[[policy]]\nprincipals = [\"cert:alice\"]\nallow = [\"t__*\"]\n\n\
         [[policy]]\nprincipals = [\"cert:bob\"]\nallow = [\"t__*\"]\ndeny = [\"t__echo\"]\n",
        test_server_toml("t", &[], None)
    );
    let gw = boot_gateway(&servers, &mtls_line(&files)).await;
    let url = gw.url();

    // The Python SDK presenting alice's certificate: her policy allows the echo tool.
    let alice = client_cert(&files, &files.ca, "alice", "alice", false);
    let seen = python_smoke(&url, &alice).await;
    assert!(
        seen["echo_text"].as_str().is_some_and(|t| t.contains("hi")),
        "{seen}"
    );

    // bob's rule denies it: the same client fails to find it.
    let bob = client_cert(&files, &files.ca, "bob", "bob", false);
    let mut cmd = std::process::Command::new(&peers().python);
    cmd.arg(repo_root().join("tests/clients/py_client.py"))
        .args([url.as_str(), "smoke", "--prefix", "t__"])
        .envs(bob);
    let run = tokio::task::spawn_blocking(move || run_client(cmd, Duration::from_secs(90)))
        .await
        .unwrap();
    assert!(!run.success(), "{run}");
    assert!(run.stdout.contains("not listed"), "{run}");

    // Refused at the handshake: no certificate, another CA's, an expired one.
    assert!(initialize(&client(&files, None), &url, None).await.is_err());
    let stranger = TestCa::new("another CA");
    client_cert(&files, &stranger, "stranger", "mallory", false);
    assert!(initialize(&client(&files, Some("stranger")), &url, None)
        .await
        .is_err());
    client_cert(&files, &files.ca, "old", "alice", true);
    assert!(initialize(&client(&files, Some("old")), &url, None)
        .await
        .is_err());
    // alice's own certificate, for contrast.
    let resp = initialize(&client(&files, Some("alice")), &url, None)
        .await
        .expect("admitted");
    assert_eq!(resp.status(), 200);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beside_auth_either_credential_admits_and_both_are_audited() {
    let _suite = crate::suite::enter(module_path!());
    let files = Files::new("mtls-auth");
    let audit = files.dir.join("audit.jsonl");
    let servers = format!(
        "{}\n[auth]\n[[auth.api_keys]]\nname = \"ci-bot\"\nkey = \"key-of-ci-bot\"\n\n[audit]\npath = {:?}\n",
        test_server_toml("t", &[], None),
        path_str(&audit)
    );
    let gw = boot_gateway(&servers, &mtls_line(&files)).await;
    let url = gw.url();
    client_cert(&files, &files.ca, "alice", "alice", false);

    let neither = initialize(&client(&files, None), &url, None)
        .await
        .expect("handshake without a certificate");
    assert_eq!(neither.status(), 401, "no credential at all");
    let key_only = initialize(&client(&files, None), &url, Some("key-of-ci-bot"))
        .await
        .unwrap();
    assert_eq!(key_only.status(), 200);
    let cert_only = initialize(&client(&files, Some("alice")), &url, None)
        .await
        .unwrap();
    assert_eq!(cert_only.status(), 200);
    let wrong_key = initialize(&client(&files, Some("alice")), &url, Some("not-a-key"))
        .await
        .unwrap();
    assert_eq!(
        wrong_key.status(),
        401,
        "a bad bearer credential is refused, certificate or not"
    );

    // Both: a call audited with the key and the certificate.
    let both = client(&files, Some("alice"));
    let resp = initialize(&both, &url, Some("key-of-ci-bot")).await.unwrap();
    let session = resp.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t__echo","arguments":{"message":"both"}}}"#;
    let resp = (both.post(&url))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .bearer_auth("key-of-ci-bot")
        .body(call)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.text().await.unwrap().contains("both"));
    gw.stop().await;
    let lines = std::fs::read_to_string(&audit).unwrap_or_default();
    let call_line = (lines.lines())
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["method"] == "tools/call")
        .unwrap_or_else(|| panic!("no tools/call line in:\n{lines}"));
    assert_eq!(call_line["principal"]["api_key"], "ci-bot", "{call_line}");
    assert_eq!(
        call_line["principal"]["client_certificate"], "alice",
        "{call_line}"
    );
}

/// `mcpmux serve` as a replica on `port` with TLS and mutual TLS (its certificate `NAME.pem`,
/// also presented to the other replicas), the cluster key, and the test CA as the system's
/// trust store (`SSL_CERT_FILE`), as a private CA would be given to it.
fn tls_replica(files: &Files, name: &str, port: u16) -> ChildGuard {
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:{port}\"\nshutdown_delay_secs = 0\n{}\n\n{}\n[cluster]\nkey = {:?}\n",
        format_args!(
            "tls = {{ cert = {:?}, key = {:?}, client_ca = {:?} }}",
            files.path(&format!("{name}.pem")),
            files.path(&format!("{name}-key.pem")),
            files.path("ca.pem")
        ),
        test_server_toml("t", &[], None),
        "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=",
    );
    let path = files.write(&format!("{name}.toml"), &config);
    let mut serve = std::process::Command::new(env!("CARGO_BIN_EXE_mcpmux"));
    serve
        .args(["serve", "--config", &path_str(&path)])
        .env("SSL_CERT_FILE", files.dir.join("ca.pem"));
    let log = log_dir().join(format!("mtls-replica-{name}-{port}.log"));
    spawn_server(serve, port, &log, "mcpmux serve")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_forward_to_each_other_over_mutual_tls() {
    let _suite = crate::suite::enter(module_path!());
    let files = Files::new("mtls-replicas");
    for name in ["r1", "r2"] {
        let issued = files
            .ca
            .issue(Usage::ServerAndClient, name, &["127.0.0.1", "localhost"]);
        files.write(&format!("{name}.pem"), &issued.cert);
        files.write(&format!("{name}-key.pem"), &issued.key);
    }
    let (home_port, other_port) = (free_port(), free_port());
    let _home = tls_replica(&files, "r1", home_port);
    let _other = tls_replica(&files, "r2", other_port);
    client_cert(&files, &files.ca, "alice", "alice", false);
    let alice = client(&files, Some("alice"));
    let home = format!("https://127.0.0.1:{home_port}/mcp");
    let other = format!("https://127.0.0.1:{other_port}/mcp");

    let resp = initialize(&alice, &home, None).await.expect("initialize at home");
    assert_eq!(resp.status(), 200);
    let session = resp.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let resp = (alice.post(&other))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .body(list)
        .send()
        .await
        .expect("tools/list at the other replica");
    assert_eq!(resp.status(), 200);
    assert!(resp.text().await.unwrap().contains("t__echo"));
    // Served by the home replica through the other: the other holds no session.
    let status: serde_json::Value = serde_json::from_str(
        &(alice
            .get(format!("https://127.0.0.1:{other_port}/status"))
            .send()
            .await
            .unwrap())
        .text()
        .await
        .unwrap(),
    )
    .unwrap();
    assert_eq!(status["sessions"], 0, "forwarded, not taken over: {status}");
}
