//! Rate limits at admission: each JSON-RPC request a principal sends takes a token from the
//! bucket of every applying `[[policy]]` rule with a `rate_limit` (policy/rate_limit.rs), or is
//! refused with 429, `Retry-After` and a JSON-RPC error naming the limit.
//!
//! Where it is asked: by each host face right after it has parsed a POST body into messages, once
//! per request in it (streamable.rs for single requests and each request of a batch, both eras;
//! legacy_sse.rs for `/message`), and never for notifications, responses to server requests
//! (refusing an elicitation answer would break a call in flight), GET streams or DELETE. Not in a
//! tower layer: a layer sees bytes, and would have to buffer and parse every body a second time to
//! tell requests from notifications, count a batch and answer with the request's id. Not in
//! `methods::request` either, although both eras pass there: `initialize`, a modern retry with
//! `requestState`, `subscriptions/listen` and the legacy `/message` (answered 202 before its
//! request is served, so a 429 would come too late) do not, and a refusal there could no longer
//! set the HTTP status of a legacy POST. The faces are where a request is known as one and its
//! answer's status is still open.

use crate::auth::Principal;
use crate::config::RateLimit;
use crate::core::access::facts;
use crate::core::hub::Hub;
use crate::error::DownstreamError;
use crate::policy::rate_limit::Refusal;
use crate::shared_store::gcra::{bucket_key, Bucket};
use std::time::{Duration, Instant};

/// Admit one request of `who` (nobody without `[auth]`: then there is no policy) under the
/// policy in force, or the refusal to answer it with. With `[cluster] store`, the buckets are
/// the store's, shared by every replica; when the store fails, this replica's own buckets
/// decide at once (the store's client warns once per outage; each such decision is counted in
/// `mcpmux_shared_store_fallbacks_total{use="rate_limit"}`).
pub async fn admit(hub: &Hub, who: Option<&Principal>) -> Result<(), DownstreamError> {
    let Some(principal) = who else { return Ok(()) };
    let policy = hub.policy();
    if !policy.rules().iter().any(|rule| rule.rate_limit.is_some()) {
        return Ok(());
    }
    let limits = policy.for_principal(&facts(principal)).rate_limits();
    let owner = principal.owner();
    let shared = match &hub.shared_store {
        Some(store) if !limits.is_empty() => match store.take(&buckets(&owner, &limits)).await {
            Ok(None) => Some(Ok(())),
            Ok(Some((at, retry_after))) => {
                let (rule, limit) = limits[at.min(limits.len() - 1)];
                Some(Err(Refusal::Limited {
                    rule,
                    limit,
                    retry_after,
                }))
            }
            Err(_) => {
                crate::telemetry::record::shared_store_fallback("rate_limit");
                None
            }
        },
        _ => None,
    };
    let verdict = match shared {
        Some(verdict) => verdict,
        None => hub.rate_limits.admit(&owner, &limits, Instant::now()),
    };
    match verdict {
        Ok(()) => Ok(()),
        Err(Refusal::Limited {
            rule,
            limit,
            retry_after,
        }) => {
            tracing::debug!(principal = %principal.name, rule, %limit, "rate limited");
            crate::telemetry::record::refused(crate::telemetry::Refusal::RateLimit);
            Err(DownstreamError::RateLimited {
                rule,
                limit,
                retry_after_secs: whole_seconds(retry_after),
            })
        }
        Err(Refusal::Full { retry_after }) => {
            tracing::warn!("the rate limiter tracks as many principals as it may; refusing a new one");
            crate::telemetry::record::refused(crate::telemetry::Refusal::RateLimit);
            Err(DownstreamError::RateLimiterFull {
                retry_after_secs: whole_seconds(retry_after),
            })
        }
    }
}

/// The store's buckets of `owner` for `limits` (rule index and limit): one per rule and limit,
/// so a rule whose limit changed starts afresh.
fn buckets(owner: &str, limits: &[(usize, RateLimit)]) -> Vec<Bucket> {
    (limits.iter())
        .map(|&(rule, limit)| Bucket {
            key: bucket_key(owner, rule, &limit.to_string()),
            requests: u64::from(limit.requests.get()),
            period: limit.per.duration(),
        })
        .collect()
}

/// `Retry-After` in whole seconds: rounded up, at least 1.
pub fn whole_seconds(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::sync::Arc;
    use tokio_util::sync::CancellationToken;

    const KEYS: &str = "[auth]\n[[auth.api_keys]]\nname = \"a\"\nkey = \"ka\"\ngroups = [\"eng\"]\n\
                        [[auth.api_keys]]\nname = \"b\"\nkey = \"kb\"\n";

    fn config(rules: &str) -> Config {
        let text = format!("{KEYS}\n{rules}");
        Config::from_toml_str(&text, "t.toml", &|_| None).expect("a valid config")
    }

    fn principal(name: &str, groups: &[&str]) -> Principal {
        Principal {
            name: name.into(),
            issuer: None,
            client_id: None,
            groups: groups.iter().map(|g| g.to_string()).collect(),
            scopes: Vec::new(),
            token: None,
            claims: Vec::new(),
            credential: crate::auth::Credential::ApiKey,
            certificate: None,
        }
    }

    /// How many requests of `who` pass in a row (bounded).
    fn passes(hub: &Hub, who: &Principal) -> usize {
        (0..100)
            .take_while(|_| now(admit(hub, Some(who))).is_ok())
            .count()
    }

    /// An admission without a store never waits: run it to its end here.
    fn now<T>(future: impl std::future::Future<Output = T>) -> T {
        futures_util::FutureExt::now_or_never(future).expect("no store: nothing to wait for")
    }

    #[test]
    fn each_principal_has_the_limits_of_its_applying_rules() {
        let rules = "[[policy]]\nallow = [\"*\"]\nrate_limit = \"3/min\"\n\
                     [[policy]]\ngroups = [\"eng\"]\nallow = [\"*\"]\nrate_limit = \"2/hour\"\n";
        let (hub, _inputs) = Hub::new(Arc::new(config(rules)), CancellationToken::new(), None);
        let (a, b) = (principal("a", &["eng"]), principal("b", &[]));
        assert_eq!(
            passes(&hub, &a),
            2,
            "both rules apply to a; 2/hour is the tighter"
        );
        match now(admit(&hub, Some(&a))) {
            Err(DownstreamError::RateLimited {
                rule,
                limit,
                retry_after_secs,
            }) => {
                assert_eq!(
                    (rule, limit.to_string(), retry_after_secs),
                    (1, "2/hour".into(), 1800)
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            passes(&hub, &b),
            3,
            "b is not affected by a, and only 3/min applies"
        );
        assert!(now(admit(&hub, None)).is_ok(), "no principal, no limit");
    }

    #[test]
    fn a_replaced_policy_resets_only_the_buckets_whose_limit_changed() {
        let rules = |first: &str| {
            format!(
                "[[policy]]\nallow = [\"*\"]\nrate_limit = \"{first}\"\n\
                 [[policy]]\nprincipals = [\"b\"]\nallow = [\"*\"]\nrate_limit = \"1/hour\"\n"
            )
        };
        let (hub, _inputs) = Hub::new(Arc::new(config(&rules("1/min"))), CancellationToken::new(), None);
        let (a, b) = (principal("a", &[]), principal("b", &[]));
        assert_eq!(passes(&hub, &a), 1);
        assert_eq!(passes(&hub, &b), 1, "b has buckets of its own");
        // Unchanged: a stays refused.
        hub.replace_config(Arc::new(config(&rules("1/min"))));
        assert_eq!(passes(&hub, &a), 0);
        // Rule 0 now says 2/min: its buckets start afresh; b's 1/hour bucket keeps its state.
        hub.replace_config(Arc::new(config(&rules("2/min"))));
        assert_eq!(passes(&hub, &a), 2);
        assert!(matches!(
            now(admit(&hub, Some(&b))),
            Err(DownstreamError::RateLimited { rule: 1, .. })
        ));
    }

    /// `rules` with `[cluster] store = url`.
    fn stored(rules: &str, url: &str) -> Config {
        let cluster =
            format!("[cluster]\nkey = \"AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\"\nstore = \"{url}\"\n");
        config(&format!("{cluster}{rules}"))
    }

    async fn passes_async(hub: &Hub, who: &Principal) -> usize {
        let mut n = 0;
        while n < 100 && admit(hub, Some(who)).await.is_ok() {
            n += 1;
        }
        n
    }

    #[tokio::test]
    async fn with_a_store_replicas_take_from_one_bucket_and_without_it_each_counts_alone() {
        let rules = "[[policy]]\nallow = [\"*\"]\nrate_limit = \"3/min\"\n";
        let redis = crate::shared_store::test_server::TestRedis::start();
        let replica = || {
            Hub::new(
                Arc::new(stored(rules, &redis.url())),
                CancellationToken::new(),
                None,
            )
            .0
        };
        let (one, two) = (replica(), replica());
        let a = principal("a", &[]);
        assert_eq!(passes_async(&one, &a).await, 3);
        match admit(&two, Some(&a)).await {
            Err(DownstreamError::RateLimited { rule: 0, limit, .. }) => {
                assert_eq!(limit.to_string(), "3/min")
            }
            other => panic!("the other replica's bucket is the same one: {other:?}"),
        }

        // A store that is not there: each replica's own buckets decide.
        let gone = format!("redis://127.0.0.1:{}/0", closed_port());
        let alone = Hub::new(Arc::new(stored(rules, &gone)), CancellationToken::new(), None).0;
        assert_eq!(passes_async(&alone, &a).await, 3);
        let store = alone.shared_store.as_ref().expect("a store is configured");
        assert_eq!(store.health(), crate::shared_store::Health::Down);
    }

    /// A port nothing listens on.
    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        listener.local_addr().expect("its address").port()
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up_and_never_zero() {
        assert_eq!(whole_seconds(Duration::ZERO), 1);
        assert_eq!(whole_seconds(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds(Duration::from_secs(20)), 20);
        assert_eq!(whole_seconds(Duration::from_nanos(8_571_428_572)), 9);
    }
}
