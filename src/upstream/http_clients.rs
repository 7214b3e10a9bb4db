//! The HTTP clients toward upstream servers: reqwest for everything and the lean hyper client
//! for POSTs (none when a proxy variable is set: reqwest honours it). Every server without
//! `tls` shares one pair, made on first use; a server with `tls` gets its own pair (its CA, its
//! client certificate, the name to verify), made when its connection opens, so a rotated file is
//! read at the next connection. Both trust the bundled Mozilla roots and the system's store.

use crate::tls::client::{client_config, sni_name, ClientFiles};
use crate::util::http_client::{error_chain, LeanClient};
use std::ops::Deref;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
pub(super) const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The variables reqwest takes a proxy from; with any of them set, POSTs use reqwest too.
const PROXY_VARIABLES: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// reqwest, and the lean client when no proxy is configured.
pub(super) struct ClientPair {
    pub reqwest: reqwest::Client,
    pub lean: Option<LeanClient>,
}

/// The clients of one server: the shared pair, or its own.
#[derive(Clone)]
pub(super) enum Clients {
    Shared(&'static ClientPair),
    Own(Arc<ClientPair>),
}

impl Deref for Clients {
    type Target = ClientPair;

    fn deref(&self) -> &ClientPair {
        match self {
            Clients::Shared(pair) => pair,
            Clients::Own(pair) => pair,
        }
    }
}

impl Clients {
    /// The clients of a server with `tls` (its own) or without (the shared ones); an error when
    /// they cannot be set up (a file of `tls` that cannot be used, named with the reason).
    pub fn for_server(tls: Option<&ClientFiles>) -> Result<Clients, String> {
        match tls {
            None => shared().map(Clients::Shared),
            Some(files) => pair(Some(files)).map(|pair| Clients::Own(Arc::new(pair))),
        }
    }
}

/// The pair every server without `tls` uses, made on first use (the proxy variables and the
/// system's roots are read then).
fn shared() -> Result<&'static ClientPair, String> {
    static CLIENTS: OnceLock<Result<ClientPair, String>> = OnceLock::new();
    CLIENTS.get_or_init(|| pair(None)).as_ref().map_err(Clone::clone)
}

fn pair(tls: Option<&ClientFiles>) -> Result<ClientPair, String> {
    let config = client_config(tls).map_err(|problem| format!("tls: {problem}"))?;
    let mut for_reqwest = config.clone();
    for_reqwest.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let reqwest = reqwest::Client::builder()
        .use_preconfigured_tls(for_reqwest)
        .connect_timeout(CONNECT_TIMEOUT)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .redirect(same_origin_redirects())
        .build()
        .map_err(|e| format!("http client: {}", error_chain(&e)))?;
    let proxied = PROXY_VARIABLES
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|value| !value.is_empty()));
    let lean = match proxied {
        true => None,
        false => crate::util::http_client::lean_client_with(
            config,
            tls.and_then(sni_name),
            CONNECT_TIMEOUT,
            Some(POOL_IDLE_TIMEOUT),
        ),
    };
    Ok(ClientPair { reqwest, lean })
}

/// How many redirects one request may follow.
const MAX_REDIRECTS: usize = 5;

/// Follow a redirect only within the origin of the URL asked for (a server at `/mcp/` that
/// redirects to `/mcp`): every configured header (an API key in any header, not only
/// `Authorization`) would go along to another origin. Any other redirect is answered as it is,
/// and the opening says where it leads.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same_origin =
            (attempt.previous().first()).is_some_and(|first| first.origin() == attempt.url().origin());
        match (attempt.previous().len() > MAX_REDIRECTS, same_origin) {
            (true, _) => attempt.error(format!("more than {MAX_REDIRECTS} redirects")),
            (false, true) => attempt.follow(),
            (false, false) => attempt.stop(),
        }
    })
}
