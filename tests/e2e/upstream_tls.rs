//! TLS toward upstreams (`[servers.NAME] tls`): a real HTTPS server (the Python SDK under
//! uvicorn) behind the test CA is reached with `ca`, with mutual TLS (`cert`, `key`), and by a
//! name other than the URL's host (`server_name`); a wrong CA, an expired certificate and a name
//! mismatch are refused, and `/status` says why.

use crate::support::*;
use crate::tls::test_certs::{Issued, Usage};
use crate::tls::Files;
use serde_json::Value;
use std::time::{Duration, Instant};

/// The Python SDK server on HTTPS with `server` (and requiring client certificates from the
/// files' CA when `mtls`).
fn https_upstream(files: &Files, server: &Issued, tag: &str, mtls: bool) -> (ChildGuard, u16) {
    let port = free_port();
    let cert = files.write(&format!("{tag}.pem"), &server.cert);
    let key = files.write(&format!("{tag}-key.pem"), &server.key);
    let mut cmd = std::process::Command::new(&peers().python);
    cmd.arg(repo_root().join("tests/fixtures/py_tls_server.py"))
        .arg(port.to_string())
        .arg(&cert)
        .arg(&key);
    if mtls {
        cmd.arg(files.dir.join("ca.pem"));
    }
    let log = log_dir().join(format!("py-tls-{tag}-{port}.log"));
    (spawn_server(cmd, port, &log, "py_tls_server.py"), port)
}

/// `[servers.NAME]` at the HTTPS upstream on `port` with this `tls` table.
fn server_toml(name: &str, port: u16, tls: &str) -> String {
    format!("[servers.{name}]\nurl = \"https://127.0.0.1:{port}/mcp\"\ntls = {tls}\n\n")
}

/// `/status` once every upstream is ready or has a `last_error`.
async fn settled_status(gw: &mcpmux::Gateway) -> Value {
    let url = format!("http://{}/status", gw.local_addr());
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        let text = reqwest::get(&url)
            .await
            .expect("GET /status")
            .text()
            .await
            .expect("a body");
        let doc: Value = serde_json::from_str(&text).expect("JSON");
        let upstreams = doc["upstreams"].as_array().cloned().unwrap_or_default();
        if upstreams
            .iter()
            .all(|u| u["phase"] == "ready" || u["last_error"].is_string())
        {
            return doc;
        }
        assert!(Instant::now() < deadline, "did not settle: {doc}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn upstream<'a>(doc: &'a Value, name: &str) -> &'a Value {
    (doc["upstreams"].as_array().into_iter().flatten())
        .find(|u| u["name"] == name)
        .unwrap_or_else(|| panic!("no upstream {name}: {doc}"))
}

fn last_error(doc: &Value, name: &str) -> String {
    let up = upstream(doc, name);
    assert_ne!(up["phase"], "ready", "{name} should be refused: {doc}");
    up["last_error"].as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_upstream_behind_a_private_ca_is_reached_with_its_ca_client_certificate_and_name() {
    let _suite = crate::suite::enter(module_path!());
    let files = Files::new("upstream-tls");
    let ca = files.path("ca.pem");
    let plain = files.ca.issue(Usage::Server, "py", &["127.0.0.1", "localhost"]);
    let (_plain, plain_port) = https_upstream(&files, &plain, "plain", false);
    let (_mutual, mutual_port) = https_upstream(&files, &plain, "mutual", true);
    let internal = files.ca.issue(Usage::Server, "internal", &["mcp.internal"]);
    let (_named, named_port) = https_upstream(&files, &internal, "named", false);
    let client = files.ca.issue(Usage::Client, "mcpmux", &[]);
    files.write("gw-client.pem", &client.cert);
    files.write("gw-client-key.pem", &client.key);

    let servers = [
        server_toml("py", plain_port, &format!("{{ ca = {ca:?} }}")),
        server_toml(
            "mutual",
            mutual_port,
            &format!(
                "{{ ca = {ca:?}, cert = {:?}, key = {:?} }}",
                files.path("gw-client.pem"),
                files.path("gw-client-key.pem")
            ),
        ),
        server_toml(
            "named",
            named_port,
            &format!("{{ ca = {ca:?}, server_name = \"mcp.internal\" }}"),
        ),
    ]
    .concat();
    let gw = boot_gateway(&servers, "").await;
    let doc = settled_status(&gw).await;
    for name in ["py", "mutual", "named"] {
        assert_eq!(upstream(&doc, name)["phase"], "ready", "{name}: {doc}");
    }
    // A real host calls through: the Python SDK, to each.
    for prefix in ["py__", "mutual__", "named__"] {
        let mut cmd = std::process::Command::new(&peers().python);
        cmd.arg(repo_root().join("tests/clients/py_client.py")).args([
            gw.url().as_str(),
            "smoke",
            "--prefix",
            prefix,
        ]);
        let run = tokio::task::spawn_blocking(move || run_client(cmd, Duration::from_secs(90)))
            .await
            .unwrap();
        run.assert_ok();
        assert!(run.stdout.contains("echo: hi"), "{prefix}: {run}");
    }
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_an_expired_certificate_a_name_mismatch_and_a_missing_client_certificate_say_why() {
    let _suite = crate::suite::enter(module_path!());
    let files = Files::new("upstream-tls-refused");
    let ca = files.path("ca.pem");
    let good = files.ca.issue(Usage::Server, "py", &["127.0.0.1", "localhost"]);
    let (_good, good_port) = https_upstream(&files, &good, "good", false);
    let old = files.ca.issue_expired(Usage::Server, "old", &["127.0.0.1"]);
    let (_old, old_port) = https_upstream(&files, &old, "old", false);
    let (_mutual, mutual_port) = https_upstream(&files, &good, "mutual", true);
    let other = crate::tls::test_certs::TestCa::new("another CA");
    files.write("other-ca.pem", &other.pem());
    let servers = [
        server_toml(
            "wrongca",
            good_port,
            &format!("{{ ca = {:?} }}", files.path("other-ca.pem")),
        ),
        server_toml("expired", old_port, &format!("{{ ca = {ca:?} }}")),
        server_toml(
            "misnamed",
            good_port,
            &format!("{{ ca = {ca:?}, server_name = \"mcp.internal\" }}"),
        ),
        server_toml("nocert", mutual_port, &format!("{{ ca = {ca:?} }}")),
    ]
    .concat();
    let gw = boot_gateway(&servers, "").await;
    let doc = settled_status(&gw).await;
    let wrong_ca = last_error(&doc, "wrongca");
    assert!(wrong_ca.contains("unknown issuer"), "{wrong_ca}");
    assert!(
        wrong_ca.contains(&files.path("other-ca.pem")),
        "the file it trusted: {wrong_ca}"
    );
    let expired = last_error(&doc, "expired");
    assert!(expired.contains("expired"), "{expired}");
    let misnamed = last_error(&doc, "misnamed");
    assert!(misnamed.contains("not valid for the name"), "{misnamed}");
    // Without the client certificate it wants, the server (OpenSSL under asyncio) closes the
    // connection after the TLS 1.3 handshake (reset, or closed without an alert): refused all
    // the same, never served.
    let no_cert = last_error(&doc, "nocert").to_lowercase();
    assert!(
        no_cert.contains("certificate") || no_cert.contains("connection"),
        "{no_cert}"
    );
    gw.stop().await;
}
