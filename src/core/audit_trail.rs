//! What the audit log hears of one gated request (`tools/call`, `prompts/get`, `resources/read`,
//! `resources/subscribe`, `completion/complete`): the method's `serve` notes the policy's decision
//! (and a step-up refusal) on its [`Trail`]; when `serve` returns, the decision line is written,
//! and once the request completes, a line with its outcome. Nothing is recorded without `[audit]`.

use super::access::Access;
use super::context::RequestCtx;
use super::hub::Hub;
use super::methods::Outcome;
use crate::audit::{record, AuditLog, Event, Kind};
use crate::auth::Credential;
use crate::config::UpstreamId;
use crate::policy::Decision;
use crate::protocol::{Message, RawObject, ResponsePayload};
use std::sync::Arc;
use std::time::Instant;

/// One gated request's audit record in the making.
pub struct Trail {
    pending: Option<Box<Pending>>,
}

struct Pending {
    log: Arc<AuditLog>,
    /// The request's facts: who, which session and trace, the method; then the name and target.
    base: Event,
    started: Instant,
    /// The decision, once `serve` asked the policy: allowed, rule, line, reason, arguments.
    decided: Option<Decided>,
}

struct Decided {
    allowed: bool,
    /// The first rule that made it: its index, line and included file.
    rule: Option<(usize, usize, Option<Arc<str>>)>,
    reason: String,
    arguments: Option<Box<serde_json::value::RawValue>>,
}

impl Trail {
    /// The trail of a request to `method`; an inert one without an audit log.
    pub fn start(hub: &Hub, ctx: &RequestCtx, method: &str) -> Trail {
        let Some(log) = hub.audit.clone() else {
            return Trail { pending: None };
        };
        let principal = ctx.principal.as_deref().map(|p| {
            let client_certificate = p.certificate.clone();
            match p.credential {
                Credential::Token => record::Principal {
                    issuer: p.issuer.clone(),
                    subject: Some(p.name.clone()),
                    client_id: p.client_id.clone(),
                    client_certificate,
                    ..Default::default()
                },
                Credential::ApiKey => record::Principal {
                    api_key: Some(p.name.clone()),
                    client_id: p.client_id.clone(),
                    client_certificate,
                    ..Default::default()
                },
                Credential::Certificate => record::Principal {
                    client_certificate,
                    ..Default::default()
                },
            }
        });
        let base = Event {
            // The SERVER span's trace (a request's `_meta.traceparent` may name another one).
            // The trace its spans are in (`_meta`'s, else the HTTP header's, else its own).
            trace_id: ctx.trace_id.to_string(),
            session: ctx.session.as_ref().map(|s| s.log_id().to_string()),
            principal,
            profile: ctx.profile.as_deref().map(str::to_string),
            method: method.to_string(),
            ..Event::default()
        };
        Trail {
            pending: Some(Box::new(Pending {
                log,
                base,
                started: Instant::now(),
                decided: None,
            })),
        }
    }

    /// Whether the policy lets the request use `exposed` (going to `target`, the upstream and its
    /// own name, when it exists). With an audit log the whole decision (its rule and reason) is
    /// noted, and the request's arguments kept when a rule that applies asks for them; without
    /// one only the allocation-free answer is asked for.
    pub fn decide(
        &mut self,
        hub: &Hub,
        access: &Access,
        exposed: &str,
        target: Option<(&UpstreamId, &str)>,
        params: &RawObject,
    ) -> bool {
        if self.pending.is_none() {
            return counted(access.permits(exposed));
        }
        let decision = access.decide(exposed);
        self.decided(hub, access, exposed, &decision, target, params);
        counted(decision.allowed)
    }

    fn decided(
        &mut self,
        hub: &Hub,
        access: &Access,
        exposed: &str,
        decision: &Decision,
        target: Option<(&UpstreamId, &str)>,
        params: &RawObject,
    ) {
        let Some(pending) = self.pending.as_mut() else {
            return;
        };
        pending.base.name = Some(exposed.to_string());
        if let Some((upstream, original)) = target {
            let name = (hub.upstreams.get(upstream))
                .map_or_else(|| upstream.as_str().to_string(), |s| s.server.name.clone());
            pending.base.upstream = Some(name);
            pending.base.original = Some(original.to_string());
        }
        let arguments = access
            .audit_arguments()
            .then(|| {
                params
                    .get("arguments")
                    .or_else(|| params.get("argument"))
                    .map(|a| a.to_owned())
            })
            .flatten();
        pending.decided = Some(Decided {
            allowed: decision.allowed,
            rule: (decision.because.first()).map(|m| (m.rule, m.line, m.file.clone())),
            reason: decision.to_string(),
            arguments,
        });
    }

    /// Whether there is an audit log to write to (what is only for it need not be looked up).
    pub fn is_on(&self) -> bool {
        self.pending.is_some()
    }

    /// The call goes with the upstream grant `id` (named on its lines, never the token).
    pub fn used_grant(&mut self, id: Option<String>) {
        if let Some(pending) = self.pending.as_mut() {
            pending.base.grant = id;
        }
    }

    /// The policy allowed it, but `[[auth.step_up]]` wants scopes the principal lacks.
    pub fn refused_by_step_up(&mut self, needed: &[String]) {
        let Some(decided) = self.pending.as_mut().and_then(|p| p.decided.as_mut()) else {
            return;
        };
        decided.allowed = false;
        decided.reason = format!("step-up: it needs scopes {needed:?} ({})", decided.reason);
    }

    /// `serve` is done: the decision line goes out, and the completion line now (an answer of
    /// mcpmux's own) or when the forwarded call ends.
    pub fn finish(self, mut outcome: Outcome) -> Outcome {
        let Some(pending) = self.pending else {
            return outcome;
        };
        let Pending {
            log,
            base,
            started,
            decided,
        } = *pending;
        let Some(decided) = decided else { return outcome };
        let (rule, rule_line, rule_file) = decided.rule.map_or((None, None, None), |(i, line, file)| {
            (
                Some(format!("policy[{i}]")),
                Some(line),
                file.map(|f| f.to_string()),
            )
        });
        log.record(Event {
            time: record::now_rfc3339(),
            event: Kind::Decision,
            decision: Some(if decided.allowed { "allowed" } else { "denied" }),
            rule,
            rule_line,
            rule_file,
            reason: Some(decided.reason),
            arguments: decided.arguments,
            ..base.clone()
        });
        if !decided.allowed {
            return outcome;
        }
        let completion = Completion {
            inner: Some((log, base, started)),
        };
        match &mut outcome {
            Outcome::Reply(Message::Response { payload, .. }) => completion.complete_with(match payload {
                ResponsePayload::Error(error) => record::error_ending(error.get()),
                ResponsePayload::Result(result) => record::result_ending(result.get()),
            }),
            Outcome::Forward(call) => call.audit = Some(completion),
            _ => completion.complete_with(("ok", None, None)),
        }
        outcome
    }
}

/// A policy decision, a refusal counted by telemetry.
fn counted(allowed: bool) -> bool {
    if !allowed {
        crate::telemetry::record::refused(crate::telemetry::Refusal::Policy);
    }
    allowed
}

/// The completion line of a forwarded call still to come: written with the call's response,
/// or as `cancelled` if the call ends without one (the host cancelled it or went away).
pub struct Completion {
    inner: Option<(Arc<AuditLog>, Event, Instant)>,
}

impl Completion {
    /// The call's response (its JSON-RPC text) reached the host.
    pub fn complete(self, response: &str) {
        if self.inner.is_none() {
            return;
        }
        self.complete_with(record::outcome_of(response));
    }

    fn complete_with(mut self, (outcome, error_code, is_error): record::Ending) {
        let Some((log, base, started)) = self.inner.take() else {
            return;
        };
        log.record(Event {
            time: record::now_rfc3339(),
            event: Kind::Completed,
            outcome: Some(outcome),
            error_code,
            is_error,
            // Milliseconds to the microsecond.
            duration_ms: Some(started.elapsed().as_micros() as f64 / 1000.0),
            ..base
        });
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if self.inner.is_some() {
            Completion {
                inner: self.inner.take(),
            }
            .complete_with(("cancelled", None, None));
        }
    }
}
