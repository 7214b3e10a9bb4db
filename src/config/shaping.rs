//! A server's shaping (`tools`, `prompts`, `resources`, `rename`, `descriptions` of a
//! `[servers.NAME]` table): which of its items hosts see and under which tool names, checked
//! with errors at their lines. Applying it to a list is the catalog's (`catalog::shape`).

use super::raw::{Ordered, RawFilter};
use super::server::ServerCtx;
use super::spanned::Spanned;
use super::ConfigError;
use crate::util::glob::Glob;

/// `include`/`exclude` globs over a server's own names (tools, prompts) or URIs (resources and
/// resource templates). An item is kept when it matches an `include` glob (no `include`: every
/// item does) and no `exclude` glob.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub include: Vec<Glob>,
    pub exclude: Vec<Glob>,
}

impl Filter {
    /// Whether an item with this name (or URI) is kept.
    pub fn admits(&self, name: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|g| g.matches(name)))
            && !self.exclude.iter().any(|g| g.matches(name))
    }

    /// Whether it keeps every item.
    pub fn is_everything(&self) -> bool {
        self.include.is_empty() && self.exclude.is_empty()
    }
}

/// How one server's lists are shaped before they join the catalog. The default changes nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shaping {
    pub tools: Filter,
    pub prompts: Filter,
    /// Over resource URIs and resource template URIs (what a host reads and a policy names).
    pub resources: Filter,
    /// Tool renames, `(the server's own name, the new name)`, in file order.
    pub rename: Vec<(String, String)>,
    /// Replaced tool descriptions, keyed by the name after renaming, in file order.
    pub descriptions: Vec<(String, String)>,
}

impl Shaping {
    /// Whether it changes nothing.
    pub fn is_identity(&self) -> bool {
        self.tools.is_everything()
            && self.prompts.is_everything()
            && self.resources.is_everything()
            && self.rename.is_empty()
            && self.descriptions.is_empty()
    }

    /// The new name of the server's tool `original`, if it is renamed.
    pub fn renamed(&self, original: &str) -> Option<&str> {
        (self.rename.iter())
            .find(|(from, _)| from == original)
            .map(|(_, to)| to.as_str())
    }

    /// The description configured for the tool hosts know (before the namespace) as `name`.
    pub fn description(&self, name: &str) -> Option<&str> {
        (self.descriptions.iter())
            .find(|(key, _)| key == name)
            .map(|(_, text)| text.as_str())
    }
}

/// The raw shaping keys of a server table.
pub(super) struct RawShaping<'a> {
    pub(super) tools: &'a Option<RawFilter>,
    pub(super) prompts: &'a Option<RawFilter>,
    pub(super) resources: &'a Option<RawFilter>,
    pub(super) rename: &'a Option<Ordered<Spanned<String>>>,
    pub(super) descriptions: &'a Option<Ordered<Spanned<String>>>,
}

/// One entry of `rename` or `descriptions`: its key (for the line), the key and the value.
type Entry<'t> = (&'t Spanned<String>, String, String);

/// Whether `name` may be a tool's new name: not empty, no whitespace or control characters.
fn valid_tool_name(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(|c| c.is_whitespace() || c.is_control())
}

impl ServerCtx<'_> {
    fn filter(&self, raw: &Option<RawFilter>, key: &str) -> Result<Filter, ConfigError> {
        let fail = |span: &std::ops::Range<usize>, msg: String| self.fail(Some(span), msg);
        glob_filter(raw, key, |pattern, at| self.expand(pattern, at), fail)
    }

    /// The `rename` or `descriptions` table, expanded, with each entry's span.
    fn pairs<'t>(
        &self,
        table: &'t Option<Ordered<Spanned<String>>>,
        key: &str,
    ) -> Result<Vec<Entry<'t>>, ConfigError> {
        let mut out = Vec::new();
        for (k, v) in table.iter().flat_map(|t| t.0.iter()) {
            let name = k.get_ref();
            if name.is_empty() {
                return Err(self.fail(Some(&k.span()), format!("{key}: a tool name must not be empty")));
            }
            let value = self.expand(v, &format!("{key}.{name}"))?;
            out.push((k, name.clone(), value));
        }
        Ok(out)
    }

    /// The shaping of this server: globs parsed, and the renames and descriptions checked
    /// against each other and the `tools` filter (what can be known before the server lists
    /// its tools; a key naming no tool of the server is logged when its list arrives).
    ///
    /// A new name is exposed as `exposed(name)` (namespace and separator before it), which must
    /// fit the name budget (`budget`) and its alphabet: mcpmux maps no name a rename chose.
    pub(super) fn shaping(
        &self,
        raw: RawShaping<'_>,
        (exposed, budget): (&dyn Fn(&str) -> String, usize),
    ) -> Result<Shaping, ConfigError> {
        let tools = self.filter(raw.tools, "tools")?;
        let prompts = self.filter(raw.prompts, "prompts")?;
        let resources = self.filter(raw.resources, "resources")?;
        let rename = self.pairs(raw.rename, "rename")?;
        let descriptions = self.pairs(raw.descriptions, "descriptions")?;
        let is_renamed = |name: &str| rename.iter().any(|(_, from, _)| from == name);
        for (n, (key, from, to)) in rename.iter().enumerate() {
            let at = Some(key.span());
            if !valid_tool_name(to) {
                let msg = format!("rename.{from}: the new name {to:?} must not be empty or hold whitespace");
                return Err(self.fail(at.as_ref(), msg));
            }
            let shown = exposed(to);
            if !super::valid_exposed_name(&shown, budget) {
                let msg = format!(
                    "rename.{from}: tool {from:?} would be exposed as {shown:?}, which is not 1 to {budget} characters of A-Z a-z 0-9 _ - starting with a letter or _ (gateway.max_name_length - gateway.name_reserve)"
                );
                return Err(self.fail(at.as_ref(), msg));
            }
            if !tools.admits(from) {
                let msg = format!(
                    "rename.{from}: tool {from:?} is left out by `tools` (include/exclude); rename only a tool hosts see"
                );
                return Err(self.fail(at.as_ref(), msg));
            }
            if let Some((_, other, _)) = rename[..n].iter().find(|(_, _, other_to)| other_to == to) {
                let msg = format!("rename: tools {other:?} and {from:?} would both be exposed as {to:?}");
                return Err(self.fail(at.as_ref(), msg));
            }
            // A name `tools.include` names literally stays a tool of its own, unless renamed away.
            let kept = (tools.include.iter()).any(|g| g.as_str() == to && !g.as_str().contains(['*', '?']));
            if kept && from != to && !is_renamed(to) && tools.admits(to) {
                let msg = format!(
                    "rename: tool {from:?} would be exposed as {to:?}, the name of tool {to:?} (kept by `tools.include`)"
                );
                return Err(self.fail(at.as_ref(), msg));
            }
        }
        let exposed_as = |name: &str| rename.iter().any(|(_, _, to)| to == name);
        for (key, name, _) in &descriptions {
            if is_renamed(name) && !exposed_as(name) {
                let to = rename
                    .iter()
                    .find(|(_, from, _)| from == name)
                    .map(|(_, _, to)| to.as_str());
                let msg = format!(
                    "descriptions.{name}: tool {name:?} is renamed to {:?}; descriptions are keyed by the new name",
                    to.unwrap_or_default()
                );
                return Err(self.fail(Some(&key.span()), msg));
            }
        }
        Ok(Shaping {
            tools,
            prompts,
            resources,
            rename: rename.into_iter().map(|(_, from, to)| (from, to)).collect(),
            descriptions: descriptions.into_iter().map(|(_, k, v)| (k, v)).collect(),
        })
    }
}

/// An `include`/`exclude` table of globs (`key`), each expanded and checked at its line: the
/// caller says how to expand a value and how to word a failure at a span.
pub(super) fn glob_filter(
    raw: &Option<RawFilter>,
    key: &str,
    expand: impl Fn(&Spanned<String>, &str) -> Result<String, ConfigError>,
    fail: impl Fn(&std::ops::Range<usize>, String) -> ConfigError,
) -> Result<Filter, ConfigError> {
    let Some(raw) = raw else {
        return Ok(Filter::default());
    };
    let globs = |list: &Option<Vec<Spanned<String>>>, which: &str| {
        let mut out = Vec::new();
        for (i, pattern) in list.iter().flatten().enumerate() {
            let at = format!("{key}.{which}[{i}]");
            let text = expand(pattern, &at)?;
            let glob =
                Glob::new(&text).map_err(|why| fail(&pattern.span(), format!("{at} {text:?}: {why}")))?;
            out.push(glob);
        }
        Ok::<_, ConfigError>(out)
    };
    Ok(Filter {
        include: globs(&raw.include, "include")?,
        exclude: globs(&raw.exclude, "exclude")?,
    })
}
