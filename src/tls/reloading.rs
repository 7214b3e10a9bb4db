//! The listeners' TLS configuration kept current: its files are looked at every few seconds
//! (their size, modification time and the file a symbolic link leads to, so cert-manager's
//! rewrite and Kubernetes' `..data` link swap are both seen), and when one changed the whole
//! configuration is read again. New connections get the new certificate; open ones keep theirs.
//! A file that cannot be used keeps the previous configuration, and a log line names the file
//! and the reason; it is read again when it changes again.

use super::files::FileProblem;
use super::server::{server_config, ServerFiles, ServerOptions};
use arc_swap::ArcSwap;
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// How often the files are looked at.
pub const CHECK_EVERY: Duration = Duration::from_secs(2);

/// What is known of a file without reading it: where its links lead, its size and its time.
type Stamp = Option<(PathBuf, u64, Option<SystemTime>)>;

fn stamps(files: &ServerFiles) -> Vec<Stamp> {
    (files.paths())
        .map(|path| {
            let target = std::fs::canonicalize(path).ok()?;
            let meta = std::fs::metadata(&target).ok()?;
            Some((target, meta.len(), meta.modified().ok()))
        })
        .collect()
}

/// The listener's TLS configuration, as of the last good read of its files.
pub struct ServerTls {
    files: ServerFiles,
    options: ServerOptions,
    current: ArcSwap<rustls::ServerConfig>,
    seen: Mutex<Vec<Stamp>>,
}

impl ServerTls {
    /// Read and check every file now (a problem here stops the start).
    pub fn load(files: ServerFiles, options: ServerOptions) -> Result<Arc<ServerTls>, FileProblem> {
        let seen = stamps(&files);
        let config = server_config(&files, options)?;
        Ok(Arc::new(ServerTls {
            files,
            options,
            current: ArcSwap::from_pointee(config),
            seen: Mutex::new(seen),
        }))
    }

    /// The CAs client certificates must chain to (`client_ca`), if any.
    pub fn client_ca(&self) -> Option<&std::path::Path> {
        self.files.client_ca.as_deref()
    }

    /// The configuration for the next connection.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.current.load_full())
    }

    /// Read the files again if any changed since the last look: `None` when none did, else
    /// whether the new configuration took over (a problem keeps the previous one).
    pub fn reload_if_changed(&self) -> Option<Result<(), FileProblem>> {
        let now = stamps(&self.files);
        {
            let mut seen = self.seen.lock();
            if *seen == now {
                return None;
            }
            *seen = now;
        }
        Some(server_config(&self.files, self.options).map(|config| self.current.store(Arc::new(config))))
    }

    /// Look at the files every [`CHECK_EVERY`] until `stop`, logging each change.
    pub async fn watch(self: Arc<Self>, stop: CancellationToken) {
        let mut ticks = tokio::time::interval(CHECK_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = stop.cancelled() => return,
            }
            // Reading and parsing a few files: off the runtime's workers.
            let this = self.clone();
            let outcome = tokio::task::spawn_blocking(move || this.reload_if_changed()).await;
            match outcome {
                Ok(None) => {}
                Ok(Some(Ok(()))) => tracing::info!(
                    cert = %self.files.cert.display(),
                    "gateway.tls: the certificate files changed; new connections get the new certificate"
                ),
                Ok(Some(Err(problem))) => tracing::warn!(
                    file = %problem.path.display(),
                    reason = %problem.reason,
                    "gateway.tls: a changed file cannot be used; the previous certificate is kept"
                ),
                Err(err) => tracing::error!(%err, "gateway.tls: reading the certificate files failed"),
            }
        }
    }
}
