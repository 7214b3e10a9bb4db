//! The `[cluster]` table: the key every replica seals with (`key`), the keys still opened during
//! a rotation (`previous_keys`), and how the other replicas reach this one (`advertise`).
//! Keys are base64 of 32 random bytes (`mcpmux keygen`); a bad one is refused at its line and
//! never echoed.

use super::spanned::Spanned;
use super::{ConfigError, Ctx};
use crate::seal::ClusterKey;
use crate::util::secret_url::SecretUrl;
use schemars::JsonSchema;
use serde::Deserialize;
use std::net::SocketAddr;
use std::time::Duration;

/// `gateway.shutdown_delay_secs` when `[cluster]` is set and the key is not: how long a stopping
/// replica keeps serving everything while `/readyz` answers 503, so the balancer in front stops
/// sending it requests before it refuses any. A health-checking balancer needs `fall` failed
/// checks `inter` apart, plus one check's round trip, to mark a replica down: 1 s with checks every
/// 500 ms and fall 2, 2 s with `deploy/balancers/haproxy.cfg` (1 s, fall 2); Kubernetes needs a
/// few seconds to take a terminating pod's endpoint out of its Services and ingresses. Five
/// seconds covers those with room for a loaded machine; serving longer costs only time at stop,
/// never a call. Slower checks (HAProxy's own defaults, 2 s and fall 3: 6 s) need the key set
/// above `fall × inter`.
pub const DEFAULT_SHUTDOWN_DELAY: Duration = Duration::from_secs(5);

/// `[cluster]`: several replicas serving as one.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCluster {
    /// The key every replica seals with: base64 of 32 bytes (`mcpmux keygen`), the same on
    /// every replica (write "${VAR}").
    key: Spanned<String>,
    /// Keys still accepted when opening during a rotation, never used to seal.
    previous_keys: Option<Vec<Spanned<String>>>,
    /// The URL the other replicas reach this one at. Default "http://{gateway.listen}".
    pub(super) advertise: Option<Spanned<String>>,
    /// The Redis or Valkey server the replicas share grants and rate limits through:
    /// "redis://[:password@]host:port/db" or "redis+unix:///path.sock" (write "${VAR}" for a
    /// password). Unset: each replica keeps its own grants (the vault file) and counts its own
    /// rate limits.
    store: Option<Spanned<String>>,
}

/// `[cluster]` (its keys print as `***` in Debug).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// Seals everything this replica hands out; the same on every replica.
    pub key: ClusterKey,
    /// Still accepted when opening, never used to seal.
    pub previous_keys: Vec<ClusterKey>,
    /// The URL the other replicas reach this one at; default `http://{gateway.listen}`
    /// (`https://` with `gateway.tls`).
    pub advertise: String,
    /// `store`: the shared Redis/Valkey server (its password never shows).
    pub store: Option<SecretUrl>,
}

pub(super) fn build_cluster(
    ctx: &Ctx<'_>,
    raw: &RawCluster,
    listen: SocketAddr,
    tls: bool,
) -> Result<ClusterConfig, ConfigError> {
    let key = cluster_key(ctx, &raw.key, "cluster.key")?;
    let mut previous_keys = Vec::new();
    for (i, value) in raw.previous_keys.iter().flatten().enumerate() {
        previous_keys.push(cluster_key(ctx, value, &format!("cluster.previous_keys[{i}]"))?);
    }
    let advertise = match &raw.advertise {
        Some(v) => {
            let url = ctx.expand(v, "cluster.advertise")?;
            if !super::auth::http_url(&url) {
                let msg = format!("cluster.advertise {url:?} must be an http:// or https:// URL with a host");
                return Err(ctx.invalid(&v.span(), msg));
            }
            url
        }
        None => format!("{}://{listen}", super::scheme(tls)),
    };
    let store = match &raw.store {
        Some(v) => {
            let url = ctx.expand(v, "cluster.store")?;
            let url = SecretUrl::new(url);
            if let Err(why) = store_url(url.expose()) {
                let msg = format!("cluster.store {}: {why}", url.redacted());
                return Err(ctx.invalid(&v.span(), msg));
            }
            Some(url)
        }
        None => None,
    };
    Ok(ClusterConfig {
        key,
        previous_keys,
        advertise,
        store,
    })
}

/// Whether `url` names a store mcpmux can reach: `redis://host[:port][/db]`, or a Unix socket
/// (`redis+unix://` or `unix://` and a path). TLS (`rediss://`) is not built in.
fn store_url(url: &str) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("is not a URL ({e})"))?;
    match parsed.scheme() {
        "redis" | "valkey" if parsed.host_str().is_some_and(|h| !h.is_empty()) => Ok(()),
        "redis" | "valkey" => Err("must name a host: redis://host:6379/0".into()),
        "redis+unix" | "valkey+unix" | "unix" if !parsed.path().is_empty() && parsed.path() != "/" => Ok(()),
        "redis+unix" | "valkey+unix" | "unix" => {
            Err("must name the socket's path: redis+unix:///run/redis.sock".into())
        }
        "rediss" | "valkeys" => Err(
            "TLS to the store is not built into mcpmux: use redis:// on a private network \
             (or a local TLS tunnel such as stunnel)"
                .into(),
        ),
        other => Err(format!(
            "has scheme {other:?}: the store must be a redis://host:port/db or redis+unix:///path URL"
        )),
    }
}

/// One key, or an error at its line that names the key but never shows its value.
pub(super) fn cluster_key(
    ctx: &Ctx<'_>,
    value: &Spanned<String>,
    name: &str,
) -> Result<ClusterKey, ConfigError> {
    let text = ctx.expand(value, name)?;
    ClusterKey::parse(&text).map_err(|why| ctx.invalid(&value.span(), format!("{name} {why}")))
}

#[cfg(test)]
mod tests {
    use crate::seal::ClusterKey;

    use super::super::key_fixtures::{parse, KEY_A, KEY_B};

    #[test]
    fn the_cluster_table_as_the_issue_writes_it() {
        let config = parse(&format!(
            "[gateway]\nlisten = \"127.0.0.1:8080\"\n[cluster]\nkey = \"${{MCPMUX_CLUSTER_KEY}}\"\n\
             previous_keys = [\"{KEY_B}\"]\nadvertise = \"http://10.1.2.3:8080\"\n"
        ))
        .unwrap();
        let cluster = config.cluster.unwrap();
        assert_eq!(cluster.key, ClusterKey::parse(KEY_A).unwrap());
        assert_eq!(cluster.previous_keys, vec![ClusterKey::parse(KEY_B).unwrap()]);
        assert_eq!(cluster.advertise, "http://10.1.2.3:8080");
        let shown = format!("{cluster:?}");
        assert!(!shown.contains(KEY_A) && !shown.contains(KEY_B), "{shown}");
        assert!(parse("").unwrap().cluster.is_none());
    }

    #[test]
    fn replicas_keep_serving_on_stop_until_a_balancer_has_seen_readyz_flip() {
        use std::time::Duration;
        let delay = |text: &str| parse(text).unwrap().gateway.shutdown_delay;
        let cluster = format!("[cluster]\nkey = \"{KEY_A}\"\n");
        assert_eq!(delay(&cluster), super::DEFAULT_SHUTDOWN_DELAY);
        assert!(super::DEFAULT_SHUTDOWN_DELAY >= Duration::from_secs(5));
        // Alone (nothing balancing in front), and whatever the operator wrote, stand.
        assert_eq!(delay(""), Duration::ZERO);
        for secs in [0, 2, 30] {
            let text = format!("[gateway]\nshutdown_delay_secs = {secs}\n{cluster}");
            assert_eq!(delay(&text), Duration::from_secs(secs), "{text}");
        }
    }

    #[test]
    fn advertise_defaults_from_listen() {
        let config = parse(&format!(
            "[gateway]\nlisten = \"127.0.0.1:9001\"\n[cluster]\nkey = \"{KEY_A}\"\n"
        ))
        .unwrap();
        let cluster = config.cluster.unwrap();
        assert_eq!(cluster.advertise, "http://127.0.0.1:9001");
        assert!(cluster.previous_keys.is_empty());
    }

    #[test]
    fn a_bad_key_is_refused_at_its_line_without_echoing_it() {
        let err = parse("[cluster]\nkey = \"${BAD_KEY}\"\n").unwrap_err();
        assert!(err.starts_with("t.toml:2: cluster.key is not base64"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
        let short = "AQEBAQEBAQEBAQEBAQEBAQ==";
        let err = parse(&format!(
            "[cluster]\nkey = \"{KEY_A}\"\nprevious_keys = [\n  \"{short}\"]\n"
        ))
        .unwrap_err();
        assert!(
            err.starts_with("t.toml:4: cluster.previous_keys[0] is base64 of 16 bytes"),
            "{err}"
        );
        assert!(!err.contains(short), "{err}");
        let err = parse("[cluster]\nadvertise = \"http://a:1\"\n").unwrap_err();
        assert!(err.contains("missing field `key`"), "{err}");
        let err = parse("[cluster]\nkey = \"${UNSET_KEY}\"\n").unwrap_err();
        assert!(err.contains("UNSET_KEY") && err.contains("cluster.key"), "{err}");
        let err = parse(&format!("[cluster]\nkey = \"{KEY_A}\"\nsecret = 1\n")).unwrap_err();
        assert!(err.contains("unknown key `secret`"), "{err}");
    }

    #[test]
    fn advertise_must_be_an_http_url() {
        for bad in ["10.1.2.3:8080", "ftp://a/", "http://"] {
            let err = parse(&format!("[cluster]\nkey = \"{KEY_A}\"\nadvertise = \"{bad}\"\n")).unwrap_err();
            assert!(err.starts_with("t.toml:3: cluster.advertise"), "{bad}: {err}");
        }
        let https = parse(&format!(
            "[cluster]\nkey = \"{KEY_A}\"\nadvertise = \"https://r1.internal\"\n"
        ));
        assert_eq!(https.unwrap().cluster.unwrap().advertise, "https://r1.internal");
    }

    #[test]
    fn store_is_a_redis_url_whose_password_never_shows() {
        let with = |store: &str| parse(&format!("[cluster]\nkey = \"{KEY_A}\"\nstore = \"{store}\"\n"));
        for good in [
            "redis://127.0.0.1:6379/0",
            "redis://:pw-s3cret@cache.internal:6380/2",
            "valkey://cache:6379",
            "redis+unix:///run/redis.sock?db=1&pass=pw-s3cret",
            "unix:///run/redis.sock",
        ] {
            let cluster = with(good).unwrap().cluster.unwrap();
            let store = cluster.store.as_ref().unwrap();
            assert_eq!(store.expose(), good);
            let shown = format!("{cluster:?}");
            assert!(!shown.contains("pw-s3cret"), "{shown}");
        }
        assert_eq!(
            parse(&format!("[cluster]\nkey = \"{KEY_A}\"\n"))
                .unwrap()
                .cluster
                .unwrap()
                .store,
            None
        );
        for (bad, why) in [
            ("http://cache:6379", "has scheme \"http\""),
            (
                "rediss://:pw-s3cret@cache:6380/0",
                "TLS to the store is not built into mcpmux",
            ),
            ("redis://", "must name a host"),
            ("redis+unix://", "must name the socket's path"),
            ("127.0.0.1:6379", "is not a URL"),
        ] {
            let err = with(bad).unwrap_err();
            assert!(err.starts_with("t.toml:3: cluster.store"), "{bad}: {err}");
            assert!(err.contains(why), "{bad}: {err}");
            assert!(!err.contains("pw-s3cret"), "{err}");
        }
        let err = with("${UNSET_STORE}").unwrap_err();
        assert!(
            err.contains("UNSET_STORE") && err.contains("cluster.store"),
            "{err}"
        );
    }
}
