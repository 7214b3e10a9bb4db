//! The `mcpmux` command: parse the command line, set up logging, run the library.

mod cli;
mod stop_signals;

use clap::Parser;
use cli::{AuditCommand, Cli, Command, ConfigCommand, PinsCommand, PolicyCommand};
use mcpmux::config::Severity;
use std::path::PathBuf;
use std::process::ExitCode;
use stop_signals::{Signal, StopSignals};

/// mimalloc: a gateway allocates small short-lived buffers for every message it relays, and
/// measured per relayed call it costs far fewer instructions than the system allocator
/// (docs/profiling.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Text (coloured only at a terminal) until the configuration says `log_format`.
    let logging = mcpmux::telemetry::logging::init();
    let path = match &cli.command {
        Command::Serve { config } | Command::CheckConfig { config } => config,
        Command::Status { config, url, json } => return status(config.as_deref(), url.as_deref(), *json),
        Command::Reload { config, url } => return reload_command(config.as_deref(), url.as_deref()),
        Command::Pins { command, config, url } => {
            let approve = command
                .as_ref()
                .map(|PinsCommand::Approve { target }| target.as_str());
            let status = mcpmux::pins_command::run(approve, config.as_deref(), url.as_deref());
            return ExitCode::from(status);
        }
        Command::Grants { config, url } => {
            let status = mcpmux::grants_command::grants(vault_at(config, url));
            return ExitCode::from(status);
        }
        Command::Logout {
            server,
            principal,
            config,
            url,
        } => {
            let status = mcpmux::grants_command::logout(server, principal, vault_at(config, url));
            return ExitCode::from(status);
        }
        Command::Policy {
            command:
                PolicyCommand::Explain {
                    config,
                    principal,
                    groups,
                    scopes,
                    name,
                },
        } => {
            use mcpmux::policy::explain::{command, split_list};
            // A flag not given is `None`: an API key's configured value is used then.
            let given = |values: &Vec<String>| (!values.is_empty()).then(|| split_list(values));
            let (groups, scopes) = (given(groups), given(scopes));
            let status = command(config, principal, groups.as_deref(), scopes.as_deref(), name);
            return ExitCode::from(status);
        }
        Command::Audit {
            command: AuditCommand::Verify { file },
        } => return ExitCode::from(mcpmux::audit::verify::command(file)),
        Command::Import { files, out, force } => {
            return ExitCode::from(mcpmux::import::command(files, out.as_deref(), *force));
        }
        Command::Config {
            command: ConfigCommand::Schema,
        } => {
            print!("{}", mcpmux::config::schema::schema_text());
            return ExitCode::SUCCESS;
        }
        Command::Login { server, config, url } => {
            return ExitCode::from(mcpmux::login_command::command(
                server,
                config.as_deref(),
                url.as_deref(),
            ));
        }
        Command::Keygen => {
            println!("{}", mcpmux::seal::ClusterKey::generate().to_base64());
            return ExitCode::SUCCESS;
        }
    };
    let loaded = mcpmux::Config::load_all(path);
    if let Command::CheckConfig { .. } = cli.command {
        return check_config(&loaded);
    }
    let findings = loaded.preflight(std::env::var_os("PATH"), &working_dir());
    let (loaded, files) = loaded.into_result();
    let config = match loaded {
        Ok(c) => c,
        Err(err) => {
            report_load_error(&err);
            return ExitCode::FAILURE;
        }
    };
    logging.use_format(config.telemetry.log_format);
    for finding in &findings {
        match finding.severity {
            Severity::Error => tracing::error!("{}", finding.located()),
            Severity::Warning => tracing::warn!("{}", finding.located()),
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(serve(config, path, files))
}

/// Serve until the first stop signal, then stop gracefully; a second signal ends the drain.
/// SIGHUP, `POST /reload` and an edit of any of `files` (what the configuration at `path` read)
/// re-read it.
async fn serve(config: mcpmux::Config, path: &std::path::Path, files: Vec<PathBuf>) -> ExitCode {
    let mut signals = match StopSignals::install() {
        Ok(signals) => signals,
        Err(err) => {
            eprintln!("error: cannot install signal handlers: {err}");
            return ExitCode::FAILURE;
        }
    };
    let mut gateway = match mcpmux::start(config).await {
        Ok(gateway) => gateway,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    let watching = tokio_util::sync::CancellationToken::new();
    gateway.loaded_from(path);
    let (watched, files) = tokio::sync::watch::channel(files);
    let mut edits = mcpmux::reload::watch_files(files, mcpmux::reload::WATCH_INTERVAL, watching.clone());
    let mut asked = gateway.take_reload_requests();
    loop {
        let request = async {
            match &mut asked {
                Some(requests) => requests.recv().await,
                None => std::future::pending().await,
            }
        };
        let stopped = tokio::select! {
            signal = signals.next() => match signal {
                Signal::Reload => reload(&gateway, path, &watched, &mut signals).await.1,
                Signal::Stop => true,
            },
            Some(()) = edits.recv() => {
                tracing::info!(config = %path.display(), "the configuration file changed: reloading it");
                reload(&gateway, path, &watched, &mut signals).await.1
            }
            Some(request) = request => {
                tracing::info!(config = %path.display(), "POST /reload: reloading the configuration");
                let (answer, stopped) = reload(&gateway, path, &watched, &mut signals).await;
                let _ = request.answer.send(answer);
                stopped
            }
        };
        if stopped {
            break;
        }
    }
    watching.cancel();
    announce_stop(gateway.stop_outlook());
    let cut = gateway.drain_cutter();
    tokio::spawn(async move {
        while let Signal::Reload = signals.next().await {
            tracing::warn!("SIGHUP during the stop: not reloading");
        }
        tracing::warn!("second signal: ending the drain, in-flight calls are answered with an error");
        cut.cancel();
    });
    gateway.stop().await;
    ExitCode::SUCCESS
}

/// Tell the operator, once, at the first stop signal, what the stop will wait for and that a
/// second signal ends it at once: with a call in flight, a Ctrl-C would otherwise seem to hang
/// for up to `drain_timeout_secs` without a word.
fn announce_stop(outlook: mcpmux::StopOutlook) {
    const AGAIN: &str = "press Ctrl-C again (or send a second SIGTERM) to stop at once";
    let (n, delay, drain) = (
        outlook.in_flight,
        outlook.shutdown_delay.as_secs(),
        outlook.drain_timeout.as_secs(),
    );
    match (n, delay) {
        (0, 0) => tracing::info!(in_flight = n, "stopping: no call in flight ({AGAIN})"),
        (_, 0) => tracing::warn!(
            in_flight = n,
            drain_timeout_secs = drain,
            "stopping: letting {n} call(s) in flight finish, for up to {drain} s \
             (gateway.drain_timeout_secs); {AGAIN}, answering them with an error"
        ),
        _ => tracing::warn!(
            in_flight = n,
            shutdown_delay_secs = delay,
            drain_timeout_secs = drain,
            "stopping: still serving for {delay} s while /readyz answers 503 \
             (gateway.shutdown_delay_secs), then letting the calls in flight ({n} now) finish, \
             for up to {drain} s (gateway.drain_timeout_secs); {AGAIN}"
        ),
    }
}

/// Print every problem of the files and every finding on this machine, each at its
/// `file:line`, in the order of the files; fail when any is an error.
fn check_config(loaded: &mcpmux::config::Loaded) -> ExitCode {
    let report = loaded.check(std::env::var_os("PATH"), &working_dir());
    for line in &report.lines {
        eprintln!("{line}");
    }
    let (errors, warnings) = (report.errors, report.warnings);
    if errors > 0 {
        match warnings {
            0 => eprintln!("configuration has {errors} error(s)"),
            _ => eprintln!("configuration has {errors} error(s) and {warnings} warning(s)"),
        }
        return ExitCode::FAILURE;
    }
    let Some(config) = loaded.config() else {
        return ExitCode::FAILURE;
    };
    let waiting = (config.disabled.iter()).filter(|s| s.waiting.is_some()).count();
    let disabled = match (config.disabled.len() - waiting, waiting) {
        (0, 0) => String::new(),
        (n, 0) => format!(" ({n} more with enabled = false)"),
        (0, w) => format!(" ({w} more waiting for a needs_env variable)"),
        (n, w) => format!(" ({n} more with enabled = false, {w} waiting for a needs_env variable)"),
    };
    println!(
        "configuration OK: {} server(s){disabled}, {warnings} warning(s)",
        config.servers.len()
    );
    ExitCode::SUCCESS
}

/// Why the configuration did not load: every problem after `error:`, each on its own line
/// starting with the `file:line:` that wrote it.
fn report_load_error(err: &mcpmux::config::ConfigError) {
    match err.each().len() {
        1 => eprintln!("error: {err}"),
        n => eprintln!("error: the configuration has {n} problems:\n{err}"),
    }
}

/// The directory a server without `cwd` starts in.
fn working_dir() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
}

fn status(config: Option<&std::path::Path>, url: Option<&str>, json: bool) -> ExitCode {
    let (url, pinned_cert) = match (url, config) {
        (Some(url), _) => (url.to_string(), None),
        (None, Some(path)) => match mcpmux::status_command::status_target(path) {
            Ok(target) => target,
            Err(err) => {
                eprintln!("error: {err}");
                return ExitCode::FAILURE;
            }
        },
        (None, None) => {
            eprintln!(
                "error: say which gateway: --url http://HOST:PORT/status (its status URL), or \
                 --config FILE (the configuration it runs with; its listen address is used)"
            );
            return ExitCode::FAILURE;
        }
    };
    ExitCode::from(mcpmux::status_command::command(
        &url,
        pinned_cert.as_deref(),
        json,
    ))
}

/// Which vault `grants` and `logout` use (clap makes sure exactly one of the two is given).
fn vault_at<'a>(config: &'a Option<PathBuf>, url: &'a Option<String>) -> mcpmux::grants_command::Where<'a> {
    use mcpmux::grants_command::Where;
    match (config, url) {
        (_, Some(url)) => Where::Url(url),
        (Some(path), None) => Where::Config(path),
        (None, None) => Where::Url(""),
    }
}

/// `mcpmux reload`: the gateway's reload URL from `--url`, or from the file it serves.
fn reload_command(config: Option<&std::path::Path>, url: Option<&str>) -> ExitCode {
    let (url, pinned_cert) = match (url, config) {
        (Some(url), _) => (url.to_string(), None),
        (None, Some(path)) => match mcpmux::reload_command::reload_url(path) {
            Ok(target) => target,
            Err((status, message)) => {
                eprintln!("{message}");
                return ExitCode::from(status);
            }
        },
        (None, None) => {
            eprintln!(
                "error: say which gateway: --url http://HOST:PORT/reload (its operator address), or \
                 --config FILE (the configuration it runs with; its admin_listen, else listen, is used)"
            );
            return ExitCode::from(2);
        }
    };
    ExitCode::from(mcpmux::reload_command::command(&url, pinned_cert.as_deref()))
}

/// Re-read the configuration file (and what it reads) and put it in force; a configuration that
/// does not load changes nothing (the error is logged, returned, and the gateway serves on). A
/// SIGHUP meanwhile reloads once more after it; the flag is true when a stop signal came
/// meanwhile (the reload is then given up).
async fn reload(
    gateway: &mcpmux::Gateway,
    path: &std::path::Path,
    watched: &tokio::sync::watch::Sender<Vec<PathBuf>>,
    signals: &mut StopSignals,
) -> (Result<String, String>, bool) {
    loop {
        let reloading = reload_once(gateway, path, watched);
        tokio::pin!(reloading);
        let mut again = false;
        let answer = loop {
            tokio::select! {
                answer = &mut reloading => break answer,
                signal = signals.next() => match signal {
                    Signal::Stop => return (Err("mcpmux is stopping".into()), true),
                    Signal::Reload => again = true,
                },
            }
        };
        if !again {
            return (answer, false);
        }
    }
}

/// One reload. The files watched become those this load read (with the old ones too when it
/// failed, so fixing either is seen).
async fn reload_once(
    gateway: &mcpmux::Gateway,
    path: &std::path::Path,
    watched: &tokio::sync::watch::Sender<Vec<PathBuf>>,
) -> Result<String, String> {
    let digest = mcpmux::reload::file_digest(path).unwrap_or_else(|| "unreadable".into());
    let (loaded, mut files) = mcpmux::Config::load_tracked(path);
    if loaded.is_err() {
        for old in watched.borrow().iter() {
            if !files.contains(old) {
                files.push(old.clone());
            }
        }
    }
    watched.send_if_modified(|now| {
        let changed = *now != files;
        *now = files;
        changed
    });
    let loaded = loaded.map_err(|err| err.to_string());
    match gateway.reload_loaded(loaded, Some(digest.clone())).await {
        Ok(done) => {
            let names = |ids: &[mcpmux::config::UpstreamId]| {
                ids.iter().map(|id| id.as_str()).collect::<Vec<_>>().join(", ")
            };
            let lists: Vec<&str> = (done.lists_changed.iter()).map(|k| k.method()).collect();
            tracing::info!(
                config = %path.display(),
                config_digest = %digest,
                policy_changed = done.policy_changed,
                added = %names(&done.servers.added),
                removed = %names(&done.servers.removed),
                changed = %names(&done.servers.changed),
                reshaped = %names(&done.servers.reshaped),
                retuned = %names(&done.servers.retuned),
                lists_changed = %lists.join(", "),
                "configuration reloaded: in force from the next request"
            );
            let mut message = format!("configuration reloaded (config_digest {digest})");
            if done.policy_changed {
                message.push_str("; the [[policy]] rules changed");
            }
            if !done.needs_restart.is_empty() {
                let changed = done.needs_restart.join(", ");
                tracing::warn!(
                    changed = %changed,
                    "these parts of the configuration changed but keep their running value until a restart"
                );
                message.push_str(&format!("; changed but kept until a restart: {changed}"));
            }
            Ok(message)
        }
        Err(err) => {
            tracing::error!(
                config = %path.display(),
                config_digest = %digest,
                // One log line, even for several problems (`/status` has one per line).
                "reload refused, nothing changed: {}",
                err.replace('\n', "; ")
            );
            Err(err)
        }
    }
}
