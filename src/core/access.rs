//! What a request's principal may see and use, by the `[[policy]]` rules: the one place the
//! pipeline asks, so every list is filtered and every call, get, read, subscribe and completion
//! is gated by the same decision, and a hidden name behaves exactly like one that does not exist.

use crate::auth::Principal;
use crate::core::context::RequestCtx;
use crate::core::hub::Hub;
use crate::policy::{Decision, Policy, PrincipalFacts, Reason};
use std::sync::Arc;

/// One request's view under the policy in force.
pub struct Access {
    policy: Arc<Policy>,
    principal: Option<Arc<Principal>>,
}

impl Access {
    /// The view of the request `ctx` under the hub's policy.
    pub fn of(hub: &Hub, ctx: &RequestCtx) -> Access {
        Access {
            policy: hub.policy(),
            principal: ctx.principal.clone(),
        }
    }

    /// Whether there is no policy at all (every name is visible: lists need no filtering).
    pub fn sees_everything(&self) -> bool {
        self.policy.is_open()
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
    PrincipalFacts::new(
        &principal.name,
        principal.groups.iter().map(String::as_str),
        principal.scopes.iter().map(String::as_str),
    )
}
