//! Tests of `[gateway]` parsing (`config::gateway`): addresses, the endpoint path and
//! separator, and the readiness rule, each refused at its line.

use super::tests::{err, parse};
use super::{GatewayConfig, ReadyWhen};
use std::net::SocketAddr;

#[test]
fn bad_listen_and_admin_listen() {
    for (key, listen) in ["localhost:8080", "127.0.0.1", "nonsense"]
        .map(|l| ("listen", l))
        .into_iter()
        .chain([("admin_listen", "localhost:9090"), ("admin_listen", "")])
    {
        let e = err(&format!("[gateway]\n{key} = \"{listen}\"\n"));
        assert!(
            e.starts_with("config.toml:2:") && e.contains(&format!("gateway.{key}: ")),
            "{e}"
        );
    }
    // Unset by default (the operator endpoints stay on `listen`); an address when given.
    assert_eq!(GatewayConfig::default().admin_listen, None);
    let c = parse("[gateway]\nadmin_listen = \"127.0.0.1:9090\"\n").unwrap();
    assert_eq!(
        c.gateway.admin_listen,
        Some(SocketAddr::from(([127, 0, 0, 1], 9090)))
    );
}

#[test]
fn bad_path_and_separator() {
    for path in ["mcp", "/mcp/", "", "/a b", "/mcp?x"] {
        let e = err(&format!("[gateway]\npath = \"{path}\"\n"));
        assert!(
            e.starts_with("config.toml:2:") && e.contains("gateway.path"),
            "{e}"
        );
    }
    assert_eq!(
        parse("[gateway]\npath = \"/a/b\"\n").unwrap().gateway.path,
        "/a/b"
    );
    let e = err("[gateway]\nseparator = \"\"\n");
    assert!(e.contains("separator"), "{e}");
}

#[test]
fn ready_when_values() {
    assert_eq!(parse("").unwrap().gateway.ready_when, ReadyWhen::All);
    for (text, rule) in [
        ("all", ReadyWhen::All),
        ("any", ReadyWhen::Any),
        ("attempted", ReadyWhen::Attempted),
    ] {
        let config = parse(&format!("[gateway]\nready_when = {text:?}\n")).unwrap();
        assert_eq!(config.gateway.ready_when, rule);
    }
    let e = err("[gateway]\nready_when = \"most\"\n");
    assert!(
        e.contains("config.toml:2:") && e.contains("gateway.ready_when \"most\""),
        "{e}"
    );
}
