//! What a request's principal may see and use, by the `[[policy]]` rules: the one place the
//! pipeline asks, so every list is filtered and every call, get, read, subscribe and completion
//! is gated by the same decision, and a hidden name behaves exactly like one that does not exist.
//! A request to a profile's endpoint sees that profile's view first (`[[policy]]` narrows it
//! further, never widens it).

use crate::auth::Principal;
use crate::catalog::{profile, ExposedItem, ListKind};
use crate::config::{Config, Profile, UpstreamId};
use crate::core::context::RequestCtx;
use crate::core::hub::Hub;
use crate::policy::{Decision, Policy, PrincipalFacts, Reason};
use std::sync::Arc;

/// One request's view under the policy in force.
pub struct Access {
    policy: Arc<Policy>,
    principal: Option<Arc<Principal>>,
    scope: Scope,
}

/// Which part of the catalog a request's endpoint serves.
enum Scope {
    /// The main endpoint: all of it.
    Whole,
    /// A profile's endpoint: the profile (by its position in the configuration held).
    Profile(Arc<Config>, usize),
    /// The endpoint of a profile a reload removed: nothing.
    Gone,
}

impl Access {
    /// The view of the request `ctx` under the hub's policy (and its profile's view).
    pub fn of(hub: &Hub, ctx: &RequestCtx) -> Access {
        let scope = match &ctx.profile {
            None => Scope::Whole,
            Some(name) => {
                let config = hub.config_full();
                match config.profiles.iter().position(|p| *p.name == **name) {
                    Some(at) => Scope::Profile(config, at),
                    None => Scope::Gone,
                }
            }
        };
        Access {
            policy: hub.policy(),
            principal: ctx.principal.clone(),
            scope,
        }
    }

    /// The request's principal, when authentication is on.
    pub fn principal(&self) -> Option<&Principal> {
        self.principal.as_deref()
    }

    /// Whether there is no policy at all and the endpoint serves the whole catalog (every name
    /// is visible: lists need no filtering).
    pub fn sees_everything(&self) -> bool {
        self.policy.is_open() && matches!(self.scope, Scope::Whole)
    }

    /// Whether there is no policy at all (what is seen is the same for every principal).
    pub fn policy_is_open(&self) -> bool {
        self.policy.is_open()
    }

    /// The profile whose view the request sees; `None` on the main endpoint.
    pub fn profile(&self) -> Option<&Profile> {
        match &self.scope {
            Scope::Profile(config, at) => config.profiles.get(*at),
            _ => None,
        }
    }

    /// Whether the request's endpoint serves the item of `upstream` known as `exposed` in lists
    /// of `kind` (always on the main endpoint; what its profile keeps on a profile's).
    pub fn in_view(&self, kind: ListKind, upstream: &UpstreamId, exposed: &str) -> bool {
        match &self.scope {
            Scope::Whole => true,
            Scope::Profile(config, at) => {
                (config.profiles.get(*at)).is_some_and(|p| profile::admits(p, kind, upstream, exposed))
            }
            Scope::Gone => false,
        }
    }

    /// Whether the request's endpoint serves anything of `upstream` at all.
    pub fn has_server(&self, upstream: &UpstreamId) -> bool {
        match &self.scope {
            Scope::Whole => true,
            Scope::Profile(..) => self.profile().is_some_and(|p| p.has_server(upstream)),
            Scope::Gone => false,
        }
    }

    /// The items of lists of `kind` this request sees: its endpoint's view, then the policy.
    pub fn item_filter(&self, kind: ListKind) -> impl Fn(&ExposedItem) -> bool + '_ {
        let policy = self.filter();
        move |item: &ExposedItem| self.in_view(kind, &item.upstream, &item.exposed) && policy(&item.exposed)
    }

    /// What a list cursor of this request is bound to: the profile and, under a policy, the
    /// principal (so a cursor pages no other endpoint's or principal's list); empty on the main
    /// endpoint without a policy.
    pub fn cursor_owner(&self) -> String {
        let mut owner = String::new();
        if let Some(profile) = self.profile() {
            owner = format!("profile\u{0}{}\u{0}", profile.name);
        }
        if let (Some(principal), false) = (&self.principal, self.policy.is_open()) {
            owner.push_str(&principal.owner());
        }
        owner
    }

    /// Whether the principal may see and use `exposed` (a tool or prompt name, a resource URI
    /// or template as hosts see it).
    pub fn permits(&self, exposed: &str) -> bool {
        self.filter()(exposed)
    }

    /// The decision on `exposed` and the rules that made it (what [`Access::permits`] answers,
    /// with its reasons, for the audit log).
    pub fn decide(&self, exposed: &str) -> Decision {
        if self.policy.is_open() {
            return Decision::new(true, Reason::NoPolicy, Vec::new());
        }
        match self.principal.as_deref() {
            Some(principal) => self.policy.decide(&facts(principal), exposed),
            None => Decision::new(false, Reason::NoRuleApplies, Vec::new()),
        }
    }

    /// Whether a rule that applies to the principal says `audit_arguments = true`.
    pub fn audit_arguments(&self) -> bool {
        let principal = self.principal.as_deref();
        principal.is_some_and(|p| self.policy.for_principal(&facts(p)).audit_arguments())
    }

    /// The same test for many names at once (a list), the principal's facts gathered once.
    /// Deny by default: with rules, a request without a principal sees nothing (the
    /// configuration refuses rules without `[auth]`, so that is only a guard).
    pub fn filter(&self) -> impl Fn(&str) -> bool + '_ {
        // Without rules nothing is gathered: every call asks this. With rules, the rules that
        // apply to the principal are found once, not once per name.
        let open = self.policy.is_open();
        let principal = if open { None } else { self.principal.as_deref() };
        let view = principal.map(|principal| self.policy.for_principal(&facts(principal)));
        move |exposed: &str| open || view.as_ref().is_some_and(|v| v.allows(exposed))
    }
}

/// The facts of a principal the rules match on.
pub(crate) fn facts(principal: &Principal) -> PrincipalFacts<'_> {
    crate::policy::Viewer::facts(principal)
}
