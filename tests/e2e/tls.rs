//! TLS on the listeners (`[gateway] tls`): the Python SDK as a host over HTTPS, by HTTP/1.1 and
//! by HTTP/2 (ALPN), curl over HTTP/2 with and without TLS, a certificate rotated under a
//! running gateway (the next connection gets it; an open session goes on; a bad file keeps the
//! old one), and files that cannot be used refused by `check-config` and `serve` with the file
//! and the reason.

use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "../../src/tls/test_certs.rs"]
#[allow(dead_code)]
pub(crate) mod test_certs;

use test_certs::{Issued, TestCa, Usage};

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"tls","version":"0"}}}"#;

/// A scratch folder holding the CA's certificate (`ca.pem`) and a server certificate for
/// 127.0.0.1 and localhost (`server.pem`, `server-key.pem`).
pub(crate) struct Files {
    pub(crate) dir: PathBuf,
    pub(crate) ca: TestCa,
}

impl Files {
    pub(crate) fn new(tag: &str) -> Files {
        let files = Files {
            dir: scratch_dir(tag),
            ca: TestCa::new("mcpmux test CA"),
        };
        files.write("ca.pem", &files.ca.pem());
        let server = files.server_cert("gateway");
        files.put_server(&server);
        files
    }

    fn server_cert(&self, name: &str) -> Issued {
        self.ca.issue(Usage::Server, name, &["127.0.0.1", "localhost"])
    }

    fn put_server(&self, issued: &Issued) {
        self.write("server.pem", &issued.cert);
        self.write("server-key.pem", &issued.key);
    }

    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    pub(crate) fn path(&self, name: &str) -> String {
        path_str(&self.dir.join(name))
    }

    /// The `[gateway]` line serving `server.pem`.
    fn tls_line(&self) -> String {
        format!(
            "tls = {{ cert = {:?}, key = {:?} }}",
            self.path("server.pem"),
            self.path("server-key.pem")
        )
    }
}

async fn gateway(extra: &str) -> mcpmux::Gateway {
    boot_gateway(&test_server_toml("t", &[], None), extra).await
}

/// The Python SDK's `smoke` scenario (list tools, call `t__echo`) with these environment
/// variables (see `tls_client` in py_client.py); its observations.
pub(crate) async fn python_smoke(url: &str, env: &[(&str, String)]) -> Value {
    let mut cmd = Command::new(&peers().python);
    cmd.arg(repo_root().join("tests/clients/py_client.py"))
        .args([url, "smoke", "--prefix", "t__"]);
    for (key, value) in env {
        cmd.env(key, value);
    }
    let run = tokio::task::spawn_blocking(move || run_client(cmd, Duration::from_secs(90)))
        .await
        .expect("client ran");
    run.assert_ok();
    let line = run.stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {run}"))
}

/// `curl` POSTing `initialize` to `url` with these options: the HTTP version it used.
async fn curl_version(url: &str, options: &[&str]) -> String {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-o", "/dev/null", "-w", "%{http_version}", "-X", "POST"])
        .args(["-H", "content-type: application/json"])
        .args(["-H", "accept: application/json, text/event-stream"])
        .args(["-d", INIT])
        .args(options)
        .arg(url);
    let run = tokio::task::spawn_blocking(move || run_client(cmd, Duration::from_secs(30)))
        .await
        .expect("curl ran");
    assert!(run.status.success(), "{run}");
    run.stdout.trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_works_over_https_by_http1_and_http2_and_curl_speaks_h2_with_and_without_tls() {
    let _suite = crate::suite::enter(module_path!());
    let files = Files::new("tls-hosts");
    let gw = gateway(&files.tls_line()).await;
    let url = gw.url();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let ca = ("MCPMUX_TEST_CA", files.path("ca.pem"));

    let over_http1 = python_smoke(&url, std::slice::from_ref(&ca)).await;
    assert_eq!(
        over_http1["echo_text"].as_str().map(|t| t.contains("hi")),
        Some(true),
        "{over_http1}"
    );
    assert_eq!(
        over_http1["http_versions"],
        serde_json::json!(["HTTP/1.1"]),
        "{over_http1}"
    );
    let over_http2 = python_smoke(&url, &[ca.clone(), ("MCPMUX_TEST_HTTP2", "1".into())]).await;
    assert_eq!(
        over_http2["http_versions"],
        serde_json::json!(["HTTP/2"]),
        "{over_http2}"
    );

    let cacert = files.path("ca.pem");
    assert_eq!(curl_version(&url, &["--http2", "--cacert", &cacert]).await, "2");
    assert_eq!(
        curl_version(&url, &["--http1.1", "--cacert", &cacert]).await,
        "1.1"
    );
    gw.stop().await;

    // Plain TCP: HTTP/2 with prior knowledge (h2c), as a balancer that speaks it would.
    let plain = gateway("").await;
    assert_eq!(
        curl_version(&plain.url(), &["--http2-prior-knowledge"]).await,
        "2"
    );
    plain.stop().await;
}

/// The leaf certificate a new TLS connection to `addr` is served (trusting `ca`).
async fn served_certificate(addr: std::net::SocketAddr, ca: &TestCa) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(ca.pem().as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("handshake");
    stream.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

fn der_of(pem: &str) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

/// A reqwest client trusting only the test CA.
fn https_client(files: &Files) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(files.ca.pem().as_bytes()).unwrap();
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(ca)
        .build()
        .unwrap()
}

async fn post(client: &reqwest::Client, url: &str, session: Option<&str>, body: &str) -> reqwest::Response {
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18");
    if let Some(session) = session {
        req = req.header("mcp-session-id", session);
    }
    req.body(body.to_string()).send().await.expect("POST")
}

/// Wait (at most 10 s: the files are looked at every 2 s) until a new connection is served `want`.
async fn until_served(gw: &mcpmux::Gateway, ca: &TestCa, want: &[u8]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while served_certificate(gw.local_addr(), ca).await != want {
        assert!(
            Instant::now() < deadline,
            "the rotated certificate was never served"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_certificate_is_served_on_the_next_connection_while_an_open_session_goes_on() {
    let _suite = crate::suite::enter(module_path!());
    let files = Files::new("tls-rotate");
    let first = std::fs::read_to_string(files.dir.join("server.pem")).unwrap();
    let gw = gateway(&files.tls_line()).await;
    let url = gw.url();
    assert_eq!(
        served_certificate(gw.local_addr(), &files.ca).await,
        der_of(&first)
    );

    let client = https_client(&files);
    let resp = post(&client, &url, None, INIT).await;
    assert_eq!(resp.status(), 200);
    let session = resp.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let resp = post(
        &client,
        &url,
        Some(&session),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!(resp.status(), 202);
    // The session's GET stream stays open across the rotation.
    let stream = (client.get(&url))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .expect("GET stream");
    assert_eq!(stream.status(), 200);

    // cert-manager writes the new pair.
    let second = files.server_cert("gateway-rotated");
    files.put_server(&second);
    until_served(&gw, &files.ca, &der_of(&second.cert)).await;
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let resp = post(&client, &url, Some(&session), list).await;
    assert_eq!(resp.status(), 200, "the open session goes on");
    assert!(resp.text().await.unwrap().contains("t__echo"));
    let resp = post(&https_client(&files), &url, Some(&session), list).await;
    assert_eq!(resp.status(), 200, "and from a new connection too");

    // A broken file: the rotated certificate stays in force.
    files.write(
        "server.pem",
        "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
    );
    tokio::time::sleep(Duration::from_millis(4500)).await;
    assert_eq!(
        served_certificate(gw.local_addr(), &files.ca).await,
        der_of(&second.cert)
    );
    drop(stream);
    gw.stop().await;
}

fn mcpmux(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpmux"));
    cmd.args(args);
    cmd
}

/// A configuration file in `files.dir` whose `[gateway] tls` names `cert` and `key` relative to it.
fn config_file(files: &Files, cert: &str, key: &str) -> PathBuf {
    let port = free_port();
    let text = format!(
        "[gateway]\nlisten = \"127.0.0.1:{port}\"\ntls = {{ cert = {cert:?}, key = {key:?} }}\n\n{}",
        test_server_toml("t", &[], None)
    );
    files.write("mcpmux.toml", &text)
}

fn check_config(config: &Path) -> ClientRun {
    run_client(
        mcpmux(&["check-config", "--config", &path_str(config)]),
        Duration::from_secs(20),
    )
}

#[test]
fn files_that_cannot_be_used_are_refused_by_check_config_and_serve_with_the_file_and_the_reason() {
    let _suite = crate::suite::enter(module_path!());
    let files = Files::new("tls-refused");
    std::fs::create_dir_all(files.dir.join("certs")).unwrap();
    let good = files.server_cert("gateway");
    files.write("certs/server.pem", &good.cert);
    files.write("certs/server-key.pem", &good.key);
    // Relative paths follow the configuration file.
    let config = config_file(&files, "certs/server.pem", "certs/server-key.pem");
    let run = check_config(&config);
    assert!(run.status.success(), "{run}");

    let config = config_file(&files, "certs/server.pem", "certs/missing-key.pem");
    let run = check_config(&config);
    assert!(!run.status.success(), "{run}");
    let missing = files.dir.join("certs/missing-key.pem");
    assert!(run.stderr.contains("mcpmux.toml:3"), "the key's line: {run}");
    assert!(
        run.stderr
            .contains(&format!("gateway.tls.key: {}: does not exist", missing.display())),
        "{run}"
    );

    let other = files.server_cert("other");
    files.write("certs/other-key.pem", &other.key);
    let run = check_config(&config_file(&files, "certs/server.pem", "certs/other-key.pem"));
    assert!(!run.status.success(), "{run}");
    assert!(
        run.stderr
            .contains("other-key.pem: the key does not match the certificate in"),
        "{run}"
    );

    let expired = files.ca.issue_expired(Usage::Server, "old", &["127.0.0.1"]);
    files.write("certs/expired.pem", &expired.cert);
    files.write("certs/expired-key.pem", &expired.key);
    let config = config_file(&files, "certs/expired.pem", "certs/expired-key.pem");
    let run = check_config(&config);
    assert!(!run.status.success(), "{run}");
    assert!(run.stderr.contains("gateway.tls.cert:"), "{run}");
    assert!(
        run.stderr.contains("expired.pem: the certificate expired on"),
        "{run}"
    );

    // serve refuses to start (never plain HTTP instead), saying the same.
    let run = run_client(
        mcpmux(&["serve", "--config", &path_str(&config)]),
        Duration::from_secs(20),
    );
    assert!(!run.status.success() && !run.timed_out, "{run}");
    assert!(
        run.stderr.contains("expired.pem: the certificate expired on"),
        "{run}"
    );
}

#[test]
fn status_and_reload_reach_a_tls_gateway_by_its_configuration_file() {
    let _suite = crate::suite::enter(module_path!());
    let files = Files::new("tls-operator");
    let config = config_file(&files, "server.pem", "server-key.pem");
    let config = path_str(&config);
    let mut serve = mcpmux(&["serve", "--config", &config]);
    serve
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _gateway = ChildGuard::spawn_group(&mut serve).expect("spawn mcpmux serve");
    // `status --config` speaks HTTPS to it, trusting the certificate its file names.
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        let run = run_client(mcpmux(&["status", "--config", &config]), Duration::from_secs(20));
        if run.status.success() || Instant::now() > deadline {
            break run;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(status.status.success(), "{status}");
    assert!(status.stdout.contains('t'), "{status}");
    let reload = run_client(mcpmux(&["reload", "--config", &config]), Duration::from_secs(60));
    assert!(reload.status.success(), "{reload}");
    // By --url alone, nothing says to trust the test CA: refused, not trusted blindly.
    let url = format!("https://{}/status", config_listen(&files));
    let run = run_client(mcpmux(&["status", "--url", &url]), Duration::from_secs(20));
    assert!(!run.status.success(), "{run}");
    assert!(run.stderr.to_lowercase().contains("certificate"), "{run}");
}

/// The `listen` address of the configuration file `config_file` wrote last.
fn config_listen(files: &Files) -> String {
    let text = std::fs::read_to_string(files.dir.join("mcpmux.toml")).unwrap();
    let line = text.lines().find(|l| l.starts_with("listen")).unwrap();
    line.split('"').nth(1).unwrap().to_string()
}

/// The base64 SHA-256 of a certificate's public key (SubjectPublicKeyInfo): what chromium's
/// `--ignore-certificate-errors-spki-list` accepts, for that one certificate.
fn spki_hash(pem: &str) -> String {
    use base64::Engine as _;
    use x509_parser::prelude::FromDer;
    let der = der_of(pem);
    let (_, cert) = x509_parser::certificate::X509Certificate::from_der(&der).expect("a certificate");
    let digest = ring::digest::digest(&ring::digest::SHA256, cert.tbs_certificate.subject_pki.raw);
    base64::engine::general_purpose::STANDARD.encode(digest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_host_opens_eight_get_streams_at_once_over_http2() {
    let _suite = crate::suite::enter(module_path!());
    crate::support::browser::chromium();
    let files = Files::new("tls-browser");
    let gw = gateway(&files.tls_line()).await;
    let admin = format!("https://{}/admin", gw.local_addr());
    let spki = spki_hash(&std::fs::read_to_string(files.dir.join("server.pem")).unwrap());
    let mut cmd = Command::new("node");
    cmd.arg(repo_root().join("tests/clients/h2_streams.mjs"))
        .args([admin.as_str(), gw.url().as_str(), "8", spki.as_str()])
        .env("MCPMUX_PLAYWRIGHT", &peers().playwright_core_pkg);
    let run = tokio::task::spawn_blocking(move || run_client(cmd, Duration::from_secs(120)))
        .await
        .unwrap();
    assert!(run.status.success(), "{run}");
    let seen: Value = serde_json::from_str(run.stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {run}"));
    assert_eq!(seen["streams"], 8, "every GET stream open at once: {seen}");
    assert!(seen["tools"].as_u64() > Some(0), "a call beside them: {seen}");
    assert_eq!(
        seen["protocols"],
        serde_json::json!(["h2"]),
        "all over HTTP/2: {seen}"
    );
    gw.stop().await;
}
