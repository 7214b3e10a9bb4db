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

#[test]
fn an_address_in_use_says_so_and_suggests_a_free_port() {
    use super::gateway::bind_hint;
    let in_use = std::io::Error::from(std::io::ErrorKind::AddrInUse);
    let at = |text: &str| -> SocketAddr { text.parse().expect("an address") };
    assert_eq!(
        bind_hint(at("127.0.0.1:8080"), "listen", &in_use, Some(40123)),
        ": another program (or another mcpmux) holds that address (127.0.0.1:8080 is where mcpmux \
         listens when the file sets no gateway.listen); give it another port in the configuration \
         file, e.g. [gateway] listen = \"127.0.0.1:40123\" (free just now)"
    );
    assert_eq!(
        bind_hint(at("127.0.0.1:9090"), "admin_listen", &in_use, None),
        ": another program (or another mcpmux) holds that address; give it another port in the \
         configuration file: [gateway] admin_listen = \"IP:PORT\""
    );
    let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
    assert_eq!(bind_hint(at("127.0.0.1:80"), "listen", &denied, Some(1)), "");
}

#[test]
fn name_length_and_reserve_have_bounds_and_must_leave_room() {
    let defaults = parse("").unwrap().gateway;
    assert_eq!(
        (
            defaults.max_name_length,
            defaults.name_reserve,
            defaults.name_budget()
        ),
        (64, 0, 64)
    );
    let set = parse("[gateway]\nmax_name_length = 128\nname_reserve = 24\n")
        .unwrap()
        .gateway;
    assert_eq!(
        (set.max_name_length, set.name_reserve, set.name_budget()),
        (128, 24, 104)
    );
    for n in [0, 15, 257] {
        let e = err(&format!("[gateway]\nmax_name_length = {n}\n"));
        assert!(
            e.starts_with("config.toml:2:") && e.contains("gateway.max_name_length"),
            "{e}"
        );
        assert!(e.contains("between 16 and 256"), "{e}");
    }
    let e = err("[gateway]\nname_reserve = 49\n");
    assert!(e.starts_with("config.toml:2:"), "{e}");
    for word in [
        "gateway.name_reserve 49",
        "gateway.max_name_length 64",
        "at least 16",
    ] {
        assert!(e.contains(word), "{e} lacks {word}");
    }
    assert_eq!(
        parse("[gateway]\nname_reserve = 48\n")
            .unwrap()
            .gateway
            .name_budget(),
        16
    );
    let e = err("[gateway]\nmax_name_length = 32\nname_reserve = 20\n");
    assert!(e.starts_with("config.toml:3:") && e.contains("leaves 12"), "{e}");
}
