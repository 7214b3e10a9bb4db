//! The process's log output on stderr: `RUST_LOG` filters it (default `info`), in the format
//! `[telemetry] log_format` asks for: text (coloured only when stderr is a terminal, so no
//! escape codes reach files, journald or `kubectl logs`) or one JSON object a line (the event's
//! fields at the top level beside `timestamp`, `level`, `target` and `message`). Lines logged
//! before the configuration is read are text; [`Logging::use_format`] switches afterwards.

use crate::config::LogFormat;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, reload, EnvFilter, Layer, Registry};

type Output = Box<dyn Layer<Registry> + Send + Sync>;

/// The installed log output, whose format can be changed once.
pub struct Logging {
    handle: Option<reload::Handle<Output, Registry>>,
}

/// Install the process's subscriber, text until told otherwise.
pub fn init() -> Logging {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let (output, handle) = reload::Layer::new(output(LogFormat::Text));
    let installed = tracing_subscriber::registry()
        .with(output)
        .with(filter)
        .try_init();
    Logging {
        handle: installed.is_ok().then_some(handle),
    }
}

impl Logging {
    /// Write lines in `format` from now on.
    pub fn use_format(&self, format: LogFormat) {
        if format == LogFormat::Text {
            return;
        }
        if let Some(handle) = &self.handle {
            if let Err(err) = handle.reload(output(format)) {
                tracing::warn!(%err, "cannot switch the log format");
            }
        }
    }
}

fn output(format: LogFormat) -> Output {
    match format {
        LogFormat::Text => fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .boxed(),
        LogFormat::Json => fmt::layer()
            .json()
            .flatten_event(true)
            .with_writer(std::io::stderr)
            .boxed(),
    }
}
