//! The `[[policy]]` rules: who a rule applies to (`principals`, `groups`, `scopes`), the globs it
//! allows and denies, its `rate_limit` and `audit_arguments`, validated with errors at their line.
//! What the rules mean together is the concern of the `policy` module.

use super::raw::{line_col, RawPolicy};
use super::spanned::Spanned;
use super::{ConfigError, Ctx};
use crate::util::glob::Glob;
use std::fmt;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

/// One `[[policy]]` table. It applies to a principal that matches every one of `principals`,
/// `groups` and `scopes` that is given (an absent one matches anyone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyRule {
    /// The 1-based line of the rule's table in its file.
    pub line: usize,
    /// That file, when it is not the configuration file itself (an `include`d one).
    pub file: Option<Arc<str>>,
    /// The principal's name is one of these.
    pub principals: Option<Vec<String>>,
    /// The principal is in at least one of these groups.
    pub groups: Option<Vec<String>>,
    /// The principal was granted every one of these scopes.
    pub scopes: Option<Vec<String>>,
    /// Exposed tool and prompt names and resource URIs the rule grants.
    pub allow: Vec<Glob>,
    /// Exposed names and URIs the rule takes away (whichever rule granted them).
    pub deny: Vec<Glob>,
    pub rate_limit: Option<RateLimit>,
    /// Whether the audit log records a call's arguments.
    pub audit_arguments: bool,
}

impl PolicyRule {
    /// Where the rule is written, for people: `line 4`, or `team.toml line 4` in an included file.
    pub fn site(&self) -> String {
        rule_site(self.file.as_deref(), self.line)
    }

    /// `FILE:LINE` of the rule, `main` being the configuration file's name.
    pub fn at(&self, main: &str) -> String {
        format!("{}:{}", self.file.as_deref().unwrap_or(main), self.line)
    }
}

/// `line N`, with the file in front when there is one.
pub fn rule_site(file: Option<&str>, line: usize) -> String {
    match file {
        Some(file) => format!("{file} line {line}"),
        None => format!("line {line}"),
    }
}

/// `rate_limit = "N/sec|min|hour"`: at most `requests` per `per`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    pub requests: NonZeroU32,
    pub per: RatePeriod,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RatePeriod {
    Second,
    Minute,
    Hour,
}

const PERIODS: [(&str, RatePeriod); 3] = [
    ("sec", RatePeriod::Second),
    ("min", RatePeriod::Minute),
    ("hour", RatePeriod::Hour),
];

impl RatePeriod {
    pub fn duration(self) -> Duration {
        match self {
            RatePeriod::Second => Duration::from_secs(1),
            RatePeriod::Minute => Duration::from_secs(60),
            RatePeriod::Hour => Duration::from_secs(3600),
        }
    }

    fn unit(self) -> &'static str {
        PERIODS.iter().find(|(_, p)| *p == self).map_or("", |(u, _)| u)
    }
}

impl RateLimit {
    /// Parses `N/sec`, `N/min` or `N/hour` with N from 1 to 2^32-1 (no spaces, no other units).
    pub fn parse(text: &str) -> Result<RateLimit, String> {
        let form = "expected N/sec, N/min or N/hour, e.g. \"600/min\"";
        let (count, unit) = text.split_once('/').ok_or_else(|| format!("{text:?}: {form}"))?;
        let per = match PERIODS.iter().find(|(u, _)| *u == unit) {
            Some((_, per)) => *per,
            None => return Err(format!("{text:?}: unknown unit {unit:?} ({form})")),
        };
        if count.is_empty() || !count.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{text:?}: {count:?} is not a number ({form})"));
        }
        let requests = match count.parse::<u32>() {
            Ok(n) => NonZeroU32::new(n).ok_or_else(|| format!("{text:?}: the count must be at least 1"))?,
            Err(_) => return Err(format!("{text:?}: the count is too large (at most {})", u32::MAX)),
        };
        Ok(RateLimit { requests, per })
    }
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.requests, self.per.unit())
    }
}

/// The rules in file order (an empty list: no `[[policy]]`); the problem of each rule that does
/// not build goes to `errors` (and the rule is left out).
pub(super) fn build_policy(
    ctx: &Ctx<'_>,
    raw: Vec<Spanned<RawPolicy>>,
    errors: &mut Vec<ConfigError>,
) -> Vec<PolicyRule> {
    let mut rules = Vec::with_capacity(raw.len());
    for (index, table) in raw.into_iter().enumerate() {
        let (line, file, at) = match ctx.sources.locate(table.span().start) {
            Some((file, local)) => {
                let line = header_line(&file.text, local);
                let included = (file.name != ctx.source()).then(|| Arc::from(file.name.as_str()));
                (line, included, format!("{}:{line}", file.name))
            }
            None => (0, None, ctx.source().to_string()),
        };
        if let Some(mut rule) = ctx.section(errors, || build_rule(ctx, index, line, &at, table.into_inner()))
        {
            rule.file = file;
            rules.push(rule);
        }
    }
    rules
}

/// The line of the `[[policy]]` header a table starts under (its own line when inline).
fn header_line(text: &str, offset: usize) -> usize {
    let (line, _) = line_col(text, offset);
    let lines: Vec<&str> = text.lines().take(line).collect();
    match lines.iter().rposition(|l| super::raw::table_header(l).is_some()) {
        Some(i) if lines[i].trim().starts_with("[[policy]]") => i + 1,
        _ => line,
    }
}

fn build_rule(
    ctx: &Ctx<'_>,
    index: usize,
    line: usize,
    at: &str,
    raw: RawPolicy,
) -> Result<PolicyRule, ConfigError> {
    let key = |name: &str| format!("policy[{index}].{name}");
    let names =
        |values: &Option<Vec<Spanned<String>>>, name: &str| -> Result<Option<Vec<String>>, ConfigError> {
            let Some(values) = values else { return Ok(None) };
            let key = key(name);
            if values.is_empty() {
                let msg = format!("{key} must not be empty (leave the key out to match anyone)");
                return Err(at_line(at, msg));
            }
            let out = ctx.expand_list(values, &key)?;
            match out.iter().position(|s| s.trim().is_empty() || s.trim() != s) {
                Some(i) => Err(ctx.invalid(
                    &values[i].span(),
                    format!("{key}[{i}] must not be empty or start or end with whitespace"),
                )),
                None => Ok(Some(out)),
            }
        };
    let globs = |values: &Option<Vec<Spanned<String>>>, name: &str| -> Result<Vec<Glob>, ConfigError> {
        let key = key(name);
        let mut out = Vec::new();
        for (i, value) in values.iter().flatten().enumerate() {
            let text = ctx.expand(value, &format!("{key}[{i}]"))?;
            let glob = Glob::new(&text)
                .map_err(|e| ctx.invalid(&value.span(), format!("{key}[{i}] {text:?}: {e}")))?;
            out.push(glob);
        }
        Ok(out)
    };
    let rate_limit = match &raw.rate_limit {
        Some(v) => {
            let text = ctx.expand(v, &key("rate_limit"))?;
            let limit = RateLimit::parse(&text)
                .map_err(|why| ctx.invalid(&v.span(), format!("{}: {why}", key("rate_limit"))))?;
            Some(limit)
        }
        None => None,
    };
    Ok(PolicyRule {
        line,
        file: None,
        principals: names(&raw.principals, "principals")?,
        groups: names(&raw.groups, "groups")?,
        scopes: names(&raw.scopes, "scopes")?,
        allow: globs(&raw.allow, "allow")?,
        deny: globs(&raw.deny, "deny")?,
        rate_limit,
        audit_arguments: raw.audit_arguments.is_some_and(|v| *v.get_ref()),
    })
}

fn at_line(at: &str, msg: String) -> ConfigError {
    ConfigError::Invalid {
        message: format!("{at}: {msg}"),
    }
}

#[cfg(test)]
mod tests;
