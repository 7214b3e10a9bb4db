//! The signals `mcpmux serve` handles (a module of `main.rs`, not of the library). They are
//! installed before anything starts, so none of them can end mcpmux the default way; a second
//! stop signal during the stop ends the drain early (the upstreams are still stopped properly).
//!
//! - Unix: SIGTERM and SIGINT stop mcpmux gracefully, SIGHUP reloads the configuration.
//! - Windows: Ctrl-C, Ctrl-Break, closing the console window and a system shutdown stop it
//!   gracefully (Windows ends a process a few seconds after the last two, drained or not). There
//!   is no reload signal: `mcpmux reload`, `POST /reload` and saving the file reload.

/// What a signal asks for.
pub enum Signal {
    Stop,
    #[cfg_attr(windows, expect(dead_code, reason = "Windows has no reload signal"))]
    Reload,
}

/// SIGTERM, SIGINT and SIGHUP.
#[cfg(unix)]
pub struct StopSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl StopSignals {
    pub fn install() -> std::io::Result<StopSignals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(StopSignals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// Wait for the next of them (and log it).
    pub async fn next(&mut self) -> Signal {
        tokio::select! {
            _ = self.term.recv() => tracing::info!("SIGTERM received"),
            _ = self.int.recv() => tracing::info!("SIGINT received"),
            _ = self.hup.recv() => {
                tracing::info!("SIGHUP received: reloading the configuration");
                return Signal::Reload;
            }
        }
        Signal::Stop
    }
}

/// The console's control events that mean "stop": Ctrl-C, Ctrl-Break, the console window
/// closing, the system shutting down (SIGTERM's counterparts).
#[cfg(windows)]
pub struct StopSignals {
    ctrl_c: tokio::signal::windows::CtrlC,
    ctrl_break: tokio::signal::windows::CtrlBreak,
    close: tokio::signal::windows::CtrlClose,
    shutdown: tokio::signal::windows::CtrlShutdown,
}

#[cfg(windows)]
impl StopSignals {
    pub fn install() -> std::io::Result<StopSignals> {
        use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close, ctrl_shutdown};
        Ok(StopSignals {
            ctrl_c: ctrl_c()?,
            ctrl_break: ctrl_break()?,
            close: ctrl_close()?,
            shutdown: ctrl_shutdown()?,
        })
    }

    /// Wait for the next of them (and log it).
    pub async fn next(&mut self) -> Signal {
        tokio::select! {
            _ = self.ctrl_c.recv() => tracing::info!("Ctrl-C received"),
            _ = self.ctrl_break.recv() => tracing::info!("Ctrl-Break received"),
            _ = self.close.recv() => tracing::info!("the console is closing"),
            _ = self.shutdown.recv() => tracing::info!("the system is shutting down"),
        }
        Signal::Stop
    }
}
