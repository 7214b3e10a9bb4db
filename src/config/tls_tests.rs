use super::*;

fn parse(text: &str) -> Result<Config, String> {
    Config::from_toml_str(text, "t.toml", &|_| None).map_err(|e| e.to_string())
}

const HTTPS: &str = "[servers.corp]\nurl = \"https://mcp.corp.example/mcp\"\n";

#[test]
fn an_upstream_tls_table_is_read_with_its_four_keys() {
    let config = parse(&format!(
        "{HTTPS}tls = {{ ca = \"/etc/ca.pem\", cert = \"/etc/c.pem\", key = \"/etc/k.pem\", server_name = \"mcp.internal\" }}\n"
    ))
    .unwrap();
    let TransportConfig::Http { tls: Some(tls), .. } = &config.servers[0].transport else {
        panic!("no tls");
    };
    assert_eq!(tls.ca.as_deref(), Some(std::path::Path::new("/etc/ca.pem")));
    assert_eq!(tls.server_name.as_deref(), Some("mcp.internal"));
}

#[test]
fn no_key_turns_verification_off_and_one_that_looks_like_it_says_so() {
    for key in [
        "insecure",
        "insecure_skip_verify",
        "skip_verify",
        "verify",
        "danger_accept_invalid_certs",
    ] {
        let err = parse(&format!("{HTTPS}tls = {{ {key} = true }}\n")).unwrap_err();
        assert!(
            err.contains("no switch to skip certificate verification"),
            "{key}: {err}"
        );
        assert!(err.contains(&format!("servers.corp.tls.{key}")), "{err}");
    }
    let err = parse(&format!("{HTTPS}tls = {{ cafile = \"x\" }}\n")).unwrap_err();
    assert!(err.contains("unknown key") && err.contains("`ca`"), "{err}");
}

#[test]
fn upstream_tls_is_refused_where_it_cannot_apply() {
    let err =
        parse("[servers.plain]\nurl = \"http://127.0.0.1:9/mcp\"\ntls = { ca = \"ca.pem\" }\n").unwrap_err();
    assert!(err.contains("https://"), "{err}");
    let err = parse("[servers.local]\ncommand = \"sh\"\ntls = { ca = \"ca.pem\" }\n").unwrap_err();
    assert!(err.contains("`tls` is only valid for `url` servers"), "{err}");
    let err = parse(&format!("{HTTPS}tls = {{ cert = \"c.pem\" }}\n")).unwrap_err();
    assert!(
        err.contains("servers.corp.tls.cert needs servers.corp.tls.key"),
        "{err}"
    );
    let err = parse(&format!("{HTTPS}tls = {{ server_name = \"not a name!\" }}\n")).unwrap_err();
    assert!(err.contains("not a DNS name"), "{err}");
}

#[test]
fn gateway_tls_needs_cert_and_key_and_makes_the_default_public_url_https() {
    let config = parse("[gateway]\ntls = { cert = \"/s.pem\", key = \"/k.pem\" }\n").unwrap();
    assert_eq!(config.gateway.public_url, "https://127.0.0.1:8080/mcp");
    let err = parse("[gateway]\ntls = { cert = \"/s.pem\" }\n").unwrap_err();
    assert!(err.contains("key"), "{err}");
    // client_ca alone counts as authentication: [[policy]] without [auth] is accepted.
    let text = "[gateway]\ntls = { cert = \"/s.pem\", key = \"/k.pem\", client_ca = \"/ca.pem\" }\n\
                [[policy]]\nprincipals = [\"cert:alice\"]\nallow = [\"*\"]\n";
    assert!(parse(text).is_ok());
    let err = parse("[[policy]]\nprincipals = [\"cert:alice\"]\nallow = [\"*\"]\n").unwrap_err();
    assert!(err.contains("needs [auth] or gateway.tls.client_ca"), "{err}");
}
