//! How a connection actor opens and keeps a `url` upstream that may speak legacy HTTP+SSE: the
//! transport the config asks for, the spec's fallback from Streamable HTTP (an `initialize`
//! refused with 400, 404 or 405, then a GET whose first event is `endpoint`), and reconnecting
//! with backoff when a legacy stream is lost (no resumption exists: initialize again).

use super::connection::{Actor, ConnectionContext, ConnectionEvent, Inbound, Transport};
use super::http::HttpTransport;
use super::http_endpoint::{Endpoint, Failure};
use super::legacy_sse::LegacySseTransport;
use super::opening::timed_out;
use super::{Command, ServerFacts, Status};
use crate::catalog::ListKind;
use crate::config::{HttpMode, TransportConfig};
use crate::error::UpstreamError;
use crate::util::Backoff;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Backoff between reconnection attempts after a legacy stream is lost.
const RECONNECT_MIN: Duration = Duration::from_millis(250);
const RECONNECT_MAX: Duration = Duration::from_secs(8);
/// Attempts before the connection is given up (its supervisor then restarts it).
const RECONNECT_ATTEMPTS: u32 = 8;

/// The transport of a `url` server: legacy HTTP+SSE when configured, else Streamable HTTP
/// (which [`Actor::open_http`] may still swap for legacy SSE).
pub(super) fn http_transport(
    name: Arc<str>,
    ctx: &ConnectionContext,
    inbound: mpsc::Sender<Inbound>,
) -> Result<Transport, UpstreamError> {
    let TransportConfig::Http { mode, .. } = &ctx.server.transport else {
        return Err(UpstreamError::unavailable(name.to_string(), "not a url server"));
    };
    let max = ctx.tunables.load().max_line_bytes;
    let endpoint = endpoint_of(&name, ctx)?;
    Ok(match mode {
        HttpMode::LegacySse => {
            Transport::LegacySse(Box::new(LegacySseTransport::new(name, endpoint, max, inbound)?))
        }
        HttpMode::Auto | HttpMode::StreamableHttp => {
            Transport::Http(Box::new(HttpTransport::new(name, endpoint, max, inbound)?))
        }
    })
}

/// The endpoint of the `url` server `name`: its URL, configured headers, identity and `tls`
/// (its own clients, with the files read now).
fn endpoint_of(name: &str, ctx: &ConnectionContext) -> Result<Endpoint, UpstreamError> {
    let TransportConfig::Http {
        url, headers, tls, ..
    } = &ctx.server.transport
    else {
        return Err(UpstreamError::unavailable(name.to_string(), "not a url server"));
    };
    Endpoint::for_upstream(name, url, headers, ctx.bearer.clone(), tls.as_ref())
}

impl Actor {
    /// Open an HTTP upstream: Streamable HTTP (a `server/discover` probe when `probe`, else
    /// or then a session); in auto mode an `initialize` refused with 400, 404 or 405 sends
    /// mcpmux to legacy HTTP+SSE on the same URL, for the rest of this connection.
    pub(super) async fn open_http(
        &mut self,
        transport: &mut Transport,
        inbound: &mut mpsc::Receiver<Inbound>,
        probe: bool,
    ) -> Result<ServerFacts, String> {
        match transport {
            Transport::Http(t) => {
                let probe_id = probe.then(|| self.handle.next_id());
                let refusal = match t.establish(probe_id, self.handle.next_id()).await {
                    Ok(facts) => return Ok(facts),
                    Err(err) if self.auto_detects() && err.suggests_legacy_sse() => err,
                    Err(err) => return Err(err.to_string()),
                };
                let status = refusal.refused_with.map_or(0, |s| s.as_u16());
                tracing::info!(upstream = %self.name(), status, "initialize refused; trying legacy HTTP+SSE");
                let max = self.ctx.tunables.load().max_line_bytes;
                let name = self.handle.name();
                let endpoint = endpoint_of(name, &self.ctx).map_err(|e| e.detail())?;
                let mut legacy = LegacySseTransport::new(name.into(), endpoint, max, t.inbound())
                    .map_err(|e| e.detail())?;
                legacy
                    .connect()
                    .await
                    .map_err(|why| format!("{refusal}; no legacy SSE stream either: {why}"))?;
                let legacy = Transport::LegacySse(Box::new(legacy));
                if let Transport::Http(old) = std::mem::replace(transport, legacy) {
                    old.stop().await;
                }
                tracing::info!(upstream = %self.name(), "upstream speaks legacy HTTP+SSE");
            }
            Transport::LegacySse(t) => t.connect().await?,
            _ => return Err("not an HTTP upstream".into()),
        }
        self.handshake(transport, inbound, None).await
    }

    fn auto_detects(&self) -> bool {
        matches!(
            self.ctx.server.transport,
            TransportConfig::Http {
                mode: HttpMode::Auto,
                ..
            }
        )
    }

    /// A transport reported `Closed`: for a legacy SSE upstream, fail every pending request at
    /// once, then reconnect with backoff and initialize again (calls arriving meanwhile fail
    /// fast). `Err` is why the connection ends: at once for other transports, when the server
    /// cannot be reached at all (its supervisor takes it down and restarts it with backoff), when
    /// the attempts run out, or when `stop` fires.
    pub(super) async fn reconnect_legacy(
        &mut self,
        transport: &mut Transport,
        inbound: &mut mpsc::Receiver<Inbound>,
        commands: &mut mpsc::Receiver<Command>,
        reason: String,
        stop: &CancellationToken,
    ) -> Result<(), String> {
        if !matches!(transport, Transport::LegacySse(_)) {
            return Err(reason);
        }
        tracing::warn!(upstream = %self.name(), %reason, "legacy SSE stream lost; reconnecting");
        self.fail_all(&reason);
        let mut backoff = Backoff::new(RECONNECT_MIN, RECONNECT_MAX);
        let mut last = reason;
        let limit = self.ctx.tunables.load().handshake_timeout;
        for _ in 0..RECONNECT_ATTEMPTS {
            let Transport::LegacySse(t) = transport else {
                return Err(last);
            };
            let connected = {
                let delay = backoff.next_delay();
                let attempt = async {
                    tokio::time::sleep(delay).await;
                    match tokio::time::timeout(limit, t.connect()).await {
                        Ok(connected) => connected,
                        Err(_) => Err(Failure::from(timed_out(limit))),
                    }
                };
                tokio::pin!(attempt);
                loop {
                    tokio::select! {
                        r = &mut attempt => break r,
                        Some(cmd) = commands.recv() => match cmd {
                            Command::Abandon(why) => return Err(why),
                            cmd => self.refuse(cmd, &last),
                        },
                        _ = stop.cancelled() => return Err("stopped".into()),
                    }
                }
            };
            let opened = match connected {
                Ok(()) => tokio::select! {
                    r = tokio::time::timeout(limit, self.handshake(transport, inbound, None)) => {
                        r.unwrap_or_else(|_| Err(timed_out(limit))).map_err(Failure::from)
                    }
                    _ = stop.cancelled() => return Err("stopped".into()),
                },
                Err(failure) => Err(failure),
            };
            match opened {
                Ok(facts) => {
                    tracing::info!(upstream = %self.name(), "legacy SSE upstream reconnected");
                    self.reopened(facts);
                    return Ok(());
                }
                Err(failure) => {
                    // Nothing serves the address: the server is gone, not just its stream.
                    if let Transport::LegacySse(t) = transport {
                        if t.is_gone(failure.gone).await {
                            return Err(failure.reason);
                        }
                    }
                    tracing::debug!(upstream = %self.name(), why = %failure, "legacy SSE reconnect failed");
                    last = failure.reason;
                }
            }
        }
        Err(format!("reconnecting failed: {last}"))
    }

    /// A call arriving while the stream is being reopened fails at once.
    fn refuse(&mut self, cmd: Command, reason: &str) {
        if let Command::Call(call) = cmd {
            let error =
                UpstreamError::unavailable(self.name().to_string(), format!("reconnecting after: {reason}"));
            self.fail_origin(call.origin, error);
        }
    }

    /// Ready again after a reconnect: new facts, and every list fetched anew (the server may
    /// have restarted with other tools).
    fn reopened(&mut self, facts: ServerFacts) {
        let kinds: Vec<ListKind> = ListKind::ALL
            .into_iter()
            .filter(|k| facts.has(k.capability()))
            .collect();
        self.status.send_replace(Status::Ready(Arc::new(facts)));
        for kind in kinds {
            let event = ConnectionEvent::ListChanged {
                kind,
                via: self.handle.clone(),
            };
            if self.ctx.events.try_send(event).is_err() {
                tracing::debug!(upstream = %self.name(), "list refresh already queued");
            }
        }
    }
}
