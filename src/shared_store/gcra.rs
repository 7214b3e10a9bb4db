//! Rate limit buckets kept in the shared store, so every replica takes from the same ones: the
//! GCRA of policy/rate_limit.rs in one Lua script, run atomically by the server on the server's
//! clock (`TIME`), so the replicas' clocks do not matter.
//!
//! A bucket is one key, `mcpmux:rl:<hex SHA-256 of owner, rule and limit>` (no principal name in
//! clear; a rule whose limit changed names other keys, so it starts afresh), holding the
//! theoretical arrival time in microseconds, and expiring when the bucket is full again (at most
//! one period). A request takes one token from every bucket it needs, or from none.
//!
//! The arithmetic is whole microseconds: the interval between tokens is period/N rounded down,
//! and a bucket has a token when it is short by at most period - ⌈period/N⌉. So a full bucket
//! lets exactly N through at once (N·⌊period/N⌋ > period - ⌈period/N⌉ whenever the interval
//! is at least N µs: "1000/s" and anything slower), then one per interval.

use super::{SharedStore, StoreError};
use std::time::Duration;

/// Where every bucket key starts.
pub const KEY_PREFIX: &str = "mcpmux:rl:";

/// One bucket a request needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// The key (see [`bucket_key`]).
    pub key: String,
    /// Tokens per period (N).
    pub requests: u64,
    pub period: Duration,
}

/// The key of the bucket of principal `owner` for rule `rule` whose limit reads `limit`.
pub fn bucket_key(owner: &str, rule: usize, limit: &str) -> String {
    format!(
        "{KEY_PREFIX}{}",
        super::hashed(&[owner, &rule.to_string(), limit])
    )
}

/// KEYS: the buckets; ARGV: for each, its period in µs then N. Returns {1} when every bucket had
/// a token (one taken from each), else {0, the 1-based bucket with the longest wait, the wait
/// in µs} and takes nothing.
const SCRIPT: &str = r#"
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tats = {}
local worst, worst_wait = 0, 0
for i, key in ipairs(KEYS) do
  local period = tonumber(ARGV[2 * i - 1])
  local n = tonumber(ARGV[2 * i])
  local step = math.floor(period / n)
  local allowed = period - math.ceil(period / n)
  local tat = tonumber(redis.call('GET', key) or '0') or 0
  if tat < now then tat = now end
  local wait = (tat - now) - allowed
  if wait > 0 and wait > worst_wait then
    worst, worst_wait = i, wait
  end
  tats[i] = tat + step
end
if worst > 0 then
  return {0, worst, worst_wait}
end
for i, key in ipairs(KEYS) do
  local ttl = tats[i] - now
  if ttl < 1 then ttl = 1 end
  redis.call('SET', key, string.format('%.0f', tats[i]), 'PX', math.ceil(ttl / 1000))
end
return {1}
"#;

impl SharedStore {
    /// Take one token from each of `buckets` if every one has one: `Ok(None)`. Otherwise take
    /// none: `Ok(Some((index of the bucket with the longest wait, the wait)))`.
    pub async fn take(&self, buckets: &[Bucket]) -> Result<Option<(usize, Duration)>, StoreError> {
        if buckets.is_empty() {
            return Ok(None);
        }
        let script = redis::Script::new(SCRIPT);
        let mut invocation = script.prepare_invoke();
        for bucket in buckets {
            let period = u64::try_from(bucket.period.as_micros()).unwrap_or(u64::MAX);
            invocation
                .key(&bucket.key)
                .arg(period.max(1))
                .arg(bucket.requests.max(1));
        }
        let answer: Vec<i64> = self
            .call("taking rate limit tokens", |mut connection| async move {
                invocation.invoke_async(&mut connection).await
            })
            .await?;
        match answer.as_slice() {
            [1] => Ok(None),
            [0, which, wait] => {
                let index = usize::try_from(*which - 1).unwrap_or(0).min(buckets.len() - 1);
                let wait = Duration::from_micros(u64::try_from(*wait).unwrap_or(1).max(1));
                Ok(Some((index, wait)))
            }
            other => Err(self.error(
                "taking rate limit tokens",
                format!("the script answered {other:?}"),
            )),
        }
    }
}
