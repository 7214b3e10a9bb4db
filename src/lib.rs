//! mcpmux: one Streamable HTTP MCP endpoint in front of many upstream MCP servers.
//! [`run`] serves a [`Config`] until a shutdown token fires; [`start`] returns a running gateway.
//!
//! The map (dependencies point down; no module imports one above it):
//!
//! ```text
//!  lib.rs        composition root: start/run/stop, the listeners (main, `admin_listen`), the
//!                tower layer stack; reload (SIGHUP)
//!  http, admin   host faces (Streamable HTTP both eras, legacy SSE, listen) | operator endpoints
//!  edge          the listeners: binding (a taken port names a free one), TLS, HTTP/1.1 and
//!                HTTP/2, TCP_NODELAY, each connection's peer, the graceful close
//!  cluster       several replicas as one: forwarding a request to the replica holding its
//!                session or parked call, replica passports (tower layers around the faces)
//!  middleware    tower layers: Host/Origin access check, request tracing
//!  auth          who a bearer credential names (API keys, JWTs by JWKS), the AuthLayer,
//!                protected resource metadata, WWW-Authenticate challenges
//!  core          one pipeline for both eras: RequestCtx, methods/ (one file per method),
//!                forwarded calls, era bridges, rate limits at admission, the hub (shared state)
//!  session       host sessions (HostLink), registry (HostEvents), kept streams, listeners
//!  audit         the hash-chained audit log (`[audit]`): its writer thread, `audit verify`,
//!                request trace ids (beside session and auth)
//!  upstream      connection actors, handles, supervisors, the pool; HostLink/HostEvents traits,
//!                server-to-client routes, attribution rule, per-session connections
//!  catalog       merged lists behind an atomic swap, URIs, cursors, pages
//!  policy        per-principal decisions over exposed names and URIs (`[[policy]]`), explain,
//!                the rate limit token buckets
//!  telemetry     metrics (names in one module, Prometheus text), the access log, traces (span
//!                names, W3C trace context, the OTLP exporter): a sink anything may call
//!  credentials   outbound identity: per upstream a provider of the header for a principal's
//!                next request (OAuth client, token exchange, client credentials), the vault
//!  pinning       pinned tool definitions: the lock file (RFC 8785 hashes, atomic writes), the
//!                pin book (first sight, drifts, approvals) the catalog's pin stage keeps
//!  config        the TOML file, interpolation, upstream ids, validation on typed values
//!  import        the clients' mcpServers JSON files (Claude Desktop, Claude Code, Cursor, VS Code)
//!                read into servers, and `mcpmux import` (pure parser; no config types)
//!  protocol      the pure codec and MCP vocabulary (no I/O)
//!  tls           certificates and keys from PEM files (problems name the file), the
//!                listeners' rustls configuration kept current as its files rotate, the name a
//!                client certificate gives its holder
//!  seal          cluster keys and the sealer: what hosts carry (session ids, cursors,
//!                requestState, event ids, server request ids) and replica passports, encrypted
//!                and authenticated so any replica with the key opens it (no I/O)
//! ```
//!
//! A host's `tools/call` goes http → core → upstream and its events come back to core through
//! the call's channel; `upstream` reaches a host only through the traits it owns.

pub mod admin;
#[cfg(test)]
mod architecture_tests;
pub mod audit;
pub mod auth;
pub mod catalog;
pub mod cluster;
pub mod config;
pub mod core;
pub mod credentials;
pub mod edge;
pub mod error;
pub mod grants_command;
pub mod http;
pub mod import;
pub mod login_command;
pub mod middleware;
pub mod pinning;
pub mod pins_command;
pub mod policy;
pub mod protocol;
pub mod reload;
pub mod reload_command;
pub mod seal;
pub mod session;
pub mod shared_store;
pub mod status_command;
pub mod status_doc;
pub mod telemetry;
pub mod tls;
pub mod upstream;
pub mod util;

pub use config::Config;
pub use error::GatewayError;

use crate::core::hub::Hub;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long upstreams may take to stop (their own grace periods run inside this).
const UPSTREAM_STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Once the calls are over (finished, or answered with an error at the drain deadline), how long
/// their last answers get to reach their hosts before the remaining connections are dropped.
const ANSWER_GRACE: Duration = Duration::from_secs(2);
/// With `[cluster]`, how long a stopping replica keeps its listener open after its calls drained,
/// answering that it is stopping (so the replicas forwarding to it learn and stop).
const PEER_NOTICE: Duration = Duration::from_secs(1);
/// How long a stop waits for the audit log's queued lines to be written.
const AUDIT_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a stop waits for the ended spans to reach the collector.
const TRACE_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// A running gateway.
pub struct Gateway {
    addr: SocketAddr,
    /// Where the operator endpoints are served, when `gateway.admin_listen` moves them.
    admin_addr: Option<SocketAddr>,
    hub: Arc<Hub>,
    server: JoinHandle<std::io::Result<()>>,
    admin_server: Option<JoinHandle<std::io::Result<()>>>,
    /// Closes the listener and lets open connections finish their current response.
    close_listener: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    reloads: Option<tokio::sync::mpsc::Receiver<admin::reload::ReloadRequest>>,
}

impl Gateway {
    /// The address the endpoint listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address of the operator listener (`gateway.admin_listen`), if there is one.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// Spans dropped so far (the export queue was full or the collector did not take them);
    /// `None` while traces are off (no `telemetry.otlp_endpoint`).
    pub fn dropped_spans(&self) -> Option<u64> {
        self.hub.tracer.as_ref().map(|tracer| tracer.dropped())
    }

    /// The endpoint URL.
    pub fn url(&self) -> String {
        let gateway = &self.hub.config().gateway;
        format!("{}://{}{}", gateway.scheme(), self.addr, gateway.path)
    }

    /// Put a re-read configuration in force (see [`reload`]); `/status` shows the outcome.
    pub async fn reload(&self, config: Config) -> Result<reload::Reloaded, String> {
        let result = reload::apply(&self.hub, config).await;
        reload::record(&self.hub, &result, None);
        result
    }

    /// Re-read the configuration file at `path` and put it in force (see [`reload`]); a file
    /// that does not load changes nothing. `/status` shows the outcome and the file's digest.
    pub async fn reload_file(&self, path: &std::path::Path) -> Result<reload::Reloaded, String> {
        reload::reload_file(&self.hub, path).await
    }

    /// Put a configuration loaded from the file with `digest` (or why it did not load) in force,
    /// as [`Gateway::reload_file`] does once the file is read.
    pub async fn reload_loaded(
        &self,
        loaded: Result<Config, String>,
        digest: Option<String>,
    ) -> Result<reload::Reloaded, String> {
        reload::reload_loaded(&self.hub, loaded, digest).await
    }

    /// Say which file the configuration in force was read from (its digest is shown by `/status`).
    pub fn loaded_from(&self, path: &std::path::Path) {
        self.hub.config_status.lock().digest = reload::file_digest(path);
    }

    /// The reloads asked with `POST /reload` (once; until taken, such a request waits): the
    /// caller reloads and answers each.
    pub fn take_reload_requests(
        &mut self,
    ) -> Option<tokio::sync::mpsc::Receiver<admin::reload::ReloadRequest>> {
        self.reloads.take()
    }

    /// A token that ends the drain of a [`Gateway::stop`] early (an operator's second signal):
    /// the calls still in flight are answered with the drain error at once.
    pub fn drain_cutter(&self) -> CancellationToken {
        self.hub.drain_expired.clone()
    }

    /// What a [`Gateway::stop`] begun now would wait for, to tell an operator.
    pub fn stop_outlook(&self) -> StopOutlook {
        let gateway = &self.hub.config().gateway;
        StopOutlook {
            in_flight: self.hub.calls.len(),
            shutdown_delay: gateway.shutdown_delay,
            drain_timeout: gateway.drain_timeout,
        }
    }

    /// Stop gracefully: `/readyz` answers 503 at once (and, for `gateway.shutdown_delay_secs`,
    /// everything else is still served, so a balancer checking it moves away first); then refuse
    /// new sessions, streams and calls, end standalone streams, let in-flight calls (and their
    /// response streams; hosts may still answer their server requests) finish within
    /// `gateway.drain_timeout_secs`, answer those still running then with an error, close the
    /// listener, end sessions, and only then stop every upstream (no child process survives).
    pub async fn stop(self) {
        self.hub.not_ready.cancel();
        let delay = self.hub.config().gateway.shutdown_delay;
        if !delay.is_zero() {
            tracing::info!(
                shutdown_delay_secs = delay.as_secs(),
                "stopping: /readyz answers 503; still serving until the shutdown delay is over"
            );
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = self.hub.drain_expired.cancelled() => {}
            }
        }
        let drain = self.hub.config().gateway.drain_timeout;
        tracing::info!(
            drain_timeout_secs = drain.as_secs(),
            in_flight = self.hub.calls.len(),
            "shutting down: refusing new sessions and calls, letting in-flight calls finish"
        );
        self.hub.shutdown.cancel();
        self.hub.calls.close();
        let drained = tokio::select! {
            waited = tokio::time::timeout(drain, self.hub.calls.wait()) => waited.is_ok(),
            _ = self.hub.drain_expired.cancelled() => false,
        };
        if !drained {
            tracing::warn!(
                drain_timeout_secs = drain.as_secs(),
                in_flight = self.hub.calls.len(),
                "calls still in flight at the end of the drain; answering them with an error"
            );
            self.hub.drain_expired.cancel();
        }
        if self.hub.config().cluster.is_some() {
            // Other replicas forward this one's sessions here until an answer says it is
            // stopping: for a moment more each gets that answer (and takes the session over)
            // rather than a connection closed under its request.
            tokio::select! {
                _ = tokio::time::sleep(PEER_NOTICE) => {}
                _ = self.hub.drain_expired.cancelled() => {}
            }
        }
        // The calls are over: their last answers go out, then every connection closes.
        self.close_listener.cancel();
        let servers = std::iter::once(self.server).chain(self.admin_server);
        for mut server in servers {
            if tokio::time::timeout(ANSWER_GRACE, &mut server).await.is_err() {
                tracing::warn!("connections still open; closing them");
                server.abort();
            }
        }
        self.hub.sessions.close_all();
        self.hub.upstreams.shutdown.cancel();
        let stopping = self.hub.upstreams.all_connections();
        for handle in &stopping {
            handle.shutdown();
        }
        let all_closed = futures_util::future::join_all(stopping.iter().map(|h| h.closed()));
        if tokio::time::timeout(UPSTREAM_STOP_TIMEOUT, all_closed)
            .await
            .is_err()
        {
            tracing::warn!("some upstreams did not stop in time");
        }
        let supervisors = &self.hub.upstreams.supervisors;
        supervisors.close();
        if tokio::time::timeout(UPSTREAM_STOP_TIMEOUT, supervisors.wait())
            .await
            .is_err()
        {
            tracing::warn!("a supervisor did not stop in time");
        }
        for task in self.tasks {
            if tokio::time::timeout(UPSTREAM_STOP_TIMEOUT, task).await.is_err() {
                tracing::warn!("a task did not stop in time");
            }
        }
        // Every call has ended (and recorded how): what is queued for the audit log goes out.
        if let Some(audit) = &self.hub.audit {
            if !audit.flush(AUDIT_FLUSH_TIMEOUT).await {
                tracing::warn!("the audit log did not finish writing in time");
            }
        }
        if let Some(tracer) = &self.hub.tracer {
            if !tracer.flush(TRACE_FLUSH_TIMEOUT).await {
                tracing::warn!("the last spans did not reach the collector in time");
            }
        }
        tracing::info!("stopped");
    }
}

/// What a stop will wait for: the shutdown delay (still serving), then the calls in flight, for
/// at most the drain timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopOutlook {
    /// Calls running now.
    pub in_flight: usize,
    /// `gateway.shutdown_delay_secs` in force.
    pub shutdown_delay: Duration,
    /// `gateway.drain_timeout_secs` in force.
    pub drain_timeout: Duration,
}

/// Where the catalog's pin stage reports a drift: `mcpmux_tool_drift_total{server}` and a
/// `"event": "tool_drift"` audit line.
fn drift_sink(audit: Option<Arc<audit::AuditLog>>) -> catalog::DriftSink {
    Arc::new(move |drift: &pinning::Drift| {
        telemetry::record::tool_drift(&drift.server);
        if let Some(audit) = &audit {
            audit.record(audit::record::Event {
                time: audit::record::now_rfc3339(),
                event: audit::record::Kind::ToolDrift,
                trace_id: audit::trace_id::generate(),
                method: "tools/list".into(),
                upstream: Some(drift.server.clone()),
                original: Some(drift.tool.clone()),
                reason: Some(format!(
                    "changed since pinned: {} (sha256 {} -> {})",
                    drift.members(),
                    drift.pinned.sha256,
                    drift.current.sha256
                )),
                ..Default::default()
            });
        }
    })
}

/// Bind the endpoint, start every upstream, and return the running gateway.
pub async fn start(config: Config) -> Result<Gateway, GatewayError> {
    let config = Arc::new(config);
    let (tls, admin_tls) = edge::listener_tls(&config)?;
    let (listener, addr) = edge::bind(config.gateway.listen, "listen").await?;
    let admin = match config.gateway.admin_listen {
        Some(at) => Some(edge::bind(at, "admin_listen").await?),
        None => None,
    };
    let shutdown = CancellationToken::new();
    let audit = match &config.audit {
        Some(audit) => Some(audit::AuditLog::open(audit).map_err(GatewayError::Audit)?),
        None => None,
    };
    // Opening reads the key file only; nothing is written before the first grant.
    let vault =
        credentials::vault::Vault::open(&config.vault).map_err(|e| GatewayError::Vault(e.to_string()))?;
    let (hub, inputs) = Hub::bound_to(config.clone(), shutdown.clone(), audit, addr, Some(vault));
    // Before any list arrives: the lock is read (a corrupt one stops the start).
    let pinning = &config.pinning;
    (hub.catalog)
        .install_pinning(pinning.mode, &pinning.path, drift_sink(hub.audit.clone()))
        .map_err(|e| GatewayError::Pinning(e.to_string()))?;
    match &config.cluster {
        Some(cluster) => tracing::info!(
            key_id = %hub.sealer.key_id(),
            previous_keys = cluster.previous_keys.len(),
            advertise = %hub.session_ids.home().url,
            "sealing with the [cluster] key: replicas with the same key id open each other's cursors and requestState"
        ),
        None => tracing::info!(
            "no [cluster]: sealing with a key of this process's own (its cursors and requestState open only here)"
        ),
    }
    let mut tasks = Vec::new();
    telemetry::install();
    tasks.push(tokio::spawn(telemetry::upkeep(shutdown.clone())));
    hub.upstreams.supervise(inputs);
    tasks.push(tokio::spawn(reap_sessions(hub.clone())));
    // `POST /reload` on the admin listener, or on a main listener open to local processes anyway
    // (loopback, and no `[auth]` in force when the request comes: a reload may add it).
    let (reload_tx, reloads) = tokio::sync::mpsc::channel(4);
    let reload_allowed: admin::reload::Allowed = if admin.is_some() {
        Arc::new(|| true)
    } else if config.gateway.listen.ip().is_loopback() {
        let auth = hub.auth.clone();
        Arc::new(move || !auth.is_on())
    } else {
        Arc::new(|| false)
    };
    let (faces, operator) = routes(
        &hub,
        admin.as_ref().map(|(_, at)| *at),
        (reload_tx, reload_allowed),
    );
    let close_listener = CancellationToken::new();
    let http2 = config.gateway.http2;
    for watched in tls.iter().chain(admin_tls.iter()) {
        tasks.push(tokio::spawn(watched.clone().watch(close_listener.clone())));
    }
    let scheme = config.gateway.scheme();
    let (server, admin_server, admin_addr) = match admin {
        Some((admin, admin_addr)) => {
            if !admin_addr.ip().is_loopback() {
                tracing::warn!(
                    %admin_addr,
                    "gateway.admin_listen accepts connections from other machines: /status, /healthz, \
                     /readyz, /metrics and /admin are not behind [auth]; keep it on a private network"
                );
            }
            tracing::info!(url = %format!("{scheme}://{admin_addr}{}", admin::status::STATUS_PATH), "operator endpoints listening");
            let admin_server = edge::serve(admin, operator, &close_listener, http2, admin_tls);
            (
                edge::serve(listener, faces, &close_listener, http2, tls.clone()),
                Some(admin_server),
                Some(admin_addr),
            )
        }
        None => (
            edge::serve(
                listener,
                faces.merge(operator),
                &close_listener,
                http2,
                tls.clone(),
            ),
            None,
            None,
        ),
    };
    tracing::info!(url = %format!("{scheme}://{addr}{}", config.gateway.path), servers = config.servers.len(), "mcpmux listening");
    Ok(Gateway {
        addr,
        admin_addr,
        hub,
        server,
        admin_server,
        close_listener,
        tasks,
        reloads: Some(reloads),
    })
}

/// The host faces and the operator endpoints, each behind its layers: tracing, then the
/// Host/Origin check (a refusal is a JSON-RPC error on the MCP faces, plain text on the others),
/// then, on the MCP faces with `[cluster]`, the passport of a request another replica forwarded,
/// with `[auth]`, authentication, and with `[cluster]`, forwarding to a session's home replica;
/// the protected resource metadata is
/// public (it is how a host learns where to get a token). The operator endpoints are never
/// behind `[auth]` (probes and monitoring have no token): on the main listener, or, with
/// `gateway.admin_listen` (bound at `admin`), on that listener only, with its own Host rule;
/// `/metrics` among them has the operator rule of `admin::access`.
fn routes(
    hub: &Arc<Hub>,
    admin: Option<SocketAddr>,
    reloads: (
        tokio::sync::mpsc::Sender<admin::reload::ReloadRequest>,
        admin::reload::Allowed,
    ),
) -> (axum::Router, axum::Router) {
    use middleware::access::{AccessLayer, RefusalBody};
    let config = hub.config();
    let access = access_in_force(hub, middleware::origin::AccessPolicy::from_config);
    let forward = config.cluster.is_some().then(|| {
        let peers = Arc::new(cluster::Peers::new(
            hub.sealer.clone(),
            hub.session_ids.home().url.clone(),
            config.gateway.tls.as_ref(),
        ));
        cluster::send::ForwardLayer::new(hub.clone(), peers)
    });
    // Always in place: `[auth]` is read per request, so a reload may add, change or remove it.
    let profiles = profile_resources(hub);
    let layer = auth::layer::AuthLayer::in_force(hub.auth.clone());
    // One `layer` call for the three: each call wraps every route once more (a future and a
    // service per request and layer).
    let faces = http::router(hub.clone())
        .layer(
            tower::ServiceBuilder::new()
                .layer(layer.with_profiles(profiles.clone(), unserved_paths(hub)))
                .option_layer(forward)
                .layer(axum::extract::DefaultBodyLimit::max(
                    config.gateway.max_body_bytes,
                )),
        )
        .merge(auth::metadata::router(&config, &hub.auth, profiles))
        // The redirect URI of upstream sign-ins and mcpmux's client metadata: a browser comes
        // back without a bearer token; the sign-in's single-use state admits it.
        .merge(http::oauth_callback::router(hub.upstreams.credentials.clone()));
    let passport = (config.cluster.is_some()).then(|| cluster::receive::PassportLayer::new(hub.clone()));
    let faces = faces.layer(
        tower::ServiceBuilder::new()
            .layer(middleware::closing::CloseWhenStopping::new(hub.not_ready.clone()))
            .layer(middleware::trace::layer())
            .layer(AccessLayer::in_force(access.clone(), RefusalBody::JsonRpc))
            .option_layer(passport),
    );
    let operator_access = match admin {
        Some(at) => access_in_force(hub, move |gateway| {
            middleware::origin::AccessPolicy::for_admin(gateway, at)
        }),
        None => access,
    };
    // What shows the gateway's activity (`/metrics`, the admin page): open on `admin_listen` or
    // without `[auth]`, else for a principal `[[policy]]` allows `mcpmux:admin` (`admin::access`).
    let watching = (admin::metrics::router(hub.clone()))
        .merge(admin::page::router(hub.clone()))
        .merge(admin::pins::router(hub, &config.gateway.path));
    let watching = admin::access::guard(watching, hub, admin.is_some());
    let grants = admin::grants::router(hub, reloads.1.clone(), &config.gateway.path);
    let operator = (admin::router(hub.clone()))
        .merge(admin::sign_in::router(hub.clone(), reloads.1.clone()))
        .merge(admin::reload::router(reloads, &config.gateway.path))
        .merge(grants)
        .merge(watching)
        .layer(AccessLayer::in_force(operator_access, RefusalBody::PlainText));
    (faces, operator)
}

/// The Host/Origin rules `make` derives from the configuration in force (`allowed_hosts`,
/// `allowed_origins`), made again only when a reload swapped the configuration.
fn access_in_force(
    hub: &Arc<Hub>,
    make: impl Fn(&config::GatewayConfig) -> middleware::origin::AccessPolicy + Send + Sync + 'static,
) -> middleware::access::PolicySource {
    let first = hub.config_full();
    let made = arc_swap::ArcSwap::from_pointee((first.clone(), Arc::new(make(&first.gateway))));
    let hub = Arc::downgrade(hub);
    Arc::new(move || {
        let last = made.load();
        let Some(hub) = hub.upgrade() else {
            return last.1.clone();
        };
        let config = hub.config();
        if Arc::ptr_eq(&last.0, &config) {
            return last.1.clone();
        }
        let policy = Arc::new(make(&config.gateway));
        made.store(Arc::new((Arc::clone(&config), policy.clone())));
        policy
    })
}

/// The resource URL of the profile (in force) a request path belongs to.
fn profile_resources(hub: &Arc<Hub>) -> auth::metadata::ProfileResources {
    let hub = Arc::downgrade(hub);
    Arc::new(move |path: &str| {
        let hub = hub.upgrade()?;
        let config = hub.config();
        let (profile, _) = config.profile_at(path)?;
        Some(config::resource_url(&config.gateway, &profile.path))
    })
}

/// Whether no host face is served at a request path: not the MCP path, not its legacy SSE
/// paths, not a profile's (in force).
fn unserved_paths(hub: &Arc<Hub>) -> auth::layer::UnservedPaths {
    let hub = Arc::downgrade(hub);
    Arc::new(move |path: &str| {
        let Some(hub) = hub.upgrade() else {
            return false;
        };
        let config = hub.config();
        // The MCP path first: a host's every request asks this, and it costs one comparison.
        if path == config.gateway.path || config.profile_at(path).is_some() {
            return false;
        }
        let (sse, message) = config::legacy_paths(&config.gateway.path);
        path != sse && path != message
    })
}

/// Serve until `shutdown` fires, then stop gracefully.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), GatewayError> {
    let gateway = start(config).await?;
    shutdown.cancelled().await;
    gateway.stop().await;
    Ok(())
}

/// End sessions idle longer than `gateway.session_idle_timeout` (read each round: a reload
/// changes it).
async fn reap_sessions(hub: Arc<Hub>) {
    loop {
        let idle = hub.config().gateway.session_idle_timeout;
        let every = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
        tokio::select! {
            _ = tokio::time::sleep(every) => { hub.sessions.reap(idle); }
            _ = hub.shutdown.cancelled() => return,
        }
    }
}
