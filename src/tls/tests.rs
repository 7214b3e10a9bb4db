use super::files::{certificates, identity, roots};
use super::identity::certificate_subject;
#[cfg(unix)]
use super::test_certs;
use super::test_certs::{TestCa, Usage};
use super::*;
use rustls::pki_types::{pem::PemObject, CertificateDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn server_files(dir: &Path, ca: &TestCa) -> ServerFiles {
    let issued = ca.issue(Usage::Server, "gateway", &["localhost"]);
    ServerFiles {
        cert: write(dir, "server.pem", &issued.cert),
        key: write(dir, "server-key.pem", &issued.key),
        client_ca: None,
    }
}

const OPTIONS: ServerOptions = ServerOptions {
    http2: true,
    client_cert_optional: false,
};

#[test]
fn a_good_chain_and_key_make_a_server_configuration_offering_h2_and_http1() {
    let dir = tempdir();
    let files = server_files(dir.path(), &TestCa::new("ca"));
    let config = server::server_config(&files, OPTIONS).unwrap();
    assert_eq!(config.alpn_protocols, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
    let http1 = ServerOptions {
        http2: false,
        ..OPTIONS
    };
    let config = server::server_config(&files, http1).unwrap();
    assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
}

#[test]
fn each_unusable_file_names_itself_and_the_reason() {
    let dir = tempdir();
    let ca = TestCa::new("ca");
    let files = server_files(dir.path(), &ca);
    let missing = dir.path().join("nope.pem");
    let problem = certificates(&missing, FileRole::Cert, true).unwrap_err();
    assert_eq!(
        (problem.role, problem.path.clone()),
        (FileRole::Cert, missing.clone())
    );
    assert_eq!(
        problem.to_string(),
        format!("{}: does not exist", missing.display())
    );

    let garbage = write(dir.path(), "garbage.pem", "hello\n");
    let problem = certificates(&garbage, FileRole::Cert, true).unwrap_err();
    assert!(problem.reason.contains("no PEM certificate"), "{problem}");
    let problem = identity(&files.cert, &garbage).unwrap_err();
    assert_eq!(problem.role, FileRole::Key);
    assert!(problem.reason.contains("no PEM private key"), "{problem}");

    let other = ca.issue(Usage::Server, "other", &["localhost"]);
    let other_key = write(dir.path(), "other-key.pem", &other.key);
    let problem = identity(&files.cert, &other_key).unwrap_err();
    assert_eq!(problem.path, other_key);
    assert!(
        problem.reason.contains("does not match the certificate"),
        "{problem}"
    );

    let expired = ca.issue_expired(Usage::Server, "old", &["localhost"]);
    let expired_cert = write(dir.path(), "expired.pem", &expired.cert);
    let expired_key = write(dir.path(), "expired-key.pem", &expired.key);
    let problem = identity(&expired_cert, &expired_key).unwrap_err();
    assert_eq!(problem.path, expired_cert);
    assert!(problem.reason.contains("expired on"), "{problem}");

    let problem = roots(&garbage, FileRole::ClientCa).unwrap_err();
    assert_eq!(problem.role, FileRole::ClientCa);
    let with_bad_ca = ServerFiles {
        client_ca: Some(garbage.clone()),
        ..files
    };
    let problem = server::server_config(&with_bad_ca, OPTIONS).unwrap_err();
    assert_eq!((problem.role, problem.path), (FileRole::ClientCa, garbage));
}

fn leaf_der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

#[test]
fn a_client_certificate_names_its_holder_by_cn_else_first_dns_name() {
    let ca = TestCa::new("ca");
    let both = ca.issue(Usage::Client, "alice", &["alice.example", "b.example"]);
    assert_eq!(
        certificate_subject(&leaf_der(&both.cert)).as_deref(),
        Some("alice")
    );
    let dns_only = ca.issue(Usage::Client, "", &["bot.example", "b.example"]);
    assert_eq!(
        certificate_subject(&leaf_der(&dns_only.cert)).as_deref(),
        Some("bot.example")
    );
    let forged = ca.issue(Usage::Client, "eve\nlevel=INFO", &[]);
    assert_eq!(certificate_subject(&leaf_der(&forged.cert)), None);
    let nameless = ca.issue(Usage::Client, "", &[]);
    assert_eq!(certificate_subject(&leaf_der(&nameless.cert)), None);
}

/// The leaf certificate a client trusting `ca` is served by `tls` in a real handshake.
async fn served_leaf(tls: &ServerTls, ca: &TestCa) -> CertificateDer<'static> {
    let mut trusted = rustls::RootCertStore::empty();
    trusted.add(leaf_der(&ca.pem())).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(trusted)
        .with_no_client_auth();
    let (near, far) = tokio::io::duplex(64 * 1024);
    let acceptor = tls.acceptor();
    let server = tokio::spawn(async move { acceptor.accept(far).await.map(drop) });
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let stream = tokio_rustls::TlsConnector::from(Arc::new(client))
        .connect(name, near)
        .await
        .unwrap();
    server.await.unwrap().unwrap();
    stream.get_ref().1.peer_certificates().unwrap()[0].clone()
}

#[tokio::test]
async fn changed_files_serve_the_next_connection_and_a_bad_change_keeps_the_old_certificate() {
    let dir = tempdir();
    let ca = TestCa::new("ca");
    let files = server_files(dir.path(), &ca);
    let first = std::fs::read_to_string(&files.cert).unwrap();
    let tls = ServerTls::load(files.clone(), OPTIONS).unwrap();
    assert!(tls.reload_if_changed().is_none(), "nothing changed yet");
    assert_eq!(served_leaf(&tls, &ca).await, leaf_der(&first));

    // A rotation: both files rewritten in place.
    let second = ca.issue(Usage::Server, "gateway-2", &["localhost"]);
    std::fs::write(&files.cert, &second.cert).unwrap();
    std::fs::write(&files.key, &second.key).unwrap();
    assert_eq!(tls.reload_if_changed(), Some(Ok(())));
    assert_eq!(served_leaf(&tls, &ca).await, leaf_der(&second.cert));

    // A certificate whose key has not been written yet: refused, the second one served still.
    let third = ca.issue(Usage::Server, "gateway-3", &["localhost"]);
    std::fs::write(&files.cert, &third.cert).unwrap();
    let problem = tls.reload_if_changed().unwrap().unwrap_err();
    assert_eq!(problem.path, files.key);
    assert_eq!(served_leaf(&tls, &ca).await, leaf_der(&second.cert));
    assert!(
        tls.reload_if_changed().is_none(),
        "a refused change is not read again unchanged"
    );
    std::fs::write(&files.key, &third.key).unwrap();
    assert_eq!(tls.reload_if_changed(), Some(Ok(())));
    assert_eq!(served_leaf(&tls, &ca).await, leaf_der(&third.cert));
}

#[cfg(unix)]
#[tokio::test]
async fn a_kubernetes_style_link_swap_is_seen() {
    // A Secret volume: tls.crt -> ..data/tls.crt, ..data -> ..2026_01 (a directory); a new
    // version is a new directory and ..data swapped to it, the files' own names unchanged.
    use std::os::unix::fs::symlink;
    let dir = tempdir();
    let ca = TestCa::new("ca");
    let version = |name: &str, issued: &test_certs::Issued| {
        let v = dir.path().join(name);
        std::fs::create_dir(&v).unwrap();
        write(&v, "tls.crt", &issued.cert);
        write(&v, "tls.key", &issued.key);
    };
    let first = ca.issue(Usage::Server, "one", &["localhost"]);
    version("..2026_01", &first);
    symlink("..2026_01", dir.path().join("..data")).unwrap();
    symlink("..data/tls.crt", dir.path().join("tls.crt")).unwrap();
    symlink("..data/tls.key", dir.path().join("tls.key")).unwrap();
    let files = ServerFiles {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("tls.key"),
        client_ca: None,
    };
    let tls = ServerTls::load(files, OPTIONS).unwrap();
    assert_eq!(served_leaf(&tls, &ca).await, leaf_der(&first.cert));

    let second = ca.issue(Usage::Server, "two", &["localhost"]);
    version("..2026_02", &second);
    symlink("..2026_02", dir.path().join("..data_tmp")).unwrap();
    std::fs::rename(dir.path().join("..data_tmp"), dir.path().join("..data")).unwrap();
    assert_eq!(tls.reload_if_changed(), Some(Ok(())));
    assert_eq!(served_leaf(&tls, &ca).await, leaf_der(&second.cert));
}

fn tempdir() -> TempDir {
    TempDir::new()
}

/// A directory of its own under the system's temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let unique = format!("mcpmux-tls-{}-{}", std::process::id(), rand::random::<u64>());
        let path = std::env::temp_dir().join(unique);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_replica_presents_its_own_certificate_only_where_client_certificates_are_required() {
    let dir = tempdir();
    let ca = TestCa::new("ca");
    let replica = ca.issue(Usage::ServerAndClient, "r1", &["127.0.0.1"]);
    let files = ServerFiles {
        cert: write(dir.path(), "r1.pem", &replica.cert),
        key: write(dir.path(), "r1-key.pem", &replica.key),
        client_ca: None,
    };
    let plain = client::replica_client_config(Some(&files)).unwrap();
    assert!(!plain.client_auth_cert_resolver.has_certs());
    let mutual = ServerFiles {
        client_ca: Some(write(dir.path(), "ca.pem", &ca.pem())),
        ..files
    };
    let config = client::replica_client_config(Some(&mutual)).unwrap();
    assert!(config.client_auth_cert_resolver.has_certs());
}
