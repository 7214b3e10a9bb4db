//! `mcpmux-bench`: a load driver for any Streamable HTTP MCP endpoint (mcpmux, an upstream directly,
//! another gateway). Prints a table and one JSON line; `bench/run.sh` runs it across scenarios.

mod calls;
mod client;
mod fanout;
mod idle;
mod stats;
mod stdio;

use clap::{Parser, ValueEnum};
use serde_json::{json, Map, Value};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Debug)]
pub enum Mode {
    /// K sessions × (W + N) sequential `tools/call` with unique ids and arguments.
    Call,
    /// K sessions × (W + N) sequential `tools/list` (every page), optionally timing startup.
    List,
    /// Open K sessions and hold them; with --rss-pid, the server's memory per session.
    Idle,
    /// K sessions with open GET streams; time from a trigger call to each `tools/list_changed`.
    Fanout,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Debug)]
pub enum Check {
    /// The result's text must end with the unique argument sent (`Echo: <message>`).
    Echo,
    /// Any result that is not an error.
    Result,
}

/// Drive a Streamable HTTP MCP endpoint and report latency, throughput and errors.
#[derive(Parser, Debug)]
#[command(name = "mcpmux-bench", version)]
pub struct Opts {
    /// The endpoint, e.g. http://127.0.0.1:8080/mcp, or `stdio:COMMAND ARGS` for a stdio server
    /// spoken to directly (one child process per session)
    pub url: String,
    #[arg(long, value_enum, default_value_t = Mode::Call)]
    pub mode: Mode,
    /// Concurrent sessions (listeners in fanout mode)
    #[arg(long, default_value_t = 1)]
    pub sessions: usize,
    /// Measured requests per session
    #[arg(long, default_value_t = 1000)]
    pub calls: usize,
    /// Unmeasured requests per session before the measured ones
    #[arg(long, default_value_t = 20)]
    pub warmup: usize,
    /// Tool to call (the trigger tool in fanout mode)
    #[arg(long, default_value = "echo")]
    pub tool: String,
    /// The tool's arguments, a JSON object
    #[arg(long, default_value = r#"{"message":"x"}"#)]
    pub args: String,
    /// String argument made unique per call ("" for none); its value must come back
    #[arg(long, default_value = "message")]
    pub unique_arg: String,
    #[arg(long, value_enum, default_value_t = Check::Echo)]
    pub check: Check,
    /// Longest wait for one reply (and for notifications in fanout mode)
    #[arg(long, default_value_t = 30)]
    pub timeout_secs: u64,
    /// Keep retrying the first session this long while the server starts
    #[arg(long, default_value_t = 0)]
    pub wait_secs: u64,
    /// list: the number of tools every list must have
    #[arg(long)]
    pub expect_tools: Option<usize>,
    /// list: Unix time (ns) the server was launched; reports startup_ms until --expect-tools are listed
    #[arg(long)]
    pub started_at_ns: Option<u128>,
    /// idle/fanout: sessions being opened at once
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// idle: process whose VmRSS is read before and after opening the sessions
    #[arg(long)]
    pub rss_pid: Option<u32>,
    /// idle: wait this long after opening before reading memory
    #[arg(long, default_value_t = 500)]
    pub settle_ms: u64,
    /// idle: hold the sessions this long before closing them
    #[arg(long, default_value_t = 0)]
    pub hold_secs: u64,
    /// fanout: how many times to trigger a change
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Worker threads for the driver (1: a current-thread runtime)
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// A name for this run, copied into the JSON
    #[arg(long)]
    pub label: Option<String>,
    /// Send `Authorization: Bearer <TOKEN>` with every request (a gateway with `[auth]`)
    #[arg(long)]
    pub bearer: Option<String>,
    /// Open each session (initialize) at this endpoint instead, and send its requests to the
    /// main one: with two replicas, every request is forwarded to the session's home
    #[arg(long)]
    pub open_at: Option<String>,
    /// Print only the JSON line
    #[arg(long)]
    pub json: bool,
}

fn main() -> ExitCode {
    let opts = Opts::parse();
    if opts.sessions == 0 || (opts.calls == 0 && matches!(opts.mode, Mode::Call | Mode::List)) {
        eprintln!("mcpmux-bench: --sessions and --calls must be at least 1");
        return ExitCode::from(2);
    }
    let runtime = if opts.threads > 1 {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(opts.threads)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcpmux-bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(drive(&opts)) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("mcpmux-bench: {e}");
            let line = json!({"mode": format!("{:?}", opts.mode).to_lowercase(), "url": opts.url,
                "label": opts.label, "fatal": e});
            println!("{line}");
            ExitCode::FAILURE
        }
    }
}

/// Run the mode, print the report; returns the error count.
async fn drive(opts: &Opts) -> Result<usize, String> {
    let endpoint = client::Endpoint::new(
        &opts.url,
        Duration::from_secs(opts.timeout_secs),
        opts.bearer.as_deref(),
    )?
    .opening_at(opts.open_at.as_deref());
    let (extra, tally) = match opts.mode {
        Mode::Call => calls::run(opts, endpoint, false).await?,
        Mode::List => calls::run(opts, endpoint, true).await?,
        Mode::Idle => idle::run(opts, endpoint).await?,
        Mode::Fanout => fanout::run(opts, endpoint).await?,
    };
    let summary = stats::summarize(&tally.samples);
    let mode = format!("{:?}", opts.mode).to_lowercase();
    let mut report = Map::new();
    report.insert("mode".into(), json!(mode));
    report.insert("url".into(), json!(opts.url));
    report.insert("label".into(), json!(opts.label));
    report.insert("sessions".into(), json!(opts.sessions));
    if matches!(opts.mode, Mode::Call | Mode::List) {
        report.insert("calls_per_session".into(), json!(opts.calls));
        report.insert("warmup".into(), json!(opts.warmup));
    }
    summary.put(&mut report);
    report.insert("errors".into(), json!(tally.errors));
    report.insert("first_error".into(), json!(tally.first_error));
    report.extend(extra);
    if !opts.json {
        print_human(opts, &summary, &report);
    }
    println!("{}", Value::Object(report));
    Ok(tally.errors)
}

fn print_human(opts: &Opts, s: &stats::Summary, report: &Map<String, Value>) {
    let figure = |k: &str| report.get(k).map_or("-".to_string(), |v| v.to_string());
    let what = match opts.mode {
        Mode::Call => format!("tools/call {}", opts.tool),
        Mode::List => "tools/list".into(),
        Mode::Idle => "initialize (idle sessions)".into(),
        Mode::Fanout => "list_changed delay".into(),
    };
    println!(
        "mcpmux-bench {} — {} — {}",
        env!("CARGO_PKG_VERSION"),
        opts.url,
        what
    );
    stats::print_table(
        &[
            "sessions", "ok", "errors", "p50 ms", "p90 ms", "p99 ms", "max ms", "mean ms", "calls/s",
        ],
        &[vec![
            opts.sessions.to_string(),
            s.n.to_string(),
            figure("errors"),
            stats::cell(s.p50),
            stats::cell(s.p90),
            stats::cell(s.p99),
            stats::cell(s.max),
            stats::cell(s.mean),
            figure("calls_per_s"),
        ]],
    );
    let skip = [
        "mode",
        "url",
        "label",
        "sessions",
        "calls_per_session",
        "warmup",
        "ok",
        "errors",
        "p50_ms",
        "p90_ms",
        "p99_ms",
        "max_ms",
        "mean_ms",
        "calls_per_s",
    ];
    for (k, v) in report {
        if !skip.contains(&k.as_str()) && !v.is_null() {
            println!("{k}: {v}");
        }
    }
}
