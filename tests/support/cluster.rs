//! Several real `mcpmux serve` replicas behind a real HAProxy or nginx: each replica on its own
//! port with its own `admin_listen` (the balancer's health checks ask its `/readyz`), the
//! balancer's config rendered from `deploy/balancers/` (the files operators copy, with only the
//! addresses changed, so the tests and the examples cannot drift), SIGTERM, `kill -9` and restart
//! of one replica, and everything killed on drop.

use super::serve::ServeProcess;
use super::{free_port, log_dir, path_str, repo_root, scratch_dir, spawn_server, ChildGuard};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long a stopping replica may take to exit (shutdown delay, drain, upstreams stopping).
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(40);
/// How long HAProxy may take to see a replica's change of health (checks every 1 s, 2 in a row).
const HEALTH_TIMEOUT: Duration = Duration::from_secs(20);

/// Which balancer runs in front.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BalancerKind {
    Haproxy,
    Nginx,
}

/// How the balancer spreads requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spread {
    /// As in `deploy/balancers/`: consistent hashing on `Mcp-Session-Id` (requests without it
    /// round-robin); HAProxy also sticks a session to the replica that answered its
    /// `initialize` (a stick table learning the id from the response).
    SessionHash,
    /// Plain round-robin for every request, no stickiness (enough for the 2026-07-28 era).
    RoundRobin,
}

/// What HAProxy's config changes from `deploy/balancers/haproxy.cfg`, beside the addresses (none
/// by default).
#[derive(Clone, Copy, Debug, Default)]
pub struct HaproxyTweaks {
    /// The health checks of the `default-server` line instead of `inter 1s fall 2 rise 2`.
    pub checks: Option<&'static str>,
    /// What a failed request is retried on instead of `conn-failure 503`.
    pub retry_on: Option<&'static str>,
}

/// Install HAProxy and nginx (once per process).
pub fn balancers() {
    super::debian::packages(&["haproxy=haproxy", "nginx=nginx"]);
}

/// A balancer binary, also where a non-login PATH lacks /usr/sbin.
fn sbin(name: &str) -> PathBuf {
    for dir in [
        "/usr/sbin",
        "/usr/local/sbin",
        "/sbin",
        "/usr/bin",
        "/usr/local/bin",
    ] {
        let path = Path::new(dir).join(name);
        if path.exists() {
            return path;
        }
    }
    PathBuf::from(name)
}

/// Where a replica's earlier runs' logs are kept, in its folder.
const EARLIER_LOGS: &str = "earlier-runs.log";

/// One replica: its ports, its folder (config and log) and its process while it runs.
pub struct Replica {
    pub port: u16,
    pub admin_port: u16,
    dir: PathBuf,
    pub process: Option<ServeProcess>,
}

impl Replica {
    /// Its own MCP endpoint (not through the balancer).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// Its operator endpoint `path` (`/readyz`, `/status`).
    pub fn admin_url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.admin_port)
    }

    /// The running process (panics when it is stopped).
    pub fn running(&mut self) -> &mut ServeProcess {
        self.process.as_mut().expect("the replica is running")
    }

    /// What it logged: its earlier runs (kept by [`Cluster::restart`]), then its current or
    /// last one, so a failure in a rolling restart shows the replica that was stopping.
    pub fn log(&self) -> String {
        let read = |name: &str| std::fs::read_to_string(self.dir.join(name)).unwrap_or_default();
        let earlier = read(EARLIER_LOGS);
        let now = read("gateway.log");
        match earlier.is_empty() {
            true => now,
            false => format!("{earlier}----- restarted -----\n{now}"),
        }
    }

    /// Keep what the run that ended logged, before the next run starts its log afresh.
    fn keep_log(&self) {
        let ended = std::fs::read_to_string(self.dir.join("gateway.log")).unwrap_or_default();
        let mut earlier = std::fs::read_to_string(self.dir.join(EARLIER_LOGS)).unwrap_or_default();
        if !earlier.is_empty() {
            earlier.push_str("----- restarted -----\n");
        }
        earlier.push_str(&ended);
        let _ = std::fs::write(self.dir.join(EARLIER_LOGS), earlier);
    }
}

/// A running balancer process and how to ask it about its servers.
struct Balancer {
    kind: BalancerKind,
    guard: ChildGuard,
    port: u16,
    /// HAProxy's admin socket (`show stat`).
    stats_socket: Option<PathBuf>,
    log: PathBuf,
}

/// N replicas with the same config (and one `[cluster]` key) behind one balancer.
pub struct Cluster {
    pub replicas: Vec<Replica>,
    balancer: Balancer,
    gateway_extra: String,
    servers: String,
    /// The `[cluster] key` every replica shares (base64 of 32 random bytes).
    cluster_key: String,
    /// Tools every replica must list before it counts as started.
    want_tools: Vec<String>,
}

impl Cluster {
    /// Start `n` replicas (each: `[gateway]` with `gateway_extra`, then `servers`), wait until
    /// each lists `want_tools`, then start the balancer in front and wait until it sees every
    /// replica up.
    pub async fn start(
        tag: &str,
        n: usize,
        kind: BalancerKind,
        spread: Spread,
        gateway_extra: &str,
        servers: &str,
        want_tools: &[&str],
    ) -> Cluster {
        let tweaks = HaproxyTweaks::default();
        Cluster::start_tweaked(tag, n, (kind, spread, tweaks), gateway_extra, servers, want_tools).await
    }

    /// [`Cluster::start`] with HAProxy's config tweaked (`tweaks`; ignored for nginx).
    pub async fn start_tweaked(
        tag: &str,
        n: usize,
        (kind, spread, tweaks): (BalancerKind, Spread, HaproxyTweaks),
        gateway_extra: &str,
        servers: &str,
        want_tools: &[&str],
    ) -> Cluster {
        tokio::task::spawn_blocking(balancers)
            .await
            .expect("balancer installation panicked");
        let root = scratch_dir(tag);
        let mut replicas = Vec::new();
        for i in 1..=n {
            let dir = root.join(format!("replica{i}"));
            std::fs::create_dir_all(&dir).expect("replica dir");
            replicas.push(Replica {
                port: free_port(),
                admin_port: free_port(),
                dir,
                process: None,
            });
        }
        let balancer_dir = root.join("balancer");
        std::fs::create_dir_all(&balancer_dir).expect("balancer dir");
        let mut cluster = Cluster {
            balancer: Balancer::start(kind, (spread, tweaks), &balancer_dir, &replicas),
            replicas,
            gateway_extra: gateway_extra.to_string(),
            servers: servers.to_string(),
            cluster_key: {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 32]>())
            },
            want_tools: want_tools.iter().map(|s| s.to_string()).collect(),
        };
        for i in 0..n {
            cluster.spawn(i);
        }
        for i in 0..n {
            cluster.wait_ready(i).await;
        }
        for i in 0..n {
            cluster.wait_balancer_sees(i, true).await;
        }
        cluster
    }

    /// The MCP endpoint through the balancer.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.balancer.port)
    }

    pub fn kind(&self) -> BalancerKind {
        self.balancer.kind
    }

    /// What the balancer logged.
    pub fn balancer_log(&self) -> String {
        std::fs::read_to_string(&self.balancer.log).unwrap_or_default()
    }

    /// Every replica's log and the balancer's, for a failure message.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for (i, r) in self.replicas.iter().enumerate() {
            out += &format!("\n===== replica {} (port {}) =====\n{}", i + 1, r.port, r.log());
        }
        out += &format!("\n===== {:?} =====\n{}", self.balancer.kind, self.balancer_log());
        out
    }

    fn spawn(&mut self, i: usize) {
        let r = &mut self.replicas[i];
        let extra = format!(
            "admin_listen = \"127.0.0.1:{}\"\n{}",
            r.admin_port, self.gateway_extra
        );
        // One cluster key for all: what one replica seals (cursors, requestState), any opens.
        let servers = format!(
            "{}\n\n[cluster]\nkey = \"{}\"\nadvertise = \"http://127.0.0.1:{}\"\n",
            self.servers, self.cluster_key, r.port
        );
        r.process = Some(ServeProcess::start_on(
            r.port,
            &r.dir,
            &extra,
            &servers,
            &r.dir,
            &[],
        ));
    }

    /// Wait until replica `i` lists every wanted tool itself.
    async fn wait_ready(&mut self, i: usize) {
        let want: Vec<&str> = self.want_tools.iter().map(String::as_str).collect();
        self.replicas[i].running().wait_tools(&want).await;
    }

    /// Start replica `i` again (same ports, same config) and wait until it is ready and the
    /// balancer sends it requests again.
    pub async fn restart(&mut self, i: usize) {
        assert!(
            self.replicas[i]
                .process
                .as_mut()
                .is_none_or(|p| p.guard.try_wait().is_some()),
            "replica {} is still running",
            i + 1
        );
        self.replicas[i].keep_log();
        self.spawn(i);
        self.wait_ready(i).await;
        self.wait_balancer_sees(i, true).await;
    }

    /// SIGTERM replica `i` (it drains and exits on its own; see [`Cluster::wait_exit`]).
    pub fn sigterm(&mut self, i: usize) {
        self.replicas[i].running().signal(libc::SIGTERM);
    }

    /// Wait for replica `i` to exit after a signal; panics with its log if it fails or hangs.
    pub async fn wait_exit(&mut self, i: usize) {
        let status = self.replicas[i].running().wait_exit(EXIT_TIMEOUT).await;
        assert!(
            status.success(),
            "replica {} exited with {status}; log:\n{}",
            i + 1,
            self.replicas[i].log()
        );
    }

    /// `kill -9` replica `i` and, as a dead machine or pod would, every process it started.
    pub fn kill9(&mut self, i: usize) {
        if let Some(mut process) = self.replicas[i].process.take() {
            kill_with_children(&mut process.guard);
        }
    }

    /// With HAProxy, wait until it reports replica `i` up (`true`) or down; with nginx (no active
    /// checks) return at once.
    pub async fn wait_balancer_sees(&self, i: usize, up: bool) {
        let Some(socket) = self.balancer.stats_socket.clone() else {
            return;
        };
        let name = server_name(i);
        let deadline = Instant::now() + HEALTH_TIMEOUT;
        loop {
            let status = haproxy_server_status(&socket, &name);
            // "UP 1/2" is going down, "DOWN 1/2" going up.
            if status.as_deref() == Some(if up { "UP" } else { "DOWN" }) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "HAProxy does not see {name} {} within {HEALTH_TIMEOUT:?} (status {status:?}){}",
                if up { "up" } else { "down" },
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Requests HAProxy sent to each replica so far (`stot` of `show stat`); `None` with nginx.
    pub fn requests_per_replica(&self) -> Option<Vec<u64>> {
        let socket = self.balancer.stats_socket.as_ref()?;
        let table = haproxy_stat(socket)?;
        (0..self.replicas.len())
            .map(|i| table.field(&server_name(i), "stot")?.parse().ok())
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for r in &mut self.replicas {
            if let Some(mut process) = r.process.take() {
                kill_with_children(&mut process.guard);
            }
        }
        self.balancer.guard.kill();
    }
}

/// The name of replica `i` in the balancer's config (as in `deploy/balancers/`).
fn server_name(i: usize) -> String {
    format!("mcpmux{}", i + 1)
}

/// SIGKILL a replica and the process groups of the children it started (its stdio servers lead
/// groups of their own), so nothing outlives it.
fn kill_with_children(guard: &mut ChildGuard) {
    let children = child_pids(guard.pid());
    guard.kill();
    for child in children {
        // SAFETY: plain syscalls; the children were just orphaned, ESRCH means already gone.
        unsafe {
            let group = libc::getpgid(child as libc::pid_t);
            if group > 1 && group == child as libc::pid_t {
                libc::kill(-group, libc::SIGKILL);
            } else {
                libc::kill(child as libc::pid_t, libc::SIGKILL);
            }
        }
    }
}

/// The pids whose parent is `parent` (from /proc).
fn child_pids(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // "pid (comm) state ppid ...": comm may hold spaces, so split after its ')'.
            let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
            after
                .split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u32>().ok())
                == Some(parent)
        })
        .collect()
}

impl Balancer {
    fn start(
        kind: BalancerKind,
        (spread, tweaks): (Spread, HaproxyTweaks),
        dir: &Path,
        replicas: &[Replica],
    ) -> Balancer {
        let port = free_port();
        let log = log_dir().join(format!("{kind:?}-{port}.log").to_lowercase());
        match kind {
            BalancerKind::Haproxy => {
                let socket = dir.join("haproxy.sock");
                let config = dir.join("haproxy.cfg");
                let text = haproxy_config((spread, tweaks), port, &socket, replicas);
                std::fs::write(&config, text).expect("write haproxy.cfg");
                let mut cmd = Command::new(sbin("haproxy"));
                cmd.arg("-db").arg("-f").arg(&config);
                let guard = spawn_server(cmd, port, &log, "haproxy");
                Balancer {
                    kind,
                    guard,
                    port,
                    stats_socket: Some(socket),
                    log,
                }
            }
            BalancerKind::Nginx => {
                let config = dir.join("nginx.conf");
                let text = nginx_config(spread, port, dir, replicas);
                std::fs::write(&config, text).expect("write nginx.conf");
                let mut cmd = Command::new(sbin("nginx"));
                cmd.arg("-e")
                    .arg("stderr")
                    .arg("-p")
                    .arg(dir)
                    .arg("-c")
                    .arg(&config)
                    .arg("-g")
                    .arg("daemon off;");
                let guard = spawn_server(cmd, port, &log, "nginx");
                Balancer {
                    kind,
                    guard,
                    port,
                    stats_socket: None,
                    log,
                }
            }
        }
    }
}

/// `text` with `from` replaced by `to`; panics when `from` is not there (deploy/ changed: the
/// tests must follow).
fn replace_in(text: &str, from: &str, to: &str, file: &str) -> String {
    assert!(text.contains(from), "{file} no longer contains {from:?}");
    text.replace(from, to)
}

/// The config of `deploy/balancers/<file>`, read from the repository.
fn deploy_balancer(file: &str) -> String {
    let path = repo_root().join("deploy").join("balancers").join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// `deploy/balancers/haproxy.cfg` in front of `replicas`, listening on `port`, with an admin
/// socket; with [`Spread::RoundRobin`], `balance roundrobin` instead of the hash; `tweaks`
/// replace its health checks and what it retries on.
pub fn haproxy_config(
    (spread, tweaks): (Spread, HaproxyTweaks),
    port: u16,
    socket: &Path,
    replicas: &[Replica],
) -> String {
    const FILE: &str = "haproxy.cfg";
    let mut text = deploy_balancer(FILE);
    if let Some(checks) = tweaks.checks {
        let line = format!("default-server check {checks}\n");
        text = replace_in(
            &text,
            "default-server check inter 1s fall 2 rise 2\n",
            &line,
            FILE,
        );
    }
    if let Some(retry_on) = tweaks.retry_on {
        let line = format!("retry-on {retry_on}\n");
        text = replace_in(&text, "retry-on conn-failure 503\n", &line, FILE);
    }
    text = replace_in(
        &text,
        "bind 127.0.0.1:8080",
        &format!("bind 127.0.0.1:{port}"),
        FILE,
    );
    let stats = format!(
        "\nglobal\n    stats socket {} mode 600 level admin\n",
        path_str(socket)
    );
    text = replace_in(&text, "\nglobal\n", &stats, FILE);
    // HAProxy needs two descriptors per connection and refuses to start when the hard limit
    // is below that (20000 here): fit `maxconn` under it.
    let maxconn = (fd_limit().saturating_sub(200) / 2).min(20000);
    text = replace_in(&text, "maxconn 20000", &format!("maxconn {maxconn}"), FILE);
    let servers: String = (replicas.iter().enumerate())
        .map(|(i, r)| {
            format!(
                "    server {} 127.0.0.1:{} port {}\n",
                server_name(i),
                r.port,
                r.admin_port
            )
        })
        .collect();
    let mut kept: Vec<&str> = Vec::new();
    let mut placed = false;
    for line in text.lines() {
        if line.trim_start().starts_with("server mcpmux") {
            if !placed {
                kept.push(servers.trim_end());
                placed = true;
            }
            continue;
        }
        kept.push(line);
    }
    assert!(placed, "{FILE} has no `server mcpmuxN` lines");
    text = kept.join("\n") + "\n";
    if spread == Spread::RoundRobin {
        text = replace_in(
            &text,
            "    balance hdr(Mcp-Session-Id)\n    hash-type consistent\n",
            "    balance roundrobin\n",
            FILE,
        );
        let plain: Vec<&str> = (text.lines())
            .filter(|line| !line.trim_start().starts_with("stick"))
            .collect();
        text = plain.join("\n") + "\n";
    }
    text
}

/// This process's hard limit of open files (its children inherit it).
fn fd_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct given.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    if rc == 0 {
        limit.rlim_max
    } else {
        4096
    }
}

/// `deploy/balancers/nginx.conf` in front of `replicas`, listening on `port`, its pid and
/// temporary files in `dir`; with [`Spread::RoundRobin`], without the `hash` line.
pub fn nginx_config(spread: Spread, port: u16, dir: &Path, replicas: &[Replica]) -> String {
    const FILE: &str = "nginx.conf";
    let dir = path_str(dir);
    let mut text = deploy_balancer(FILE);
    text = replace_in(
        &text,
        "listen 127.0.0.1:8080;",
        &format!("listen 127.0.0.1:{port};"),
        FILE,
    );
    text = replace_in(&text, "/tmp/mcpmux-nginx.pid", &format!("{dir}/nginx.pid"), FILE);
    text = replace_in(&text, "/tmp/mcpmux-nginx-", &format!("{dir}/temp-"), FILE);
    let servers: String = (replicas.iter())
        .map(|r| {
            format!(
                "        server 127.0.0.1:{} max_fails=1 fail_timeout=5s;\n",
                r.port
            )
        })
        .collect();
    let mut kept: Vec<&str> = Vec::new();
    let mut placed = false;
    for line in text.lines() {
        if line.trim_start().starts_with("server 127.0.0.1:808") {
            if !placed {
                kept.push(servers.trim_end());
                placed = true;
            }
            continue;
        }
        kept.push(line);
    }
    assert!(placed, "{FILE} has no `server 127.0.0.1:808N` lines");
    text = kept.join("\n") + "\n";
    if spread == Spread::RoundRobin {
        text = replace_in(&text, "        hash $http_mcp_session_id consistent;\n", "", FILE);
    }
    text
}

/// `show stat` of HAProxy's admin socket, as a table.
struct StatTable {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl StatTable {
    /// Column `column` of the server named `server` (backend `mcpmux`).
    fn field(&self, server: &str, column: &str) -> Option<String> {
        let at = self.header.iter().position(|h| h == column)?;
        let row = (self.rows.iter()).find(|r| {
            r.first().map(String::as_str) == Some("mcpmux") && r.get(1).map(String::as_str) == Some(server)
        })?;
        row.get(at).cloned()
    }
}

fn haproxy_stat(socket: &Path) -> Option<StatTable> {
    let mut stream = UnixStream::connect(socket).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(b"show stat\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let mut lines = text.lines();
    let header = lines
        .next()?
        .trim_start_matches("# ")
        .split(',')
        .map(str::to_string)
        .collect();
    let rows = lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    Some(StatTable { header, rows })
}

/// HAProxy's `status` of server `name` ("UP", "DOWN", "UP 1/2", …), if the socket answers.
fn haproxy_server_status(socket: &Path, name: &str) -> Option<String> {
    haproxy_stat(socket)?.field(name, "status")
}
