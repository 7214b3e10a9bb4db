//! The gateway's shared state, as the request pipeline sees it: configuration, the catalog, the
//! upstreams, the session registry, the modern calls parked for their retry, and the sealer.

use crate::catalog::CatalogStore;
use crate::config::{Config, ReadyWhen, UpstreamId};
use crate::core::input_required::ParkedCalls;
use crate::error::UpstreamError;
use crate::policy::rate_limit::RateLimiter;
use crate::policy::Policy;
use crate::protocol::ClientCaps;
use crate::seal::Sealer;
use crate::session::{HostTokens, Session, SessionIds, SessionRegistry, SessionState};
use crate::upstream::pool::SupervisorInputs;
use crate::upstream::ties::HostTies;
use crate::upstream::{UpstreamHandle, Upstreams};
use arc_swap::ArcSwap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Now, in seconds since the Unix epoch (0 for a clock before it).
pub fn unix_seconds() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map(|d| d.as_secs()).unwrap_or_default()
}

/// The client of `[cluster] store`, if set (a URL the client refuses is logged and leaves the
/// rate limits per replica).
fn shared_store(config: &Config) -> Option<Arc<crate::shared_store::SharedStore>> {
    let url = config.cluster.as_ref()?.store.as_ref()?;
    match crate::shared_store::SharedStore::new(url.expose()) {
        Ok(store) => Some(Arc::new(store)),
        Err(e) => {
            tracing::error!("{e}; rate limits are counted by each replica alone");
            None
        }
    }
}

/// Shared gateway state.
pub struct Hub {
    /// The configuration in force, swapped whole (a request reads the one it started with).
    config: ArcSwap<Config>,
    /// The merged catalog (the one the upstreams feed).
    pub catalog: Arc<CatalogStore>,
    pub sessions: Arc<SessionRegistry>,
    pub upstreams: Arc<Upstreams>,
    /// A stop was asked: `GET /readyz` answers 503 from now on (so balancers move new requests
    /// away), while the process still serves until `shutdown` fires.
    pub not_ready: CancellationToken,
    /// A stop began: no new session, stream or call starts, standalone streams end, in-flight
    /// calls may finish (hosts may still answer their server requests and cancel them).
    pub shutdown: CancellationToken,
    /// Every forwarded call while it runs (a stop waits for them to drain).
    pub calls: TaskTracker,
    /// Of `calls`, the requests relayed to another replica (`cluster::send`), for `/status`.
    pub relays: TaskTracker,
    /// The stop's drain time is over: calls still in flight end with an error now.
    pub drain_expired: CancellationToken,
    /// Modern hosts' calls waiting for their retry with input.
    pub parked: Arc<ParkedCalls>,
    /// What each principal may see and use (`[[policy]]`), swapped with the configuration.
    policy: ArcSwap<Policy>,
    /// Each principal's token buckets for the `rate_limit` of the rules that apply to it.
    pub rate_limits: RateLimiter,
    /// The replicas' shared store (`[cluster] store`, read at start: a reload does not change
    /// it): where rate limit buckets are taken from when it is set and answers.
    pub shared_store: Option<Arc<crate::shared_store::SharedStore>>,
    /// Who may use the gateway (`[auth]` in force: a reload that changes it replaces it); none
    /// authenticates nobody.
    pub auth: Arc<crate::auth::AuthInForce>,
    /// The audit log (`[audit]`, opened at start); `None` keeps none.
    pub audit: Option<Arc<crate::audit::AuditLog>>,
    /// Where upstream grants live (`[vault]`, opened at start by the composition root); `None`
    /// in hubs built without one (tests).
    pub vault: Option<crate::credentials::vault::Vault>,
    /// Starts the requests' spans (`[telemetry] otlp_endpoint`, read at start); `None`: traces off.
    pub tracer: Option<Arc<crate::telemetry::spans::Tracer>>,
    /// The latest failed host requests (the admin page's recent errors).
    pub recent_errors: Arc<crate::telemetry::recent::RecentErrors>,
    /// Seals what hosts carry (cursors, `requestState`) with the `[cluster]` key, read at start
    /// (a reload does not change keys); without `[cluster]`, with a key of this process's own.
    pub sealer: Arc<Sealer>,
    /// Issues and opens session-era session ids (sealed with `sealer`, homed here).
    pub session_ids: SessionIds,
    /// Seals the SSE event ids and server-to-client request ids sessions hand their hosts.
    tokens: Arc<HostTokens>,
    /// The configuration in force (when and from which file) and the last reload, for `/status`.
    pub config_status: parking_lot::Mutex<crate::status_doc::ConfigStatus>,
    /// Held by the reload running (one at a time).
    pub reloading: tokio::sync::Mutex<()>,
    ties: Arc<HostTies>,
    born: std::time::Instant,
}

impl Hub {
    /// Build the hub; returns what the supervisors start with. The upstreams stop on their own
    /// token (`upstreams.shutdown`), after the calls they serve have drained.
    pub fn new(
        config: Arc<Config>,
        shutdown: CancellationToken,
        audit: Option<Arc<crate::audit::AuditLog>>,
    ) -> (Arc<Hub>, SupervisorInputs) {
        let listen = config.gateway.listen;
        Hub::bound_to(config, shutdown, audit, listen, None)
    }

    /// [`Hub::new`] for a gateway whose endpoint is bound at `bound` (with `gateway.listen` on
    /// port 0, the port the system picked: the default `advertise` URL names it).
    pub fn bound_to(
        config: Arc<Config>,
        shutdown: CancellationToken,
        audit: Option<Arc<crate::audit::AuditLog>>,
        bound: std::net::SocketAddr,
        vault: Option<crate::credentials::vault::Vault>,
    ) -> (Arc<Hub>, SupervisorInputs) {
        let sessions = Arc::new(SessionRegistry::new());
        let ties = Arc::new(HostTies::new());
        let stop_upstreams = CancellationToken::new();
        let credentials = crate::credentials::Credentials::new(&config, vault.clone());
        let (upstreams, inputs) = Upstreams::new(
            &config,
            sessions.clone(),
            ties.clone(),
            stop_upstreams,
            credentials,
        );
        let sealer = Arc::new(match &config.cluster {
            Some(cluster) => Sealer::new(&cluster.key, &cluster.previous_keys),
            None => Sealer::random(),
        });
        let from_listen = format!("http://{}", config.gateway.listen);
        let advertise = match &config.cluster {
            Some(cluster) if cluster.advertise != from_listen => cluster.advertise.clone(),
            _ => format!("http://{bound}"),
        };
        sessions
            .views
            .bind(upstreams.catalog.clone(), config.profiles.clone());
        let parked = Arc::new(ParkedCalls::new(sealer.clone(), advertise.clone()));
        let session_ids = SessionIds::new(sealer.clone(), advertise);
        let tokens = Arc::new(HostTokens::new(sealer.clone()));
        let hub = Arc::new(Hub {
            catalog: upstreams.catalog.clone(),
            sessions,
            upstreams,
            not_ready: CancellationToken::new(),
            shutdown,
            calls: TaskTracker::new(),
            relays: TaskTracker::new(),
            drain_expired: CancellationToken::new(),
            parked,
            sealer,
            session_ids,
            tokens,
            auth: Arc::new(crate::auth::AuthInForce::new(
                crate::auth::Authenticator::from_config(&config),
            )),
            audit,
            vault,
            tracer: crate::telemetry::spans::Tracer::start(&config.telemetry),
            recent_errors: Default::default(),
            policy: ArcSwap::from_pointee(Policy::from_config(&config)),
            rate_limits: RateLimiter::default(),
            shared_store: shared_store(&config),
            ties,
            config_status: parking_lot::Mutex::new(crate::status_doc::ConfigStatus {
                loaded_at_unix: unix_seconds(),
                ..Default::default()
            }),
            reloading: tokio::sync::Mutex::new(()),
            born: std::time::Instant::now(),
            config: ArcSwap::new(config),
        });
        (hub, inputs)
    }

    /// The configuration in force.
    pub fn config(&self) -> arc_swap::Guard<Arc<Config>> {
        self.config.load()
    }

    /// The configuration in force, held (for what outlives a guard: a request's view).
    pub fn config_full(&self) -> Arc<Config> {
        self.config.load_full()
    }

    /// Put `config` in force for every request that starts from now on (gateway settings: page
    /// size, timeouts, limits); the upstreams are changed by id, by `Upstreams::reconcile`. The
    /// rate limit buckets of rules whose `rate_limit` changed start afresh; the others keep
    /// their state.
    pub fn replace_config(&self, config: Arc<Config>) {
        let policy = Policy::from_config(&config);
        (self.rate_limits).retain_rules(|rule| policy.rules().get(rule).and_then(|r| r.rate_limit));
        self.policy.store(Arc::new(policy));
        self.sessions.views.set_profiles(config.profiles.clone());
        self.config.store(config);
    }

    /// The catalog `principal` sees: everyone's, with its own lists of the upstreams whose
    /// connections are per principal.
    pub fn catalog_of(&self, principal: Option<&crate::auth::Principal>) -> Arc<crate::catalog::Catalog> {
        match principal {
            Some(p) if self.upstreams.any_personal() => self.catalog.snapshot_for(Some(&p.grant_principal())),
            _ => self.catalog.snapshot(),
        }
    }

    /// Open `principal`'s connections to the upstreams whose connections are per principal (those
    /// it has none to), waiting up to `wait` for their lists; its inbound token is noted first.
    pub async fn open_personal(&self, principal: Option<&crate::auth::Principal>, wait: Duration) {
        if let Some(principal) = principal.filter(|_| self.upstreams.any_personal()) {
            let name = principal.grant_principal();
            // What `token_exchange` exchanges and `forward` sends: its latest validated token.
            if let Some(token) = &principal.token {
                (self.upstreams.credentials).note_inbound(&name, token.expose(), token.expires_at());
            }
            let policy = self.policy();
            let view = policy.for_principal(&crate::core::access::facts(principal));
            let may = |slot: &crate::upstream::UpstreamSlot| {
                let (tools, resources) = (slot.naming.expose_name(""), slot.naming.expose_uri(""));
                view.may_allow_under(&[&tools, &resources])
            };
            self.upstreams.open_personal(&name, may, wait).await;
        }
    }

    /// The catalog the request's principal sees ([`Hub::catalog_of`]).
    pub fn catalog_for(&self, ctx: &crate::core::context::RequestCtx) -> Arc<crate::catalog::Catalog> {
        self.catalog_of(ctx.principal.as_deref())
    }

    /// The policy in force (a removed `allow` takes effect on the next request).
    pub fn policy(&self) -> Arc<Policy> {
        self.policy.load_full()
    }

    /// A new host session (not yet registered).
    pub fn new_session(&self, id: String, protocol_version: String, caps: ClientCaps) -> Arc<Session> {
        self.open_session(id, SessionState::new(protocol_version, caps))
    }

    /// A host session with `state` (not yet registered).
    pub fn open_session(&self, id: String, state: SessionState) -> Arc<Session> {
        Session::restore(id, state, self.ties.clone(), self.tokens.clone())
    }

    /// Wait (bounded) until every upstream finished its first start attempt.
    pub async fn wait_startup(&self) {
        self.upstreams.wait_startup().await
    }

    /// Whether every upstream finished its first start attempt.
    pub fn started_all(&self) -> bool {
        self.upstreams.started_all()
    }

    /// Whether the upstreams are ready by `gateway.ready_when` (what `/readyz` answers before a
    /// stop), and how many of how many are.
    pub fn upstreams_ready(&self) -> (bool, usize, usize) {
        let total = self.upstreams.len();
        // One waiting for a person to sign in is as ready as it can be without one.
        let ready = (self.upstreams.iter())
            .filter(|slot| {
                use crate::status_doc::Phase;
                matches!(
                    slot.state.report().phase,
                    Phase::Ready | Phase::NeedsAuthorization
                )
            })
            .count();
        let is_ready = match self.config().gateway.ready_when {
            ReadyWhen::All => ready == total,
            ReadyWhen::Any => ready > 0 || total == 0,
            ReadyWhen::Attempted => self.started_all(),
        };
        (is_ready, ready, total)
    }

    /// How long the gateway has been running.
    pub fn uptime(&self) -> Duration {
        self.born.elapsed()
    }

    /// The connection that serves `session` for upstream `index`.
    pub async fn connection_for(
        &self,
        upstream: &UpstreamId,
        session: &Arc<Session>,
    ) -> Result<UpstreamHandle, UpstreamError> {
        let principal = session.viewer().and_then(|v| v.grant_principal());
        (self.upstreams)
            .connection_for(upstream, (&session.link(), principal.as_deref()))
            .await
    }
}
