//! What every host request carries through the pipeline: its era, its session if it has one (a
//! session-era host's, or the throwaway one a modern call runs in), who sent it, and its span.

use crate::auth::Principal;
use crate::session::Session;
use std::sync::Arc;

/// The protocol era a request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2025-03-26 to 2025-11-25: `initialize`, `Mcp-Session-Id`.
    Session,
    /// 2026-07-28: every request carries its own `_meta` envelope.
    Modern,
}

/// The name and version a host gives of itself on the request (a 2026-07-28 request's
/// `_meta` `io.modelcontextprotocol/clientInfo`), each clipped to 64 characters; read only
/// for the access line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientName {
    pub name: String,
    pub version: Option<String>,
}

impl ClientName {
    /// The name and version of a `clientInfo` object (`None` without a string `name`).
    pub fn of(info: &crate::protocol::RawObject) -> Option<ClientName> {
        let part = |key| {
            info.get_str(key)
                .map(|text| text.chars().take(64).collect::<String>())
        };
        Some(ClientName {
            name: part("name")?,
            version: part("version"),
        })
    }
}

/// One host request's context.
pub struct RequestCtx {
    pub era: Era,
    pub session: Option<Arc<Session>>,
    /// Who sent the request, as authentication established it; `None` while the gateway
    /// authenticates nobody.
    pub principal: Option<Arc<Principal>>,
    /// The request's span.
    pub span: tracing::Span,
    /// The request's trace id (its `_meta.traceparent`'s, else its HTTP `traceparent`'s, else a
    /// fresh one), for the access line and the audit log.
    pub trace_id: Arc<str>,
    /// The `[profiles.NAME]` whose endpoint the request came to: it sees that profile's view of
    /// the catalog only; `None`: the main endpoint (the whole catalog).
    pub profile: Option<Arc<str>>,
    /// The client the request itself names (2026-07-28), when the access line wants it; a
    /// session-era request's client is its session's.
    pub client: Option<ClientName>,
}

impl RequestCtx {
    /// A request on `session`, in the era the session speaks.
    pub fn on(session: Arc<Session>) -> Self {
        let era = if session.is_modern() {
            Era::Modern
        } else {
            Era::Session
        };
        let span = tracing::debug_span!("mcp_request", session = %session.log_id(), era = ?era);
        RequestCtx {
            era,
            profile: session.profile().cloned(),
            session: Some(session),
            principal: None,
            span,
            trace_id: crate::audit::trace_id::current(),
            client: None,
        }
    }

    /// A session-era `initialize`: the session it opens does not exist yet.
    pub fn opening() -> Self {
        RequestCtx {
            era: Era::Session,
            session: None,
            principal: None,
            span: tracing::Span::none(),
            trace_id: crate::audit::trace_id::current(),
            profile: None,
            client: None,
        }
    }

    /// A 2026-07-28 request that needs no session (lists, discovery).
    pub fn modern() -> Self {
        RequestCtx {
            era: Era::Modern,
            session: None,
            principal: None,
            span: tracing::debug_span!("mcp_request", era = ?Era::Modern),
            trace_id: crate::audit::trace_id::current(),
            profile: None,
            client: None,
        }
    }

    /// The same request, come to the endpoint of `profile` (`None`: the main endpoint).
    pub fn at(mut self, profile: Option<Arc<str>>) -> Self {
        self.profile = profile;
        self
    }

    /// The same request, from the client `client` names.
    pub fn from_client(mut self, client: Option<ClientName>) -> Self {
        self.client = client;
        self
    }

    /// The same request, sent by `principal` (noted on its session: see `Session::note_viewer`).
    pub fn by(mut self, principal: Option<Arc<Principal>>) -> Self {
        if let (Some(session), Some(principal)) = (&self.session, &principal) {
            session.note_viewer(principal.clone());
        }
        self.principal = principal;
        self
    }

    /// The same request in trace `trace_id` (the one its `_meta.traceparent` names).
    pub fn in_trace(&self, trace_id: Arc<str>) -> RequestCtx {
        RequestCtx {
            era: self.era,
            session: self.session.clone(),
            principal: self.principal.clone(),
            span: self.span.clone(),
            trace_id,
            profile: self.profile.clone(),
            client: self.client.clone(),
        }
    }

    /// Note activity on the session (keeps it from being reaped).
    pub fn touch(&self) {
        if let Some(session) = &self.session {
            session.touch();
        }
    }
}
