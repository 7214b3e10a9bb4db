//! quickbench: what mcpmux adds on top of talking to an MCP server directly.
//!
//! Run `cargo build --release --bins` first (for `mcpmux-test-server`), then
//! `cargo run --release --example quickbench -- [--calls N] [--warmup W] [--list-calls L]`.
//!
//! Everything runs in this one process: the servers (an in-process Streamable HTTP echo server
//! and mcpmux itself) on a multi-thread tokio runtime, the measuring client on a current-thread
//! runtime in its own OS thread, so the two never share a scheduler. Three scenarios:
//! 1. `tools/call echo` to an HTTP upstream, directly and through mcpmux;
//! 2. `tools/call echo` to a stdio upstream (`mcpmux-test-server`), over the child's pipes
//!    directly and through mcpmux (so the paths differ: HTTP + stdio versus stdio only);
//! 3. `tools/list` over 1,000 tools merged from 10 stdio upstreams.
//!
//! It prints figures only (a table, then one JSON line); nothing is asserted on timings.

use axum::serve::ListenerExt;
use bytes::Bytes;
use futures_util::StreamExt;
use http::{header, Method, StatusCode};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::runtime::Handle;

const PROTOCOL: &str = "2025-11-25";
const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
/// How long a reply (or the rest of an SSE stream after the response) may take before it counts
/// as an error; generous, it only keeps a broken run from hanging.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);
const LIST_SERVERS: usize = 10;
const LIST_GENERATED_TOOLS: usize = 79;
const LIST_EXPECTED: usize = 1000;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

struct Args {
    calls: usize,
    warmup: usize,
    list_calls: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        calls: 3000,
        warmup: 300,
        list_calls: 1000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut number = || -> Result<usize, String> {
            let v = it.next().ok_or(format!("{flag} needs a value"))?;
            v.parse().map_err(|_| format!("{flag}: bad number {v:?}"))
        };
        match flag.as_str() {
            "--calls" => args.calls = number()?,
            "--warmup" => args.warmup = number()?,
            "--list-calls" => args.list_calls = number()?,
            "-h" | "--help" => {
                println!("usage: quickbench [--calls N (3000)] [--warmup W (300)] [--list-calls L (1000)]");
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {flag:?}")),
        }
    }
    if args.calls == 0 || args.list_calls == 0 {
        return Err("--calls and --list-calls must be at least 1".into());
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("quickbench: {e}");
            return ExitCode::from(2);
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();

    let test_server = match find_test_server() {
        Ok(p) => p,
        Err(msg) => {
            eprintln!("quickbench: {msg}");
            eprintln!("quickbench: run `cargo build --release --bins` first, then run this example again");
            return ExitCode::from(1);
        }
    };

    let servers = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("bench-servers")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("quickbench: cannot build the server runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let handle = servers.handle().clone();
    let driver =
        std::thread::Builder::new()
            .name("bench-driver".into())
            .spawn(move || -> Result<(), String> {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| format!("cannot build the driver runtime: {e}"))?;
                rt.block_on(drive(handle, args, test_server))
                    .map_err(|e| e.to_string())
            });
    let outcome = match driver {
        Ok(thread) => thread
            .join()
            .unwrap_or_else(|_| Err("the driver thread panicked".into())),
        Err(e) => Err(format!("cannot spawn the driver thread: {e}")),
    };
    servers.shutdown_timeout(Duration::from_secs(5));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("quickbench: {e}");
            ExitCode::from(1)
        }
    }
}

/// `target/<profile>/examples/quickbench` → `target/<profile>/mcpmux-test-server`.
fn find_test_server() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate this executable: {e}"))?;
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| format!("unexpected executable location {}", exe.display()))?;
    let bin = profile_dir.join(format!("mcpmux-test-server{}", std::env::consts::EXE_SUFFIX));
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(format!("test server binary not found at {}", bin.display()))
    }
}

// ---------------------------------------------------------------------------------------------
// Statistics

#[derive(Default)]
struct Run {
    /// One entry per measured (non-warmup) call that succeeded.
    samples: Vec<Duration>,
    errors: usize,
    first_error: Option<String>,
    /// Longest time an SSE stream stayed open after its response had arrived (mcpmux only).
    max_tail: Duration,
    wall: Duration,
}

impl Run {
    fn error(&mut self, msg: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(msg);
        }
    }

    fn sorted(&self) -> Vec<Duration> {
        let mut s = self.samples.clone();
        s.sort_unstable();
        s
    }
}

/// Nearest-rank percentile of sorted samples, in milliseconds.
fn pct_ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let idx = rank.clamp(1, sorted.len()) - 1;
    sorted[idx].as_secs_f64() * 1e3
}

struct Summary {
    n: usize,
    errors: usize,
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
    mean: f64,
}

fn summarize(run: &Run) -> Summary {
    let s = run.sorted();
    let mean = if s.is_empty() {
        f64::NAN
    } else {
        s.iter().map(Duration::as_secs_f64).sum::<f64>() / s.len() as f64 * 1e3
    };
    Summary {
        n: s.len(),
        errors: run.errors,
        p50: pct_ms(&s, 50.0),
        p90: pct_ms(&s, 90.0),
        p99: pct_ms(&s, 99.0),
        max: s.last().map_or(f64::NAN, |d| d.as_secs_f64() * 1e3),
        mean,
    }
}

fn summary_json(s: &Summary) -> Value {
    let r = |x: f64| (x * 1000.0).round() / 1000.0;
    json!({
        "n": s.n, "errors": s.errors,
        "p50_ms": r(s.p50), "p90_ms": r(s.p90), "p99_ms": r(s.p99),
        "max_ms": r(s.max), "mean_ms": r(s.mean),
    })
}

// ---------------------------------------------------------------------------------------------
// A minimal Streamable HTTP MCP client (sequential requests over one keep-alive connection)

struct Reply {
    msg: Value,
    /// When the response with the wanted id had been read (before draining the rest).
    at: Instant,
    body_bytes: usize,
    content_type: String,
    /// Time from the response to the end of its SSE stream (zero for JSON replies).
    tail: Duration,
}

struct HttpPeer {
    client: reqwest::Client,
    url: String,
    session: Option<String>,
}

impl HttpPeer {
    fn new(url: String) -> Result<Self, BoxError> {
        let client = reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(4)
            .build()?;
        Ok(HttpPeer {
            client,
            url,
            session: None,
        })
    }

    fn post(&self, body: String) -> reqwest::RequestBuilder {
        let mut req = self
            .client
            .post(&self.url)
            .header(header::ACCEPT, "application/json, text/event-stream")
            .header(header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(sid) = &self.session {
            req = req
                .header(SESSION_HEADER, sid.as_str())
                .header(VERSION_HEADER, PROTOCOL);
        }
        req
    }

    /// Sends a request and returns the response carrying `id`, from a JSON or an SSE reply.
    async fn request(&self, id: u64, method: &str, params: Value) -> Result<Reply, String> {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        tokio::time::timeout(REPLY_TIMEOUT, self.exchange(id, body))
            .await
            .unwrap_or_else(|_| Err(format!("no reply to {method} id {id} within {REPLY_TIMEOUT:?}")))
    }

    async fn exchange(&self, id: u64, body: String) -> Result<Reply, String> {
        let resp = self
            .post(body)
            .send()
            .await
            .map_err(|e| format!("POST failed: {e}"))?;
        let status = resp.status();
        let content_type = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            return Err(format!(
                "HTTP {status}: {}",
                text.chars().take(300).collect::<String>()
            ));
        }
        if content_type.starts_with("application/json") {
            let bytes = resp.bytes().await.map_err(|e| format!("reading body: {e}"))?;
            let at = Instant::now();
            let msg: Value = serde_json::from_slice(&bytes).map_err(|e| format!("bad JSON reply: {e}"))?;
            if msg.get("id") != Some(&json!(id)) {
                return Err(format!("reply id {:?} instead of {id}", msg.get("id")));
            }
            return Ok(Reply {
                msg,
                at,
                body_bytes: bytes.len(),
                content_type,
                tail: Duration::ZERO,
            });
        }
        if !content_type.starts_with("text/event-stream") {
            return Err(format!("unexpected content type {content_type:?}"));
        }
        let mut stream = resp.bytes_stream();
        let mut sse = SseReader::default();
        let mut total = 0usize;
        let (msg, at) = 'read: loop {
            let Some(chunk) = stream.next().await else {
                return Err(format!("SSE stream ended without a response to id {id}"));
            };
            let chunk = chunk.map_err(|e| format!("SSE stream broke: {e}"))?;
            total += chunk.len();
            for data in sse.push(&chunk) {
                if data.trim().is_empty() {
                    continue; // a priming event
                }
                let msg: Value = serde_json::from_str(&data).map_err(|e| format!("bad SSE data: {e}"))?;
                if msg.get("id") == Some(&json!(id)) && msg.get("method").is_none() {
                    break 'read (msg, Instant::now());
                }
            }
        };
        // The stream should end right after the response; read it to the end so the connection
        // is reused, and note how long that took.
        while let Some(chunk) = stream.next().await {
            total += chunk
                .map_err(|e| format!("SSE stream broke after the response: {e}"))?
                .len();
        }
        Ok(Reply {
            msg,
            at,
            body_bytes: total,
            content_type,
            tail: at.elapsed(),
        })
    }

    async fn notify(&self, method: &str) -> Result<(), String> {
        let body = json!({"jsonrpc": "2.0", "method": method}).to_string();
        let resp = self
            .post(body)
            .send()
            .await
            .map_err(|e| format!("POST {method} failed: {e}"))?;
        match resp.status() {
            StatusCode::ACCEPTED => Ok(()),
            s => Err(format!("{method}: HTTP {s} instead of 202")),
        }
    }

    /// initialize (keeping the session id) then notifications/initialized.
    async fn open(&mut self) -> Result<Value, String> {
        let body = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "quickbench", "version": env!("CARGO_PKG_VERSION")},
            },
        })
        .to_string();
        let resp = tokio::time::timeout(REPLY_TIMEOUT, self.post(body).send())
            .await
            .map_err(|_| "initialize timed out".to_string())?
            .map_err(|e| format!("initialize failed: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("initialize: HTTP {}", resp.status()));
        }
        self.session = resp
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = resp.text().await.map_err(|e| format!("initialize body: {e}"))?;
        let msg: Value = serde_json::from_str(&text).map_err(|e| format!("initialize reply: {e}"))?;
        if msg.get("result").is_none() {
            return Err(format!("initialize failed: {msg}"));
        }
        self.notify("notifications/initialized").await?;
        Ok(msg)
    }

    async fn close(&self) {
        if let Some(sid) = &self.session {
            let _ = self
                .client
                .delete(&self.url)
                .header(SESSION_HEADER, sid.as_str())
                .header(VERSION_HEADER, PROTOCOL)
                .send()
                .await;
        }
    }
}

/// Incremental SSE decoder: yields the data of each complete event.
#[derive(Default)]
struct SseReader {
    buf: Vec<u8>,
    data: Vec<String>,
}

impl SseReader {
    fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(nl) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=nl).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !self.data.is_empty() {
                    events.push(self.data.join("\n"));
                    self.data.clear();
                }
            } else if let Some(rest) = line.strip_prefix("data:") {
                self.data.push(rest.strip_prefix(' ').unwrap_or(rest).to_string());
            }
        }
        events
    }
}

fn echo_text(msg: &Value) -> Option<&str> {
    msg.pointer("/result/content/0/text").and_then(Value::as_str)
}

fn check_echo(msg: &Value, message: &str) -> Result<(), String> {
    let want = format!("echo: {message}");
    match echo_text(msg) {
        Some(t) if t == want && msg.pointer("/result/isError") != Some(&json!(true)) => Ok(()),
        _ => Err(format!(
            "unexpected echo reply: {}",
            truncate(&msg.to_string(), 300)
        )),
    }
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// W warmup + N measured sequential `tools/call` of `tool` over one HTTP session.
async fn echo_http(peer: &HttpPeer, tool: &str, warmup: usize, calls: usize) -> Run {
    let mut run = Run::default();
    let started = Instant::now();
    for i in 0..warmup + calls {
        let id = 1000 + i as u64;
        let message = format!("m{id}");
        let params = json!({"name": tool, "arguments": {"message": message}});
        let t0 = Instant::now();
        let outcome = peer.request(id, "tools/call", params).await;
        let measured = i >= warmup;
        match outcome.and_then(|r| check_echo(&r.msg, &message).map(|()| r)) {
            Ok(reply) => {
                if measured {
                    run.samples.push(reply.at - t0);
                    run.max_tail = run.max_tail.max(reply.tail);
                }
            }
            Err(e) => run.error(format!("call {i}: {e}")),
        }
    }
    run.wall = started.elapsed();
    run
}

// ---------------------------------------------------------------------------------------------
// A direct stdio client of mcpmux-test-server

struct StdioPeer {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl StdioPeer {
    fn spawn(bin: &Path, args: &[&str]) -> Result<Self, BoxError> {
        let mut child = tokio::process::Command::new(bin)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        Ok(StdioPeer {
            child,
            stdin,
            stdout: BufReader::new(stdout).lines(),
        })
    }

    async fn send(&mut self, msg: &Value) -> Result<(), String> {
        let mut line = msg.to_string().into_bytes();
        line.push(b'\n');
        self.stdin
            .write_all(&line)
            .await
            .map_err(|e| format!("write to child: {e}"))?;
        self.stdin
            .flush()
            .await
            .map_err(|e| format!("flush to child: {e}"))
    }

    async fn request(&mut self, id: u64, method: &str, params: Value) -> Result<Value, String> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        let wait = async {
            loop {
                let line = self
                    .stdout
                    .next_line()
                    .await
                    .map_err(|e| format!("read from child: {e}"))?
                    .ok_or("child closed stdout")?;
                let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if msg.get("id") == Some(&json!(id)) && msg.get("method").is_none() {
                    return Ok(msg);
                }
            }
        };
        tokio::time::timeout(REPLY_TIMEOUT, wait)
            .await
            .unwrap_or_else(|_| Err(format!("no reply to {method} id {id}")))
    }

    async fn stop(mut self) {
        drop(self.stdin);
        if tokio::time::timeout(Duration::from_secs(3), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

async fn echo_stdio(peer: &mut StdioPeer, warmup: usize, calls: usize) -> Run {
    let mut run = Run::default();
    let started = Instant::now();
    for i in 0..warmup + calls {
        let id = 1000 + i as u64;
        let message = format!("m{id}");
        let params = json!({"name": "echo", "arguments": {"message": message}});
        let t0 = Instant::now();
        let outcome = peer.request(id, "tools/call", params).await;
        let elapsed = t0.elapsed();
        match outcome.and_then(|msg| check_echo(&msg, &message)) {
            Ok(()) if i >= warmup => run.samples.push(elapsed),
            Ok(()) => {}
            Err(e) => run.error(format!("call {i}: {e}")),
        }
    }
    run.wall = started.elapsed();
    run
}

// ---------------------------------------------------------------------------------------------
// The in-process Streamable HTTP echo server (plain JSON replies, no SSE)

async fn echo_server_handler(method: Method, body: Bytes) -> axum::response::Response {
    use axum::response::IntoResponse;
    let json_reply = |msg: Value, sid: Option<&str>| {
        let mut resp = (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            msg.to_string(),
        )
            .into_response();
        if let Some(v) = sid.and_then(|s| http::HeaderValue::from_str(s).ok()) {
            resp.headers_mut().insert(SESSION_HEADER, v);
        }
        resp
    };
    match method {
        Method::POST => {}
        Method::DELETE => return StatusCode::OK.into_response(),
        _ => return StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
    let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
        let err = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}});
        return (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "application/json")],
            err.to_string(),
        )
            .into_response();
    };
    let (Some(id), Some(name)) = (msg.get("id").cloned(), msg.get("method").and_then(Value::as_str)) else {
        // A notification or a response.
        return StatusCode::ACCEPTED.into_response();
    };
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    let ok = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
    match name {
        "initialize" => {
            let version = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or(PROTOCOL)
                .to_string();
            let result = json!({
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "quickbench-echo", "version": env!("CARGO_PKG_VERSION")},
            });
            json_reply(ok(result), Some("quickbench-echo-session"))
        }
        "ping" => json_reply(ok(json!({})), None),
        "tools/list" => {
            let tool = json!({
                "name": "echo",
                "description": "Echo a message back",
                "inputSchema": {
                    "type": "object",
                    "properties": {"message": {"type": "string"}},
                    "required": ["message"],
                },
            });
            json_reply(ok(json!({"tools": [tool]})), None)
        }
        "tools/call" if params.get("name").and_then(Value::as_str) == Some("echo") => {
            let message = params
                .pointer("/arguments/message")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let text = format!("echo: {message}");
            json_reply(ok(json!({"content": [{"type": "text", "text": text}]})), None)
        }
        _ => {
            let err = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("Method not found: {name}")}});
            json_reply(err, None)
        }
    }
}

async fn start_echo_server(servers: &Handle) -> Result<String, BoxError> {
    let listener = servers
        .spawn(async { tokio::net::TcpListener::bind("127.0.0.1:0").await })
        .await??;
    let addr = listener.local_addr()?;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let app = axum::Router::new().route("/mcp", axum::routing::any(echo_server_handler));
    servers.spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("quickbench: echo server stopped: {e}");
        }
    });
    Ok(format!("http://{addr}/mcp"))
}

// ---------------------------------------------------------------------------------------------
// mcpmux in-process, on the server runtime

/// A TOML basic string; `$` is doubled because mcpmux interpolates `${VAR}`.
fn toml_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '$' => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

async fn start_mcpmux(servers: &Handle, toml: String) -> Result<mcpmux::Gateway, BoxError> {
    let config = mcpmux::Config::from_toml_str(&toml, "bench.toml", &|k| std::env::var(k).ok())?;
    let gateway = servers.spawn(mcpmux::start(config)).await??;
    Ok(gateway)
}

async fn stop_mcpmux(servers: &Handle, gateway: mcpmux::Gateway) {
    let _ = servers.spawn(gateway.stop()).await;
}

// ---------------------------------------------------------------------------------------------
// tools/list over 1,000 merged tools

struct ListResult {
    startup: Option<Duration>,
    tools: usize,
    body_bytes: usize,
    content_type: String,
    run: Run,
}

async fn list_bench(
    servers: &Handle,
    test_server: &Path,
    warmup: usize,
    calls: usize,
) -> Result<ListResult, BoxError> {
    let mut toml = String::from("[gateway]\nlisten = \"127.0.0.1:0\"\npage_size = 1000\n");
    for i in 0..LIST_SERVERS {
        toml.push_str(&format!(
            "\n[servers.s{i}]\ncommand = {}\nargs = [\"--tools\", \"{LIST_GENERATED_TOOLS}\", \"--name\", \"s{i}\"]\n",
            toml_str(&test_server.display().to_string())
        ));
    }
    let t0 = Instant::now();
    let gateway = start_mcpmux(servers, toml).await?;
    let mut peer = HttpPeer::new(gateway.url())?;
    let mut result = ListResult {
        startup: None,
        tools: 0,
        body_bytes: 0,
        content_type: String::new(),
        run: Run::default(),
    };
    let outcome = async {
        peer.open().await?;
        let mut id = 1u64;
        // Startup: until one tools/list returns every tool.
        let deadline = t0 + REPLY_TIMEOUT;
        loop {
            let reply = peer.request(id, "tools/list", json!({})).await?;
            id += 1;
            let n = count_tools(&reply.msg)?;
            result.tools = n;
            result.body_bytes = reply.body_bytes;
            result.content_type = reply.content_type.clone();
            if n >= LIST_EXPECTED {
                result.startup = Some(reply.at - t0);
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "only {n} of {LIST_EXPECTED} tools after {REPLY_TIMEOUT:?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let started = Instant::now();
        for i in 0..warmup + calls {
            let t = Instant::now();
            let outcome = peer.request(id, "tools/list", json!({})).await;
            id += 1;
            let checked = outcome.and_then(|r| match count_tools(&r.msg)? {
                LIST_EXPECTED => Ok(r),
                n => Err(format!("tools/list returned {n} tools")),
            });
            match checked {
                Ok(r) if i >= warmup => {
                    result.run.samples.push(r.at - t);
                    result.body_bytes = r.body_bytes;
                }
                Ok(_) => {}
                Err(e) => result.run.error(format!("list {i}: {e}")),
            }
        }
        result.run.wall = started.elapsed();
        Ok::<(), String>(())
    }
    .await;
    peer.close().await;
    stop_mcpmux(servers, gateway).await;
    outcome?;
    Ok(result)
}

fn count_tools(msg: &Value) -> Result<usize, String> {
    if msg.pointer("/result/nextCursor").is_some_and(|c| !c.is_null()) {
        return Err("tools/list was paged despite page_size = 1000".into());
    }
    msg.pointer("/result/tools")
        .and_then(Value::as_array)
        .map(Vec::len)
        .ok_or_else(|| {
            format!(
                "tools/list reply without tools: {}",
                truncate(&msg.to_string(), 300)
            )
        })
}

// ---------------------------------------------------------------------------------------------
// The driver

async fn drive(servers: Handle, args: Args, test_server: PathBuf) -> Result<(), BoxError> {
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let version = env!("CARGO_PKG_VERSION");
    println!("quickbench — mcpmux {version}");
    println!(
        "machine: {nproc} CPUs (available_parallelism), {} {}",
        std::env::consts::OS,
        std::env::consts::ARCH
    );
    println!(
        "calls: {} measured after {} warmup per echo path; tools/list: {} measured after {} warmup",
        args.calls,
        args.warmup,
        args.list_calls,
        args.warmup.min(100)
    );
    println!("client: current-thread tokio runtime on its own OS thread; servers + mcpmux: multi-thread runtime; all in one process");
    println!("test server: {}", test_server.display());
    println!();

    // 1. HTTP upstream.
    eprintln!("[1/3] HTTP upstream: direct ...");
    let echo_url = start_echo_server(&servers).await?;
    let mut direct = HttpPeer::new(echo_url.clone())?;
    direct.open().await?;
    let http_direct = echo_http(&direct, "echo", args.warmup, args.calls).await;
    direct.close().await;

    eprintln!("[1/3] HTTP upstream: via mcpmux ...");
    let toml = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\n\n[servers.echo]\nurl = {}\n",
        toml_str(&echo_url)
    );
    let gateway = start_mcpmux(&servers, toml).await?;
    let mut via = HttpPeer::new(gateway.url())?;
    let http_via = match via.open().await {
        Ok(_) => echo_http(&via, "echo__echo", args.warmup, args.calls).await,
        Err(e) => {
            let mut r = Run::default();
            r.error(format!("open: {e}"));
            r
        }
    };
    via.close().await;
    stop_mcpmux(&servers, gateway).await;

    // 2. stdio upstream.
    eprintln!("[2/3] stdio upstream: direct ...");
    let mut child = StdioPeer::spawn(&test_server, &["--tools", "0"])?;
    let init = json!({
        "protocolVersion": PROTOCOL,
        "capabilities": {},
        "clientInfo": {"name": "quickbench", "version": version},
    });
    child.request(0, "initialize", init).await?;
    child
        .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await?;
    let stdio_direct = echo_stdio(&mut child, args.warmup, args.calls).await;
    child.stop().await;

    eprintln!("[2/3] stdio upstream: via mcpmux ...");
    let toml = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\n\n[servers.t]\ncommand = {}\nargs = [\"--tools\", \"0\"]\n",
        toml_str(&test_server.display().to_string())
    );
    let gateway = start_mcpmux(&servers, toml).await?;
    let mut via = HttpPeer::new(gateway.url())?;
    let stdio_via = match via.open().await {
        Ok(_) => echo_http(&via, "t__echo", args.warmup, args.calls).await,
        Err(e) => {
            let mut r = Run::default();
            r.error(format!("open: {e}"));
            r
        }
    };
    via.close().await;
    stop_mcpmux(&servers, gateway).await;

    // 3. tools/list over 1,000 tools.
    eprintln!("[3/3] tools/list over {LIST_EXPECTED} tools via mcpmux ...");
    let list = list_bench(&servers, &test_server, args.warmup.min(100), args.list_calls).await?;

    // Report.
    let hd = summarize(&http_direct);
    let hv = summarize(&http_via);
    let sd = summarize(&stdio_direct);
    let sv = summarize(&stdio_via);
    let ls = summarize(&list.run);
    println!(
        "{:<40} {:>6} {:>4} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "scenario", "n", "err", "p50 ms", "p90 ms", "p99 ms", "max ms", "mean ms", "calls/s"
    );
    let row = |name: &str, s: &Summary, r: &Run| {
        let rate = if r.wall.is_zero() {
            0.0
        } else {
            (r.samples.len() + r.errors) as f64 / r.wall.as_secs_f64()
        };
        println!(
            "{name:<40} {:>6} {:>4} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.0}",
            s.n, s.errors, s.p50, s.p90, s.p99, s.max, s.mean, rate
        );
    };
    let added = |via: &Summary, direct: &Summary| {
        format!(
            "added by mcpmux: p50 {:+.0} µs, p90 {:+.0} µs, p99 {:+.0} µs, mean {:+.0} µs",
            (via.p50 - direct.p50) * 1e3,
            (via.p90 - direct.p90) * 1e3,
            (via.p99 - direct.p99) * 1e3,
            (via.mean - direct.mean) * 1e3
        )
    };
    row("1. HTTP echo, direct", &hd, &http_direct);
    row("1. HTTP echo, via mcpmux (SSE reply)", &hv, &http_via);
    println!("   {}", added(&hv, &hd));
    row("2. stdio echo, direct (pipes only)", &sd, &stdio_direct);
    row("2. stdio echo, via mcpmux (HTTP+stdio)", &sv, &stdio_via);
    println!(
        "   {}  [paths differ: via = HTTP to mcpmux + stdio; direct = stdio only]",
        added(&sv, &sd)
    );
    row("3. tools/list, 1000 tools via mcpmux", &ls, &list.run);
    match list.startup {
        Some(d) => println!(
            "   startup (start() until tools/list has all {LIST_EXPECTED} tools from {LIST_SERVERS} stdio upstreams): {:.1} ms",
            d.as_secs_f64() * 1e3
        ),
        None => println!("   startup: never reached {LIST_EXPECTED} tools"),
    }
    println!(
        "   tools/list: {} tools, {} bytes per response ({})",
        list.tools, list.body_bytes, list.content_type
    );
    println!(
        "   SSE stream still open after the response (max): HTTP {:.3} ms, stdio {:.3} ms",
        http_via.max_tail.as_secs_f64() * 1e3,
        stdio_via.max_tail.as_secs_f64() * 1e3
    );
    for (name, r) in [
        ("HTTP direct", &http_direct),
        ("HTTP via mcpmux", &http_via),
        ("stdio direct", &stdio_direct),
        ("stdio via mcpmux", &stdio_via),
        ("tools/list", &list.run),
    ] {
        if let Some(e) = &r.first_error {
            println!("   {name}: {} error(s), first: {e}", r.errors);
        }
    }

    let line = json!({
        "bench": "quickbench",
        "mcpmux_version": version,
        "nproc": nproc,
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "calls": args.calls,
        "warmup": args.warmup,
        "http": {
            "direct": summary_json(&hd),
            "via": summary_json(&hv),
            "added_p50_us": ((hv.p50 - hd.p50) * 1e3).round(),
        },
        "stdio": {
            "direct": summary_json(&sd),
            "via": summary_json(&sv),
            "added_p50_us": ((sv.p50 - sd.p50) * 1e3).round(),
            "note": "via = HTTP + stdio, direct = stdio only",
        },
        "tools_list": {
            "tools": list.tools,
            "upstreams": LIST_SERVERS,
            "startup_ms": list.startup.map(|d| (d.as_secs_f64() * 1e4).round() / 10.0),
            "response_bytes": list.body_bytes,
            "content_type": list.content_type,
            "latency": summary_json(&ls),
        },
    });
    println!();
    println!("{line}");
    Ok(())
}
