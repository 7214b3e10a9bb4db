//! How a profile's hosts discover tools (`discovery`, `token_budget`) and when a request to the
//! main endpoint is served as that profile (`match`: a token claim or a request header), checked
//! with errors at their lines.

use super::spanned::Spanned;
use super::{ConfigError, Ctx};
use schemars::JsonSchema;
use serde::Deserialize;

/// The default `token_budget`: estimated tokens of a serialized `tools/list`.
pub const DEFAULT_TOKEN_BUDGET: u64 = 8000;
/// The largest `token_budget` accepted (a list that big is no longer a small context).
const MAX_TOKEN_BUDGET: u64 = 10_000_000;

/// What a profile's `tools/list` answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Discovery {
    /// The catalog itself.
    #[default]
    List,
    /// Only mcpmux's meta-tools (`mcpmux__search_tools`, `mcpmux__describe_tool`,
    /// `mcpmux__call_tool`).
    Search,
    /// The catalog while its serialized list fits the token budget, else the meta-tools.
    Auto,
}

impl Discovery {
    /// The value as written in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Discovery::List => "list",
            Discovery::Search => "search",
            Discovery::Auto => "auto",
        }
    }
}

/// When a request to the main endpoint is served as a profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProfileMatch {
    /// The principal's token has claim `claim` equal to `value` (a string) or holding it (an
    /// array); an API key's groups count as its `groups` claim.
    Claim { claim: String, value: String },
    /// The request carries header `name` (lower case) with exactly `value`.
    Header { name: String, value: String },
}

/// `match = { claim = "...", value = "..." }` or `match = { header = "...", value = "..." }`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProfileMatch {
    /// A token claim (e.g. "groups"): the profile serves a principal whose claim is this value
    /// (a string) or holds it (an array). An API key's groups count as "groups".
    claim: Option<Spanned<String>>,
    /// A request header (e.g. "X-Mcpmux-Profile"): the profile serves a request to the main
    /// endpoint carrying it with this value, decided per request.
    header: Option<Spanned<String>>,
    /// The value the claim or header must have.
    value: Option<Spanned<String>>,
}

/// `discovery` of `[profiles.NAME]` (`at`), checked.
pub(super) fn discovery(
    ctx: &Ctx<'_>,
    raw: &Option<Spanned<String>>,
    at: &str,
) -> Result<Discovery, ConfigError> {
    let Some(raw) = raw else {
        return Ok(Discovery::default());
    };
    match ctx.expand(raw, &format!("{at}.discovery"))?.as_str() {
        "list" => Ok(Discovery::List),
        "search" => Ok(Discovery::Search),
        "auto" => Ok(Discovery::Auto),
        other => Err(ctx.invalid(
            &raw.span(),
            format!("{at}.discovery {other:?} is not one of \"list\", \"search\", \"auto\""),
        )),
    }
}

/// `token_budget` of `[profiles.NAME]` (`at`), checked.
pub(super) fn token_budget(ctx: &Ctx<'_>, raw: &Option<Spanned<u64>>, at: &str) -> Result<u64, ConfigError> {
    let Some(raw) = raw else {
        return Ok(DEFAULT_TOKEN_BUDGET);
    };
    let budget = ctx.nonzero(raw, &format!("{at}.token_budget"))?;
    if budget > MAX_TOKEN_BUDGET {
        let msg = format!("{at}.token_budget {budget} is over the limit of {MAX_TOKEN_BUDGET}");
        return Err(ctx.invalid(&raw.span(), msg));
    }
    Ok(budget)
}

/// `match` of `[profiles.NAME]` (`at`), checked: a claim or a header (not both), and a value.
pub(super) fn profile_match(
    ctx: &Ctx<'_>,
    raw: &Option<Spanned<RawProfileMatch>>,
    at: &str,
) -> Result<Option<ProfileMatch>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let key = format!("{at}.match");
    let table = raw.get_ref();
    let value = match &table.value {
        Some(v) => ctx.expand(v, &format!("{key}.value"))?,
        None => {
            let msg =
                format!("{key} needs a value (e.g. {{ header = \"X-Mcpmux-Profile\", value = \"agent\" }})");
            return Err(ctx.invalid(&raw.span(), msg));
        }
    };
    if value.is_empty() {
        return Err(ctx.invalid(&raw.span(), format!("{key}.value must not be empty")));
    }
    match (&table.claim, &table.header) {
        (Some(claim), None) => {
            let claim_name = ctx.expand(claim, &format!("{key}.claim"))?;
            if claim_name.is_empty() {
                return Err(ctx.invalid(&claim.span(), format!("{key}.claim must not be empty")));
            }
            Ok(Some(ProfileMatch::Claim {
                claim: claim_name,
                value,
            }))
        }
        (None, Some(header)) => {
            let name = ctx.expand(header, &format!("{key}.header"))?;
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                let msg = format!("{key}.header {name:?} is not an HTTP header name");
                return Err(ctx.invalid(&header.span(), msg));
            }
            Ok(Some(ProfileMatch::Header {
                name: name.to_ascii_lowercase(),
                value,
            }))
        }
        (Some(_), Some(_)) => Err(ctx.invalid(
            &raw.span(),
            format!("{key} names a claim and a header: give one of them"),
        )),
        (None, None) => Err(ctx.invalid(
            &raw.span(),
            format!("{key} needs a claim or a header (e.g. {{ claim = \"groups\", value = \"agents\" }})"),
        )),
    }
}
