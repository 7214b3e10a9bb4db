//! The command line of the `mcpmux` binary (a module of `main.rs`, not of the library): its
//! subcommands and their arguments, as clap parses them.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "mcpmux",
    version,
    about = "One Streamable HTTP MCP endpoint in front of many MCP servers"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Serve the gateway described by a TOML configuration file.
    Serve {
        /// Path to the configuration file.
        #[arg(long)]
        config: PathBuf,
    },
    /// Check a configuration file and exit.
    CheckConfig {
        #[arg(long)]
        config: PathBuf,
    },
    /// Show a running gateway's upstreams and sessions (exit status 1 unless every upstream
    /// is ready).
    Status {
        /// The configuration the gateway runs with (its listen address is used).
        #[arg(long, conflicts_with = "url")]
        config: Option<PathBuf>,
        /// The gateway's status URL, e.g. http://127.0.0.1:8080/status.
        #[arg(long)]
        url: Option<String>,
        /// Print the status document as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Make a running gateway re-read its configuration (as SIGHUP does) and print what changed
    /// or why the new configuration was refused (exit status 0 reloaded, 1 refused, 2 not
    /// reached). It asks `POST /reload` on the gateway's `admin_listen` (or its loopback
    /// `listen` without `[auth]`).
    Reload {
        /// The configuration the gateway runs with (its admin_listen, else listen, is used).
        #[arg(long, conflicts_with = "url")]
        config: Option<PathBuf>,
        /// The gateway's reload URL, e.g. http://127.0.0.1:9090/reload.
        #[arg(long)]
        url: Option<String>,
    },
    /// List the upstream grants in the vault: principal, server, scope, expiry, whether
    /// refreshable, the grant's id (never a token). Exit status 0 listed, 2 not read.
    Grants {
        /// The configuration whose vault to open (works whether or not a gateway runs).
        #[arg(long, conflicts_with = "url", required_unless_present = "url")]
        config: Option<PathBuf>,
        /// A running gateway's operator address (asks its `GET /grants`), e.g.
        /// http://127.0.0.1:9090.
        #[arg(long)]
        url: Option<String>,
    },
    /// Sign a principal out of an upstream server: remove its grant from the vault (exit status
    /// 0 removed, 1 nothing to remove, 2 not done).
    Logout {
        /// The server (its `[servers.NAME]` table's name).
        server: String,
        /// Whose grant; default `local`, the one user of a gateway without `[auth]`.
        #[arg(long, default_value = mcpmux::admin::grants::LOCAL_PRINCIPAL)]
        principal: String,
        /// The configuration whose vault to open (works whether or not a gateway runs).
        #[arg(long, conflicts_with = "url", required_unless_present = "url")]
        config: Option<PathBuf>,
        /// A running gateway's operator address (asks its `DELETE /grants/SERVER`).
        #[arg(long)]
        url: Option<String>,
    },
    /// The tools of a running gateway whose definition changed since it was pinned
    /// (`[pinning]`), each with a readable diff (exit status 0 none, 1 some, 2 not reached);
    /// `pins approve SERVER[/TOOL]` accepts the new definitions (0 approved, 1 nothing to
    /// approve, 2 not done). Asks `GET /pins` / `POST /pins/approve` on its operator address.
    Pins {
        #[command(subcommand)]
        command: Option<PinsCommand>,
        /// The configuration the gateway runs with (its admin_listen, else listen, is used).
        #[arg(long, conflicts_with = "url", global = true)]
        config: Option<PathBuf>,
        /// The gateway's operator address, as `mcpmux reload` takes it (e.g.
        /// http://127.0.0.1:9090 or http://127.0.0.1:9090/reload).
        #[arg(long, global = true)]
        url: Option<String>,
    },
    /// Per-principal access policy (`[[policy]]`).
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// The audit log (`[audit]`).
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Convert MCP clients' server lists (Claude Desktop `claude_desktop_config.json`, Claude
    /// Code `.mcp.json` and `~/.claude.json`, Cursor and VS Code `mcp.json`) into an mcpmux
    /// configuration (exit status 0 written, 1 a file that does not parse, 2 a file that cannot
    /// be read or an output that cannot be written).
    Import {
        /// The clients' JSON files; the format of each is told from its name, folder and keys.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Write the TOML here instead of to stdout (an existing file is not overwritten).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Overwrite an existing `--out` file.
        #[arg(long, requires = "out")]
        force: bool,
    },
    /// The configuration file format.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Sign mcpmux in to an `oauth` upstream (`auth = { mode = "oauth" }`) as the local user:
    /// prints the link, opens a browser when there is one, and waits for the sign-in (exit
    /// status 0 signed in, 1 refused or timed out, 2 misconfigured or not reachable). With
    /// --config it works whether or not the gateway runs.
    Login {
        /// The server's name (its `[servers.NAME]`).
        server: String,
        /// The gateway's configuration file.
        #[arg(long, conflicts_with = "url")]
        config: Option<PathBuf>,
        /// A running gateway's operator address, e.g. http://127.0.0.1:8080.
        #[arg(long)]
        url: Option<String>,
    },
    /// Print a new `[cluster]` key (base64 of 32 bytes from the operating system's random
    /// generator), the same on every replica.
    Keygen,
}

#[derive(Subcommand)]
pub(crate) enum PinsCommand {
    /// Accept the current definition of SERVER's drifted tools, or of SERVER/TOOL alone: the
    /// lock file is written and hosts are told the tools list changed.
    Approve {
        /// SERVER (every drifted tool of it) or SERVER/TOOL (the server's own tool name).
        target: String,
    },
}

#[derive(Subcommand)]
pub(crate) enum ConfigCommand {
    /// Print the JSON Schema (draft 2020-12) of the TOML configuration, for editors (Taplo,
    /// "Even Better TOML").
    Schema,
}

#[derive(Subcommand)]
pub(crate) enum AuditCommand {
    /// Check an audit log's hash chain: exit status 0 intact (and how many lines were checked),
    /// 1 naming the first edited, removed, reordered or broken line and why, 2 unreadable.
    Verify {
        /// The audit log file.
        file: PathBuf,
    },
}

#[derive(Subcommand)]
pub(crate) enum PolicyCommand {
    /// Print whether a principal may see and call an exposed name or URI, and the rules that
    /// decide it (exit status 0 allowed, 1 denied, 2 configuration error).
    Explain {
        /// Path to the configuration file.
        #[arg(long)]
        config: PathBuf,
        /// The principal's name (a JWT's `sub` or an API key's name). An API key's name is
        /// explained with the key's configured groups and scopes.
        #[arg(long)]
        principal: String,
        /// The principal's groups, separated by commas or spaces (may be repeated). For an API
        /// key they replace its configured groups (a what-if, noted in the output).
        #[arg(long)]
        groups: Vec<String>,
        /// The principal's granted scopes, separated by commas or spaces (may be repeated). For
        /// an API key they replace the scopes it holds (a what-if, noted in the output).
        #[arg(long)]
        scopes: Vec<String>,
        /// An exposed tool or prompt name, or a resource URI.
        name: String,
    },
}
