use super::gcra::{bucket_key, Bucket};
use super::test_server::TestRedis;
use super::*;

fn bucket(owner: &str, rule: usize, requests: u64, period: Duration) -> Bucket {
    let limit = format!("{requests}/{}s", period.as_secs());
    Bucket {
        key: bucket_key(owner, rule, &limit),
        requests,
        period,
    }
}

/// How many of `tries` takes pass in a row.
async fn burst(store: &SharedStore, buckets: &[Bucket], tries: usize) -> usize {
    let mut passed = 0;
    for _ in 0..tries {
        match store.take(buckets).await.expect("the store answers") {
            None => passed += 1,
            Some(_) => break,
        }
    }
    passed
}

#[tokio::test]
async fn a_full_bucket_lets_exactly_n_through_across_clients_then_one_per_interval() {
    let redis = TestRedis::start();
    // Two clients: two replicas taking from one bucket.
    let (a, b) = (
        SharedStore::new(&redis.url()).unwrap(),
        SharedStore::new(&redis.url()).unwrap(),
    );
    let three_per_6s = [bucket("alice", 0, 3, Duration::from_secs(6))];
    assert_eq!(burst(&a, &three_per_6s, 2).await, 2);
    assert_eq!(
        burst(&b, &three_per_6s, 10).await,
        1,
        "b takes the third and last token"
    );
    let (which, wait) = a.take(&three_per_6s).await.unwrap().expect("refused");
    assert_eq!(which, 0);
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_secs(2),
        "{wait:?}"
    );
    // After the wait the server's clock gave back one token: one passes, the next is refused.
    tokio::time::sleep(wait).await;
    assert_eq!(burst(&b, &three_per_6s, 10).await, 1);
    assert_eq!(health_of(&a), Health::Up);

    // Seven per minute: the interval is no whole number of microseconds, still exactly seven.
    let seven = [bucket("alice", 1, 7, Duration::from_secs(60))];
    assert_eq!(burst(&a, &seven, 20).await, 7);
    // Another owner, or the same rule with another limit, is another bucket.
    assert_eq!(
        burst(&a, &[bucket("bob", 1, 7, Duration::from_secs(60))], 20).await,
        7
    );
    assert_eq!(
        burst(&a, &[bucket("alice", 1, 8, Duration::from_secs(60))], 20).await,
        8
    );

    // All or nothing: with one bucket empty, the others keep their tokens.
    let both = [
        bucket("carol", 0, 5, Duration::from_secs(60)),
        bucket("alice", 1, 7, Duration::from_secs(60)),
    ];
    let (which, _) = a.take(&both).await.unwrap().expect("alice's rule 1 is empty");
    assert_eq!(which, 1);
    assert_eq!(burst(&a, &both[..1], 20).await, 5, "carol's bucket was left full");

    // Keys name no principal, and expire within their period.
    let dump = redis.dump();
    assert!(!dump.contains("alice") && !dump.contains("carol"), "{dump}");
    for key in dump.lines().filter(|l| l.starts_with("mcpmux:")) {
        assert!(key.starts_with(gcra::KEY_PREFIX), "{key}");
    }
}

fn health_of(store: &SharedStore) -> Health {
    store.health()
}

#[tokio::test]
async fn a_store_down_is_an_error_naming_it_without_its_password_and_it_comes_back() {
    let mut redis = TestRedis::start();
    let port = redis.port;
    let store = SharedStore::new(&format!("redis://:pw-s3cret@127.0.0.1:{port}/0")).unwrap();
    assert_eq!(store.health(), Health::Unknown);
    // The server has no password set: AUTH with one is refused, and that is an error too.
    let refused = store.take(&[bucket("a", 0, 1, Duration::from_secs(60))]).await;
    let shown = refused.expect_err("AUTH refused").to_string();
    assert!(
        shown.starts_with(&format!("shared store redis://:***@127.0.0.1:{port}/0: ")),
        "{shown}"
    );
    assert!(!shown.contains("pw-s3cret"), "{shown}");

    let store = SharedStore::new(&redis.url()).unwrap();
    let one = [bucket("a", 0, 1, Duration::from_secs(60))];
    assert_eq!(store.take(&one).await.unwrap(), None);
    assert_eq!(store.health(), Health::Up);
    redis.kill();
    let ping = |what: &'static str| {
        store.run(what, |mut c| async move {
            redis::cmd("PING").query_async::<String>(&mut c).await
        })
    };
    let (result, transition) = ping("taking rate limit tokens").await;
    let err = result.expect_err("down").to_string();
    assert!(
        err.contains("shared store redis://127.0.0.1:") && err.contains("failed"),
        "{err}"
    );
    assert_eq!(transition, Transition::WentDown);
    assert_eq!(store.health(), Health::Down);
    // Until a probe is due, every operation fails at once without trying the store.
    let (again, transition) = ping("ping").await;
    assert!(again.expect_err("down").to_string().contains("it is down"));
    assert_eq!(transition, Transition::Same, "one outage, one transition");

    // Back where it was: a probe finds it (once one is due and the connection is made again).
    let _back = TestRedis::start_on(port);
    let mut came_back = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (result, transition) = ping("ping").await;
        if result.is_ok() {
            assert_eq!(transition, Transition::CameBack);
            came_back = true;
            break;
        }
    }
    assert!(came_back, "the store never answered again");
    assert_eq!(store.health(), Health::Up);
}

#[test]
fn hashed_keys_are_hex_sha256_of_length_prefixed_parts() {
    assert_eq!(hashed(&["a", "bc"]).len(), 64);
    assert_ne!(hashed(&["a", "bc"]), hashed(&["ab", "c"]));
    assert_eq!(bucket_key("o", 0, "3/min"), bucket_key("o", 0, "3/min"));
    assert_ne!(bucket_key("o", 0, "3/min"), bucket_key("o", 0, "4/min"));
    assert_ne!(bucket_key("o", 0, "3/min"), bucket_key("o", 1, "3/min"));
}
