//! The `call` and `list` modes: K concurrent sessions, each initialize → W + N sequential requests
//! (`tools/call` with a unique argument and id, or `tools/list` walking every page) → DELETE.

use crate::client::{Endpoint, Session};
use crate::stats::{self, Tally};
use crate::Opts;
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::task::JoinSet;

/// Request ids are `session × ID_STRIDE + call`, so no two requests of a run share an id.
const ID_STRIDE: u64 = 1_000_000_000;
/// Most pages one `tools/list` may walk before it counts as a loop.
const MAX_PAGES: usize = 10_000;

/// What each request of a session is.
#[derive(Clone)]
pub enum Work {
    /// `tools/call` of `tool`; `unique` names the string argument made unique per call ("" for none).
    Call {
        tool: String,
        template: Map<String, Value>,
        unique: String,
        check_echo: bool,
    },
    /// `tools/list`, every page; `expect` is the number of tools each list must have.
    List { expect: Option<usize> },
}

/// What one session did.
struct SessionOutcome {
    tally: Tally,
    /// When its first measured request started and its last one ended.
    span: Option<(Instant, Instant)>,
    /// Tools and pages in the last list (list mode).
    listed: Option<(usize, usize)>,
}

impl Work {
    pub fn from_opts(opts: &Opts, list: bool) -> Result<Self, String> {
        if list {
            return Ok(Work::List {
                expect: opts.expect_tools,
            });
        }
        let template = match serde_json::from_str::<Value>(&opts.args) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err("--args must be a JSON object".into()),
            Err(e) => return Err(format!("--args is not JSON: {e}")),
        };
        Ok(Work::Call {
            tool: opts.tool.clone(),
            template,
            unique: opts.unique_arg.clone(),
            check_echo: opts.check == crate::Check::Echo && !opts.unique_arg.is_empty(),
        })
    }

    /// One request; returns when the response had been read, and (list mode) tools and pages.
    async fn run(
        &self,
        session: &Session,
        s: usize,
        i: usize,
    ) -> Result<(Instant, Option<(usize, usize)>), String> {
        let id = s as u64 * ID_STRIDE + i as u64 + 1;
        match self {
            Work::Call {
                tool,
                template,
                unique,
                check_echo,
            } => {
                let (args, token) = unique_args(template, unique, s, i);
                let params = json!({"name": tool, "arguments": args});
                let reply = session.request(id, "tools/call", &params).await?;
                check_result(&reply.msg, check_echo.then_some(token.as_str()))?;
                Ok((reply.at, None))
            }
            Work::List { expect } => {
                let (tools, pages, at) = list_tools(session, id).await?;
                match expect {
                    Some(n) if *n != tools => Err(format!("tools/list gave {tools} tools, not {n}")),
                    _ => Ok((at, Some((tools, pages)))),
                }
            }
        }
    }
}

/// The arguments for call `i` of session `s`, and the unique text the echo must carry.
fn unique_args(template: &Map<String, Value>, key: &str, s: usize, i: usize) -> (Value, String) {
    let mut args = template.clone();
    if key.is_empty() {
        return (Value::Object(args), String::new());
    }
    let base = args.get(key).and_then(Value::as_str).unwrap_or_default();
    let token = format!("{base}-s{s}-c{i}");
    args.insert(key.to_string(), Value::String(token.clone()));
    (Value::Object(args), token)
}

/// A tool result that is not an error and, when `echo` is given, has a text block ending with it
/// (`Echo: <message>`).
fn check_result(msg: &Value, echo: Option<&str>) -> Result<(), String> {
    let result = msg.get("result").ok_or("reply without result")?;
    if result.get("isError") == Some(&Value::Bool(true)) {
        return Err(format!("tool error: {}", truncate(&result.to_string())));
    }
    let Some(token) = echo else {
        return Ok(());
    };
    let blocks = result.get("content").and_then(Value::as_array);
    let echoed = blocks.is_some_and(|blocks| {
        blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .any(|t| t.ends_with(token))
    });
    if echoed {
        Ok(())
    } else {
        Err(format!(
            "reply does not echo {token:?}: {}",
            truncate(&result.to_string())
        ))
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(200).collect()
}

/// Walk every page of `tools/list`: (tools, pages, when the last page had been read).
async fn list_tools(session: &Session, id: u64) -> Result<(usize, usize, Instant), String> {
    let mut params = json!({});
    let mut tools = 0;
    for page in 1..=MAX_PAGES {
        // Pages after the first reuse the id range of later calls: offset into the upper half.
        let page_id = id + (page as u64 - 1) * (ID_STRIDE / 2);
        let reply = session.request(page_id, "tools/list", &params).await?;
        let result = reply.msg.get("result").ok_or("tools/list without result")?;
        tools += result
            .get("tools")
            .and_then(Value::as_array)
            .ok_or("tools/list result without a tools array")?
            .len();
        match result.get("nextCursor") {
            Some(Value::String(cursor)) => params = json!({"cursor": cursor}),
            None | Some(Value::Null) => return Ok((tools, page, reply.at)),
            Some(other) => return Err(format!("nextCursor is not a string: {other}")),
        }
    }
    Err(format!("tools/list did not end within {MAX_PAGES} pages"))
}

async fn run_session(
    endpoint: Endpoint,
    work: Work,
    s: usize,
    warmup: usize,
    calls: usize,
    wait: Duration,
) -> SessionOutcome {
    let mut out = SessionOutcome {
        tally: Tally::default(),
        span: None,
        listed: None,
    };
    let session = match endpoint.open_when_up("mcpmux-bench", wait).await {
        Ok(session) => session,
        Err(e) => {
            out.tally.error(format!("session {s}: {e}"));
            return out;
        }
    };
    let mut first = None;
    for i in 0..warmup + calls {
        let measured = i >= warmup;
        let t0 = Instant::now();
        if measured && first.is_none() {
            first = Some(t0);
        }
        match work.run(&session, s, i).await {
            Ok((at, listed)) => {
                if measured {
                    out.tally.samples.push(at - t0);
                }
                out.listed = listed.or(out.listed);
            }
            Err(e) => out.tally.error(format!("session {s} call {i}: {e}")),
        }
    }
    out.span = first.map(|f| (f, Instant::now()));
    if let Err(e) = session.close().await {
        out.tally.error(format!("session {s}: {e}"));
    }
    out
}

/// Wait until `tools/list` has `expect` tools: the milliseconds since `started_at_ns` (Unix time
/// of the server's launch), or an error after `wait`.
async fn startup(
    endpoint: &Endpoint,
    expect: usize,
    started_at_ns: u128,
    wait: Duration,
) -> Result<f64, String> {
    let deadline = Instant::now() + wait;
    let session = endpoint.open_when_up("mcpmux-bench-startup", wait).await?;
    let mut last = 0;
    for id in 1.. {
        match list_tools(&session, id * ID_STRIDE / 4).await {
            Ok((n, _, _)) if n >= expect => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_err(|e| format!("clock before 1970: {e}"))?
                    .as_nanos();
                let _ = session.close().await;
                return Ok(now.saturating_sub(started_at_ns) as f64 / 1e6);
            }
            Ok((n, _, _)) => last = n,
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => {}
        }
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ = session.close().await;
    Err(format!("only {last} of {expect} tools after {wait:?}"))
}

/// Run the mode and return its JSON report and table rows.
pub async fn run(opts: &Opts, endpoint: Endpoint, list: bool) -> Result<(Map<String, Value>, Tally), String> {
    let work = Work::from_opts(opts, list)?;
    let wait = Duration::from_secs(opts.wait_secs);
    let mut report = Map::new();
    if let (true, Some(expect), Some(t0)) = (list, opts.expect_tools, opts.started_at_ns) {
        let ms = startup(&endpoint, expect, t0, wait).await?;
        report.insert("startup_ms".into(), stats::num(ms));
    }
    let mut tasks = JoinSet::new();
    for s in 0..opts.sessions {
        let (endpoint, work) = (endpoint.clone(), work.clone());
        tasks.spawn(run_session(endpoint, work, s, opts.warmup, opts.calls, wait));
    }
    let mut tally = Tally::default();
    let mut span: Option<(Instant, Instant)> = None;
    let mut listed = None;
    while let Some(joined) = tasks.join_next().await {
        let outcome = joined.map_err(|e| format!("a session task failed: {e}"))?;
        tally.merge(outcome.tally);
        listed = outcome.listed.or(listed);
        span = match (span, outcome.span) {
            (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
            (x, y) => x.or(y),
        };
    }
    let wall = span.map_or(Duration::ZERO, |(a, b)| b - a);
    let rate = if wall.is_zero() {
        0.0
    } else {
        tally.samples.len() as f64 / wall.as_secs_f64()
    };
    report.insert(
        "wall_s".into(),
        json!((wall.as_secs_f64() * 1000.0).round() / 1000.0),
    );
    report.insert("calls_per_s".into(), json!(rate.round() as u64));
    if let Some((tools, pages)) = listed {
        report.insert("tools".into(), json!(tools));
        report.insert("pages".into(), json!(pages));
    }
    Ok((report, tally))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_unique_and_echo_is_checked() {
        let template = json!({"message": "x", "n": 1});
        let Value::Object(template) = template else {
            unreachable!()
        };
        let (args, token) = unique_args(&template, "message", 3, 17);
        assert_eq!(args, json!({"message": "x-s3-c17", "n": 1}));
        let ok = json!({"result": {"content": [{"type": "text", "text": "Echo: x-s3-c17"}]}});
        assert!(check_result(&ok, Some(&token)).is_ok());
        assert!(
            check_result(&ok, Some("x-s3-c1")).is_err(),
            "a prefix is not the text"
        );
        assert!(check_result(&ok, Some("x-s4-c17")).is_err());
        let err = json!({"result": {"isError": true, "content": []}});
        assert!(check_result(&err, None).is_err());
        assert!(check_result(&json!({"error": {}}), None).is_err());
    }
}
