//! Who may use the operator routes that show what the gateway does (`/metrics` and the `/admin`
//! page), as a tower layer around them. On `gateway.admin_listen`, or on the main listener
//! while no authentication is in force, anyone who reaches the listener may (the Host/Origin
//! check still applies). With `[auth]` and no `admin_listen`, a request needs credentials (401
//! with the usual challenge without them) of a principal that `[[policy]]` allows
//! [`ADMIN_PERMISSION`] (403 otherwise). Deny by default: with no `[[policy]]` rule nobody is
//! allowed, and only an `allow` glob written for mcpmux's own permissions (starting `mcpmux:`)
//! grants it, so `allow = ["*"]`, meant for tools, does not.

use crate::auth::Principal;
use crate::core::hub::Hub;
use crate::policy::PrincipalFacts;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{header, StatusCode};
use std::sync::Arc;

/// What a `[[policy]]` rule's `allow` names to let its principals use the operator routes.
pub const ADMIN_PERMISSION: &str = "mcpmux:admin";
/// The prefix of an `allow` glob that may grant [`ADMIN_PERMISSION`].
const OWN_PERMISSIONS: &str = "mcpmux:";

/// `routes` behind the operator rule: as they are when `open` (served on `admin_listen`), else
/// authenticated by the `[auth]` in force (a reload may add or remove it) and allowed by the
/// hub's policy; while no `[auth]` is in force, as they are.
pub fn guard(routes: axum::Router, hub: &Arc<Hub>, open: bool) -> axum::Router {
    if open {
        return routes;
    }
    let gate = axum::middleware::from_fn_with_state(Arc::downgrade(hub), admit);
    // Authentication runs first (outermost): the gate sees the principal it found.
    routes
        .layer(gate)
        .layer(crate::auth::layer::AuthLayer::in_force(hub.auth.clone()))
}

/// Let the request through when no `[auth]` is in force, or when policy allows its principal
/// [`ADMIN_PERMISSION`].
async fn admit(State(hub): State<std::sync::Weak<Hub>>, request: Request<Body>, next: Next) -> Response {
    let Some(hub) = hub.upgrade() else {
        return (StatusCode::SERVICE_UNAVAILABLE, "stopping\n").into_response();
    };
    if !hub.auth.is_on() {
        return next.run(request).await;
    }
    let principal = request.extensions().get::<Arc<Principal>>().cloned();
    let allowed = principal
        .as_ref()
        .is_some_and(|principal| allows_admin(&hub.policy(), principal));
    if allowed {
        return next.run(request).await;
    }
    let name = principal.as_ref().map_or("", |p| p.name.as_str());
    tracing::warn!(principal = %name, path = %request.uri().path(), "operator route refused: {ADMIN_PERMISSION} not allowed by [[policy]]");
    crate::telemetry::record::refused(crate::telemetry::Refusal::Policy);
    let body = format!("forbidden: [[policy]] does not allow this principal {ADMIN_PERMISSION}\n");
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "text/plain")],
        body,
    )
        .into_response()
}

/// Whether `policy` allows `principal` [`ADMIN_PERMISSION`]: an applying rule's `allow` glob
/// starting `mcpmux:` matches it, and no applying rule denies it.
pub fn allows_admin(policy: &crate::policy::Policy, principal: &Principal) -> bool {
    let facts = PrincipalFacts::new(
        &principal.name,
        principal.groups.iter().map(String::as_str),
        principal.scopes.iter().map(String::as_str),
    );
    let decision = policy.decide(&facts, ADMIN_PERMISSION);
    decision.allowed
        && (decision.because.iter())
            .any(|m| m.glob.as_deref().is_some_and(|g| g.starts_with(OWN_PERMISSIONS)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::policy::Policy;

    fn policy(rules: &str) -> Policy {
        let text = format!("[auth]\n[[auth.api_keys]]\nname = \"ops\"\nkey = \"k1\"\n{rules}");
        let config = Config::from_toml_str(&text, "t.toml", &|_| None).unwrap();
        Policy::from_config(&config)
    }

    fn principal(name: &str) -> Principal {
        Principal {
            name: name.into(),
            issuer: None,
            client_id: None,
            groups: Vec::new(),
            scopes: Vec::new(),
            token: None,
            claims: Vec::new(),
            credential: crate::auth::Credential::ApiKey,
            certificate: None,
        }
    }

    #[test]
    fn only_an_own_allow_grants_admin() {
        let rules = "[[policy]]\nprincipals = [\"ops\"]\nallow = [\"mcpmux:admin\"]\n\
                     [[policy]]\nprincipals = [\"dev\"]\nallow = [\"*\"]\n";
        let policy = policy(rules);
        assert!(allows_admin(&policy, &principal("ops")));
        // A wildcard meant for tools does not reach mcpmux's own permissions.
        assert!(!allows_admin(&policy, &principal("dev")));
        assert!(!allows_admin(&policy, &principal("nobody")));
    }

    #[test]
    fn no_policy_allows_nobody_and_deny_wins() {
        assert!(!allows_admin(&policy(""), &principal("ops")));
        let rules = "[[policy]]\nprincipals = [\"ops\"]\nallow = [\"mcpmux:*\"]\ndeny = [\"mcpmux:admin\"]\n";
        assert!(!allows_admin(&policy(rules), &principal("ops")));
    }
}
