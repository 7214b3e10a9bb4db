//! The semantic pass of loading: the raw tables (what the structural pass in `problems` kept)
//! built into a [`Config`] section by section, every problem collected, none followed by the
//! problems it would cause (a section that failed is still a name others may use, and a rule
//! about several sections is skipped when one of them failed).

use super::interpolate::valid_name;
use super::raw::RawConfig;
use super::spanned::Spanned;
use super::vault::build_vault;
use super::{
    audit, auth, build_gateway, build_server, cluster, pinning, policy, problems, profiles, telemetry,
    Config, ConfigError, Ctx, DisabledServer, ServerConfig, UpstreamAuth, UpstreamId,
};

impl Config {
    /// `sites` gets where the keys the checks on the machine are about were written (each
    /// server's table, `command` and `cwd`; `audit.path`; `gateway.listen` and `admin_listen`;
    /// the files of `gateway.tls`; `cluster.advertise`).
    pub(super) fn build(
        raw: RawConfig,
        dropped: &problems::Dropped,
        ctx: &Ctx<'_>,
        errors: &mut Vec<ConfigError>,
        sites: &mut Vec<(String, usize)>,
    ) -> Config {
        let source_name = ctx.sources.main();
        let mut site = |key: String, span: Option<std::ops::Range<usize>>| {
            if let Some(span) = span {
                sites.push((key, span.start));
            }
        };
        site(
            "gateway.listen".into(),
            raw.gateway
                .as_ref()
                .and_then(|g| g.listen.as_ref())
                .map(|v| v.span()),
        );
        let admin = raw.gateway.as_ref().and_then(|g| g.admin_listen.as_ref());
        site("gateway.admin_listen".into(), admin.map(|v| v.span()));
        if let Some(tls) = raw.gateway.as_ref().and_then(|g| g.tls.as_ref()) {
            for (key, value) in tls.keys() {
                site(format!("gateway.tls.{key}"), Some(value.span()));
            }
        }
        site("audit.path".into(), raw.audit.as_ref().map(|a| a.path.span()));
        let advertise = raw.cluster.as_ref().and_then(|c| c.advertise.as_ref());
        site("cluster.advertise".into(), advertise.map(|v| v.span()));
        for (key, server) in &raw.servers.0 {
            let at = format!("servers.{}", key.get_ref());
            site(format!("{at}.command"), server.command.as_ref().map(|v| v.span()));
            site(format!("{at}.cwd"), server.cwd.as_ref().map(|v| v.span()));
            site(format!("{at}.auth"), server.auth.as_ref().map(|a| a.mode.span()));
            for (key, value) in server.tls.iter().flat_map(|tls| tls.get_ref().keys()) {
                site(format!("{at}.tls.{key}"), Some(value.span()));
            }
            let waits = (server.needs_env.iter().flatten()).find(|v| (ctx.env)(v.get_ref()).is_none());
            site(format!("{at}.needs_env"), waits.map(|v| v.span()));
            site(at, Some(key.span()));
        }
        let raw_gateway = raw.gateway.unwrap_or_default();
        let gateway = ctx.section(errors, || build_gateway(ctx, &raw_gateway));
        let gateway_ok = gateway.is_some() && !dropped.section("gateway");
        let mut gateway = gateway.unwrap_or_default();
        let auth = match &raw.auth {
            Some(table) => ctx.section(errors, || auth::build_auth(ctx, table, &gateway.public_url)),
            None => None,
        };
        let auth_ok = auth.is_some() || (raw.auth.is_none() && !dropped.section("auth"));
        // A client certificate required of every connection (`gateway.tls.client_ca`) is
        // authentication too.
        let client_certs = gateway.client_certificates();
        let open = !gateway.listen.ip().is_loopback() && !gateway.allow_unauthenticated && !client_certs;
        if gateway_ok && auth.is_none() && auth_ok && open {
            let msg = format!(
                "gateway.listen {} accepts connections from other machines and there is no [auth] table: \
                 anyone who can reach it could call every tool. Add [auth], listen on 127.0.0.1, or set \
                 gateway.allow_unauthenticated = true (e.g. behind an authenticating proxy)",
                gateway.listen
            );
            errors.push(match &raw_gateway.listen {
                Some(v) => ctx.invalid(&v.span(), msg),
                None => ConfigError::Invalid {
                    message: format!("{source_name}: {msg}"),
                },
            });
        }
        let mut servers: Vec<ServerConfig> = Vec::with_capacity(raw.servers.0.len());
        let mut spans = Vec::with_capacity(raw.servers.0.len());
        let mut disabled = Vec::new();
        // Servers that did not build are still names profiles and rules may use.
        let mut failed: Vec<UpstreamId> = dropped.servers.iter().map(|n| UpstreamId::new(n)).collect();
        for (key, raw_server) in raw.servers.0 {
            let enabled = raw_server.enabled.as_ref().is_none_or(|v| *v.get_ref());
            let name = key.get_ref().clone();
            if !enabled {
                // What would stop it from starting is a warning until it is turned on.
                let mut problems = Vec::new();
                ctx.section(&mut problems, || build_server(ctx, &key, raw_server, &gateway));
                let problem = (!problems.is_empty()).then(|| {
                    problems
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ")
                });
                disabled.push(DisabledServer {
                    id: UpstreamId::new(&name),
                    name,
                    problem,
                    waiting: None,
                });
                continue;
            }
            let needs = needs_env(ctx, &name, raw_server.needs_env.as_deref().unwrap_or_default());
            let unset = match needs {
                Ok(unset) => unset,
                Err(err) => {
                    errors.push(err);
                    failed.push(UpstreamId::new(&name));
                    continue;
                }
            };
            if !unset.is_empty() {
                // Checked all the same: only what the variables it waits for explain is waived.
                let mut problems = Vec::new();
                ctx.section(&mut problems, || build_server(ctx, &key, raw_server, &gateway));
                problems.retain(|p| !matches!(p, ConfigError::MissingEnv { var, .. } if unset.contains(var)));
                if !problems.is_empty() {
                    errors.extend(problems);
                    failed.push(UpstreamId::new(&name));
                    continue;
                }
                let waiting = format!(
                    "not started: it needs {} (needs_env), not set in mcpmux's environment; set {} and \
                     restart mcpmux to serve it",
                    unset.join(", "),
                    match unset.len() {
                        1 => "it",
                        _ => "them",
                    }
                );
                tracing::debug!(server = %name, "{waiting}");
                disabled.push(DisabledServer {
                    id: UpstreamId::new(&name),
                    name,
                    problem: None,
                    waiting: Some(waiting),
                });
                continue;
            }
            let auth_mode = raw_server.auth.as_ref().map(|a| a.mode.span());
            let Some(server) = ctx.section(errors, || build_server(ctx, &key, raw_server, &gateway)) else {
                failed.push(UpstreamId::new(&name));
                continue;
            };
            let host_token = matches!(
                server.auth,
                UpstreamAuth::TokenExchange(_) | UpstreamAuth::Forward
            );
            if let (true, None, true, Some(span)) = (host_token, &auth, auth_ok, auth_mode) {
                let msg = format!(
                    "server {name:?}: auth.mode = {:?} needs [auth]: it uses the host's validated bearer \
                     token, and without authentication no host presents one",
                    server.auth.mode()
                );
                errors.push(ctx.invalid(&span, msg));
            }
            spans.push((server.id.clone(), key.span()));
            if !server.namespace.is_empty() && server.namespace.contains(&gateway.separator) {
                tracing::warn!(
                    server = %server.name,
                    "namespace {:?} contains the separator {:?}; prefixed names may be ambiguous",
                    server.namespace,
                    gateway.separator
                );
            }
            let prefix = format!("{}{}", server.namespace, gateway.separator);
            if !server.namespace.is_empty() && !super::valid_exposed_name(&format!("{prefix}x"), usize::MAX) {
                tracing::warn!(
                    server = %server.name,
                    "names prefixed {prefix:?} leave what model APIs accept (A-Z a-z 0-9 _ -, starting with a letter or _): \
                     its tools and prompts are exposed under a mapped prefix ('.' becomes '_', a leading digit or '-' \
                     gets a '_' before it), which [[policy]] and profile globs must match",
                );
            }
            servers.push(server);
        }
        let policy_ok = !dropped.section("policy");
        let rules = raw.policy.len();
        let policy = policy::build_policy(ctx, raw.policy, errors);
        let policy_ok = policy_ok && policy.len() == rules;
        if let (Some(first), None, true, false) = (policy.first(), &auth, auth_ok, client_certs) {
            errors.push(ConfigError::Invalid {
                message: format!(
                    "{}: [[policy]] needs [auth] or gateway.tls.client_ca: without authentication no \
                     request has a principal for the rules to decide on",
                    first.at(source_name)
                ),
            });
        }
        let audit = match &raw.audit {
            Some(table) => ctx.section(errors, || audit::build_audit(ctx, table)),
            None => None,
        };
        if (audit.is_some() || raw.audit.is_none()) && !dropped.section("audit") && policy_ok {
            ctx.section(errors, || {
                audit::check_rules(source_name, &policy, audit.as_ref())
            });
        }
        let cluster = match &raw.cluster {
            Some(table) => ctx.section(errors, || {
                cluster::build_cluster(ctx, table, gateway.listen, gateway.tls.is_some())
            }),
            None => None,
        };
        if raw.cluster.is_some() && raw_gateway.shutdown_delay_secs.is_none() {
            // Replicas stand behind a balancer: keep serving until it has seen `/readyz` flip.
            gateway.shutdown_delay = cluster::DEFAULT_SHUTDOWN_DELAY;
        }
        let vault = (ctx.section(errors, || build_vault(ctx, raw.vault.as_ref(), cluster.as_ref())))
            .unwrap_or_default();
        let known = (&servers[..], &disabled[..], &failed[..]);
        let profiles = profiles::build_profiles(ctx, raw.profiles, &gateway, known, errors);
        let telemetry = (ctx.section(errors, || telemetry::build_telemetry(ctx, raw.telemetry.as_ref())))
            .unwrap_or_default();
        let pinning =
            (ctx.section(errors, || pinning::build_pinning(ctx, raw.pinning.as_ref()))).unwrap_or_default();
        let config = Config {
            gateway,
            servers,
            disabled,
            policy,
            auth,
            audit,
            cluster,
            vault,
            profiles,
            telemetry,
            pinning,
        };
        // The rules of any configuration, pointed at the line of the server they are about.
        for problem in config.problems() {
            let span = (problem.server.as_ref())
                .and_then(|id| spans.iter().find(|(s, _)| s == id).map(|(_, span)| span));
            errors.push(match span {
                Some(span) => ctx.invalid(span, &problem.message),
                None => ConfigError::Invalid {
                    message: format!("{source_name}: {problem}"),
                },
            });
        }
        config
    }
}

/// The variables of `needs` (a server's `needs_env`) that are not set; an error for a name that
/// is not a variable's.
fn needs_env(ctx: &Ctx<'_>, server: &str, needs: &[Spanned<String>]) -> Result<Vec<String>, ConfigError> {
    let mut unset = Vec::new();
    for var in needs {
        let name = var.get_ref();
        if !valid_name(name) {
            let msg = format!(
                "servers.{server}.needs_env: {name:?} is not a variable name (letters, digits and '_', not \
                 starting with a digit)"
            );
            return Err(ctx.invalid(&var.span(), msg));
        }
        if (ctx.env)(name).is_none() && !unset.contains(name) {
            unset.push(name.clone());
        }
    }
    Ok(unset)
}
