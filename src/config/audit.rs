//! The `[audit]` table: where the audit log goes (`path`, `"-"` for stdout; a relative path
//! follows the configuration file) and how many lines may wait for its writer (`queue_size`).
//! A `[[policy]]` rule with `audit_arguments = true` needs it.

use super::spanned::Spanned;
use super::{ConfigError, Ctx, PolicyRule};
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::PathBuf;

/// How many lines may wait for the writer when `queue_size` is not given.
pub const DEFAULT_QUEUE_SIZE: usize = 8192;

/// `[audit]`: the hash-chained audit log.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAudit {
    /// The log file (appended to; relative to this file), or "-" for stdout.
    pub(super) path: Spanned<String>,
    /// Lines that may wait for the writer; beyond, lines are dropped and counted. Default 8192.
    #[schemars(range(min = 1))]
    queue_size: Option<Spanned<usize>>,
}

/// `[audit]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditConfig {
    pub sink: AuditSink,
    /// Lines waiting for the writer beyond this are dropped (and counted), never waited for.
    pub queue_size: usize,
}

/// Where audit lines go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuditSink {
    /// `path = "-"`.
    Stdout,
    /// Appended to; [`super::Config::load`] makes a relative path absolute against the folder of
    /// the file that wrote it (the configuration file or an included one).
    File(PathBuf),
}

pub(super) fn build_audit(ctx: &Ctx<'_>, raw: &RawAudit) -> Result<AuditConfig, ConfigError> {
    let path = ctx.expand(&raw.path, "audit.path")?;
    let sink = match path.as_str() {
        "-" => AuditSink::Stdout,
        "" => {
            return Err(ctx.invalid(
                &raw.path.span(),
                "audit.path must not be empty (\"-\" for stdout)",
            ))
        }
        // Read from a file: relative to the file that wrote it (an included one's).
        _ => match ctx.sources.dir_at(raw.path.span().start) {
            Some(dir) => AuditSink::File(super::paths::join(dir, std::path::Path::new(&path))),
            None => AuditSink::File(PathBuf::from(path)),
        },
    };
    let queue_size = match &raw.queue_size {
        Some(v) => ctx.nonzero(v, "audit.queue_size")?,
        None => DEFAULT_QUEUE_SIZE,
    };
    Ok(AuditConfig { sink, queue_size })
}

/// A rule that asks for arguments in an audit log that does not exist is an error at its line.
pub(super) fn check_rules(
    source: &str,
    rules: &[PolicyRule],
    audit: Option<&AuditConfig>,
) -> Result<(), ConfigError> {
    match (rules.iter().position(|r| r.audit_arguments), audit) {
        (Some(i), None) => Err(ConfigError::Invalid {
            message: format!(
                "{}: policy[{i}].audit_arguments = true needs an [audit] table (there is no audit \
                 log to record the arguments in)",
                rules[i].at(source)
            ),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{AuditSink, Config, DEFAULT_AUDIT_QUEUE_SIZE};

    const AUTH: &str = "\n[auth]\n[[auth.api_keys]]\nname = \"k\"\nkey = \"secret\"\n";

    fn parse(text: &str) -> Result<Config, String> {
        Config::from_toml_str(&format!("{text}{AUTH}"), "c.toml", &|_| None).map_err(|e| e.to_string())
    }

    #[test]
    fn the_audit_table_takes_a_path_and_a_queue_size() {
        let audit = parse("[audit]\npath = \"audit.jsonl\"\n")
            .expect("valid")
            .audit
            .expect("[audit]");
        assert_eq!(audit.sink, AuditSink::File("audit.jsonl".into()));
        assert_eq!(audit.queue_size, DEFAULT_AUDIT_QUEUE_SIZE);
        let audit = parse("[audit]\npath = \"-\"\nqueue_size = 10\n")
            .expect("valid")
            .audit
            .expect("[audit]");
        assert_eq!((audit.sink, audit.queue_size), (AuditSink::Stdout, 10));
        assert_eq!(parse("").expect("valid").audit, None);
        let e = parse("[audit]\npath = \"-\"\nqueue_size = 0\n").expect_err("zero");
        assert!(
            e.starts_with("c.toml:3: audit.queue_size must be at least 1"),
            "{e}"
        );
        let e = parse("[audit]\npath = \"\"\n").expect_err("empty");
        assert!(e.starts_with("c.toml:2: audit.path must not be empty"), "{e}");
        let e = parse("[audit]\nqueue_size = 5\n").expect_err("no path");
        assert!(e.contains("missing field `path`"), "{e}");
        let e = parse("[audit]\npath = \"-\"\nrotate = true\n").expect_err("unknown key");
        assert!(
            e.starts_with("c.toml:3:1: unknown key `rotate`") && e.contains("[audit]"),
            "{e}"
        );
    }

    #[test]
    fn audit_arguments_without_an_audit_table_is_an_error_at_the_rule() {
        let rules = "[[policy]]\nallow = [\"*\"]\n\n[[policy]]\nallow = [\"a\"]\naudit_arguments = true\n";
        let e = parse(rules).expect_err("no [audit]");
        assert!(
            e.starts_with("c.toml:4: policy[1].audit_arguments = true needs an [audit] table"),
            "{e}"
        );
        let with = parse(&format!("{rules}\n[audit]\npath = \"-\"\n")).expect("valid");
        assert!(with.policy[1].audit_arguments);
    }
}
