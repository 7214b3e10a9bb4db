//! The invariants of a rendered kustomize overlay (`deploy/kubernetes/overlays/*`), checked on
//! the objects `kubectl kustomize` produced: probes, grace period against the drain timeout of
//! the config in the ConfigMap, security context, replicas, and what the `ha` overlay adds.

use serde_json::Value;

/// One overlay rendered by `kubectl kustomize` and read back as JSON objects.
pub struct Rendered {
    /// `deploy/kubernetes/overlays/NAME`, the prefix of every problem reported.
    pub label: String,
    pub objects: Vec<Value>,
    /// The config files kustomize may have put in a ConfigMap: (path in the repository, text).
    pub config_sources: Vec<(String, String)>,
}

/// What an overlay must be.
pub struct Expect {
    pub replicas: u64,
    /// Three replicas sharing a `[cluster]` key behind a consistent-hash Ingress, with a PDB.
    pub ha: bool,
}

/// Seconds mcpmux takes, after the drain, to stop its stdio servers (SIGTERM to each process
/// group 2 s after closing stdin, SIGKILL 3 s later).
pub const CHILD_STOP_SECS: u64 = 5;

impl Rendered {
    fn all(&self, kind: &str) -> Vec<&Value> {
        self.objects
            .iter()
            .filter(|o| o["kind"].as_str() == Some(kind))
            .collect()
    }

    fn one(&self, kind: &str) -> Result<&Value, String> {
        match self.all(kind).as_slice() {
            [one] => Ok(one),
            many => Err(format!(
                "{}: expected exactly one {kind}, found {}",
                self.label,
                many.len()
            )),
        }
    }

    fn named(&self, kind: &str, name: &str) -> Option<&Value> {
        self.all(kind)
            .into_iter()
            .find(|o| o["metadata"]["name"].as_str() == Some(name))
    }

    /// The Deployment's config file: the path after `--config` in the container's args, found
    /// in the ConfigMap mounted on its folder. Returns (a name for messages: the repository
    /// file it came from and the path in the pod, TOML text).
    pub fn config_toml(&self) -> Result<(String, String), String> {
        let deployment = self.one("Deployment")?;
        let at = |what: &str| format!("{}: Deployment/{}: {what}", self.label, name(deployment));
        let pod = &deployment["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        let args = strings(&container["args"]);
        let path = args
            .iter()
            .position(|a| a == "--config")
            .and_then(|i| args.get(i + 1))
            .ok_or_else(|| at("the container's args have no `--config FILE`"))?
            .clone();
        let (dir, file) = path
            .rsplit_once('/')
            .ok_or_else(|| at(&format!("--config {path} is not an absolute path")))?;
        let mount = array(&container["volumeMounts"])
            .into_iter()
            .find(|m| m["mountPath"].as_str() == Some(dir))
            .ok_or_else(|| at(&format!("nothing is mounted at {dir} (the --config folder)")))?;
        let volume = array(&pod["volumes"])
            .into_iter()
            .find(|v| v["name"] == mount["name"])
            .ok_or_else(|| at(&format!("no volume named {}", mount["name"])))?;
        let map_name = volume["configMap"]["name"]
            .as_str()
            .ok_or_else(|| at(&format!("the volume mounted at {dir} is not a ConfigMap")))?;
        let map = self
            .named("ConfigMap", map_name)
            .ok_or_else(|| at(&format!("ConfigMap {map_name} is not in the render")))?;
        let text = map["data"][file]
            .as_str()
            .ok_or_else(|| at(&format!("ConfigMap {map_name} has no key {file}")))?;
        let source = self
            .config_sources
            .iter()
            .find(|(_, source_text)| source_text == text)
            .map_or("(no file of the repository)", |(file, _)| file.as_str());
        Ok((format!("{source} (at {path} in the pod)"), text.to_string()))
    }

    /// Every invariant this overlay breaks, each naming the overlay, the object and the problem.
    pub fn problems(&self, expect: &Expect) -> Vec<String> {
        let mut out = Problems {
            label: &self.label,
            list: Vec::new(),
        };
        let deployment = match self.one("Deployment") {
            Ok(d) => d,
            Err(e) => return vec![e],
        };
        let (config_path, toml_text) = match self.config_toml() {
            Ok(found) => found,
            Err(e) => return vec![e],
        };
        let config: toml::Table = match toml::from_str(&toml_text) {
            Ok(table) => table,
            Err(e) => return vec![format!("{}: {config_path}: not TOML: {e}", self.label)],
        };
        let gateway = config.get("gateway").and_then(|g| g.as_table());
        let gw_str = |key: &str| gateway.and_then(|g| g.get(key)).and_then(|v| v.as_str());
        let port_of = |addr: &str| addr.rsplit(':').next().and_then(|p| p.parse::<u64>().ok());
        let listen_port = gw_str("listen").and_then(port_of).unwrap_or(8080);
        let probe_port = gw_str("admin_listen").and_then(port_of).unwrap_or(listen_port);
        let default_drain = mcpmux::config::GatewayConfig::default().drain_timeout.as_secs();
        let drain = gateway
            .and_then(|g| g.get("drain_timeout_secs"))
            .and_then(|v| v.as_integer())
            .map_or(default_drain, |v| v.max(0) as u64);
        // Before the drain, the shutdown delay: as written, else the `[cluster]` default.
        let delay = match gateway.and_then(|g| g.get("shutdown_delay_secs")) {
            Some(v) => v.as_integer().map_or(0, |v| v.max(0) as u64),
            None if config.contains_key("cluster") => mcpmux::config::CLUSTER_SHUTDOWN_DELAY.as_secs(),
            None => 0,
        };

        let d = deployment;
        let pod = &d["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        let labels = &d["spec"]["template"]["metadata"]["labels"];

        if d["spec"]["replicas"].as_u64() != Some(expect.replicas) {
            out.obj(
                d,
                format!(
                    "replicas is {}, expected {}",
                    d["spec"]["replicas"], expect.replicas
                ),
            );
        }
        for (probe, want) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
            let get = &container[probe]["httpGet"];
            if get["path"].as_str() != Some(want) {
                out.obj(
                    d,
                    format!("{probe} is not an HTTP GET of {want} (path {})", get["path"]),
                );
            }
            match container_port(container, &get["port"]) {
                Some(p) if p == probe_port => {}
                other => out.obj(
                    d,
                    format!(
                        "{probe} goes to port {other:?}, but {want} is served on {probe_port} \
                         (gateway.admin_listen, else listen, in {config_path})"
                    ),
                ),
            }
        }
        let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap_or(30);
        let pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
            .as_u64()
            .unwrap_or(0);
        if grace <= pre_stop + delay + drain + CHILD_STOP_SECS {
            out.obj(
                d,
                format!(
                    "terminationGracePeriodSeconds {grace} is not above preStop sleep {pre_stop} s \
                     + gateway.shutdown_delay_secs {delay} s + gateway.drain_timeout_secs {drain} s \
                     of {config_path} + {CHILD_STOP_SECS} s to stop the stdio servers: calls would \
                     be killed mid-drain"
                ),
            );
        }
        let pod_sc = &pod["securityContext"];
        let sc = &container["securityContext"];
        if pod_sc["runAsNonRoot"] != true && sc["runAsNonRoot"] != true {
            out.obj(
                d,
                "runAsNonRoot is not true (pod or container securityContext)".into(),
            );
        }
        if [&pod_sc["runAsUser"], &sc["runAsUser"]]
            .iter()
            .any(|u| u.as_u64() == Some(0))
        {
            out.obj(d, "runAsUser is 0 (root)".into());
        }
        if sc["readOnlyRootFilesystem"] != true {
            out.obj(d, "the container's readOnlyRootFilesystem is not true".into());
        }
        if sc["allowPrivilegeEscalation"] != false {
            out.obj(d, "the container's allowPrivilegeEscalation is not false".into());
        }
        if !strings(&sc["capabilities"]["drop"]).iter().any(|c| c == "ALL") {
            out.obj(d, "the container does not drop ALL capabilities".into());
        }
        let seccomp = |v: &Value| v["seccompProfile"]["type"].as_str() == Some("RuntimeDefault");
        if !seccomp(pod_sc) && !seccomp(sc) {
            out.obj(d, "no seccompProfile RuntimeDefault".into());
        }
        let tmp_is_empty_dir = array(&container["volumeMounts"])
            .iter()
            .find(|m| m["mountPath"].as_str() == Some("/tmp"))
            .and_then(|m| {
                array(&pod["volumes"])
                    .into_iter()
                    .find(|v| v["name"] == m["name"])
            })
            .is_some_and(|v| v.get("emptyDir").is_some());
        if !tmp_is_empty_dir {
            out.obj(
                d,
                "no emptyDir volume mounted at /tmp (the root filesystem is read-only)".into(),
            );
        }
        for key in ["/requests/cpu", "/requests/memory", "/limits/memory"] {
            if container["resources"].pointer(key).is_none() {
                out.obj(
                    d,
                    format!("the container has no resources{}", key.replace('/', ".")),
                );
            }
        }

        // Every ${VAR} of the config comes from the container's environment.
        for var in config_vars(&config) {
            let env = array(&container["env"])
                .into_iter()
                .find(|e| e["name"].as_str() == Some(&var));
            let Some(env) = env else {
                out.obj(
                    d,
                    format!("{config_path} uses ${{{var}}}, which the container's env does not set"),
                );
                continue;
            };
            let secret_ref = &env["valueFrom"]["secretKeyRef"];
            if let Some(secret_name) = secret_ref["name"].as_str() {
                let key = secret_ref["key"].as_str().unwrap_or("");
                let has_key = self
                    .named("Secret", secret_name)
                    .is_some_and(|s| s["stringData"].get(key).is_some() || s["data"].get(key).is_some());
                if !has_key {
                    out.obj(
                        d,
                        format!("env {var} reads key {key:?} of Secret {secret_name}, not in the render"),
                    );
                }
            }
        }
        // The Secret is generated from the user's secret.env (tests/deploy/secrets.rs): data
        // with a value for every key, never a committed stringData.
        for secret in self.all("Secret") {
            if secret.get("stringData").is_some() {
                out.obj(
                    secret,
                    "has stringData: a committed Secret, not a generated one".into(),
                );
            }
            for (key, value) in secret["data"].as_object().into_iter().flatten() {
                if value.as_str().is_none_or(str::is_empty) {
                    out.obj(secret, format!("{key} is empty"));
                }
            }
        }
        match self.one("Service") {
            Ok(service) => {
                if !selects(&service["spec"]["selector"], labels) {
                    out.obj(
                        service,
                        "its selector does not match the Deployment's pods".into(),
                    );
                }
                let targets: Vec<_> = array(&service["spec"]["ports"])
                    .iter()
                    .map(|p| container_port(container, &p["targetPort"]))
                    .collect();
                if !targets.contains(&Some(listen_port)) {
                    out.obj(
                        service,
                        format!("no port targets gateway.listen's port {listen_port}"),
                    );
                }
            }
            Err(e) => out.raw(e),
        }
        match self.one("NetworkPolicy") {
            Ok(policy) => {
                if !selects(&policy["spec"]["podSelector"]["matchLabels"], labels) {
                    out.obj(
                        policy,
                        "its podSelector does not match the Deployment's pods".into(),
                    );
                }
            }
            Err(e) => out.raw(e),
        }

        let pdbs = self.all("PodDisruptionBudget");
        for pdb in &pdbs {
            if !selects(&pdb["spec"]["selector"]["matchLabels"], labels) {
                out.obj(pdb, "its selector does not match the Deployment's pods".into());
            }
            if let Some(min) = pdb["spec"]["minAvailable"].as_u64() {
                if min >= expect.replicas {
                    out.obj(
                        pdb,
                        format!(
                            "minAvailable {min} blocks every eviction of {} replica(s)",
                            expect.replicas
                        ),
                    );
                }
            }
        }
        let hpas = self.all("HorizontalPodAutoscaler");
        for hpa in &hpas {
            let target = &hpa["spec"]["scaleTargetRef"];
            if target["kind"] != "Deployment" || target["name"] != d["metadata"]["name"] {
                out.obj(hpa, "does not scale the Deployment".into());
            }
            if hpa["spec"]["minReplicas"].as_u64() != Some(expect.replicas) {
                out.obj(
                    hpa,
                    format!(
                        "minReplicas is {}, expected {}",
                        hpa["spec"]["minReplicas"], expect.replicas
                    ),
                );
            }
            let (min, max) = (&hpa["spec"]["minReplicas"], &hpa["spec"]["maxReplicas"]);
            if max.as_u64() <= min.as_u64() {
                out.obj(
                    hpa,
                    format!("maxReplicas {max} is not above minReplicas {min}: it never scales"),
                );
            }
        }
        self.namespace_problems(&mut out, &config, &config_path);

        let cluster = config.get("cluster").and_then(|c| c.as_table());
        if expect.ha {
            if pdbs.is_empty() {
                out.raw(format!("{}: no PodDisruptionBudget", self.label));
            }
            if hpas.is_empty() {
                out.raw(format!("{}: no HorizontalPodAutoscaler", self.label));
            }
            match cluster.and_then(|c| c.get("key")).and_then(|k| k.as_str()) {
                Some("${MCPMUX_CLUSTER_KEY}") => {}
                other => out.raw(format!(
                    "{}: {config_path}: [cluster] key is {other:?}, expected \"${{MCPMUX_CLUSTER_KEY}}\"",
                    self.label
                )),
            }
            let key_env = array(&container["env"])
                .into_iter()
                .find(|e| e["name"] == "MCPMUX_CLUSTER_KEY");
            if !key_env.is_some_and(|e| e["valueFrom"]["secretKeyRef"].is_object()) {
                out.obj(
                    d,
                    "env MCPMUX_CLUSTER_KEY does not come from a Secret (secretKeyRef)".into(),
                );
            }
            self.ingress_problems(&mut out.list);
        } else if cluster.is_some() {
            out.raw(format!(
                "{}: {config_path} has [cluster], for one replica",
                self.label
            ));
        }
        out.list
    }

    /// `gateway.allowed_hosts` names the Service's in-cluster host names in whatever namespace
    /// the pod runs in: the namespace part is a `${VAR}` the container sets from
    /// `metadata.namespace`, never a namespace written in the file.
    fn namespace_problems(&self, out: &mut Problems<'_>, config: &toml::Table, config_path: &str) {
        let Ok(service) = self.one("Service") else { return };
        let Ok(deployment) = self.one("Deployment") else {
            return;
        };
        let service = name(service);
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let hosts = config
            .get("gateway")
            .and_then(|g| g.get("allowed_hosts"))
            .and_then(|h| h.as_array())
            .cloned()
            .unwrap_or_default();
        for host in hosts.iter().filter_map(|h| h.as_str()) {
            let Some(namespace) = host
                .strip_prefix(service)
                .and_then(|rest| rest.strip_prefix('.'))
                .map(|rest| rest.split('.').next().unwrap_or(""))
            else {
                continue;
            };
            let from_namespace = namespace
                .strip_prefix("${")
                .and_then(|v| v.strip_suffix('}'))
                .and_then(|var| {
                    array(&container["env"])
                        .into_iter()
                        .find(|e| e["name"].as_str() == Some(var))
                })
                .is_some_and(|e| e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace");
            if !from_namespace {
                out.obj(
                    deployment,
                    format!(
                        "{config_path}: allowed_hosts entry {host:?} names the namespace \
                         {namespace:?}: use a ${{VAR}} the container sets from metadata.namespace"
                    ),
                );
            }
        }
    }

    /// The `ha` Ingress: ingress-nginx's consistent hash on Mcp-Session-Id, to the Service.
    fn ingress_problems(&self, out: &mut Vec<String>) {
        let ingress = match self.one("Ingress") {
            Ok(i) => i,
            Err(e) => return out.push(e),
        };
        let at = format!("{}: Ingress/{}", self.label, name(ingress));
        let hash = &ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/upstream-hash-by"];
        if hash.as_str() != Some("$http_mcp_session_id") {
            out.push(format!(
                "{at}: annotation nginx.ingress.kubernetes.io/upstream-hash-by is {hash}, expected \"$http_mcp_session_id\""
            ));
        }
        for rule in array(&ingress["spec"]["rules"]) {
            for path in array(&rule["http"]["paths"]) {
                let service = path["backend"]["service"]["name"].as_str().unwrap_or("");
                if self.named("Service", service).is_none() {
                    out.push(format!("{at}: backend Service {service:?} is not in the render"));
                }
            }
        }
    }
}

/// The problems found so far in one overlay.
struct Problems<'a> {
    label: &'a str,
    list: Vec<String>,
}

impl Problems<'_> {
    /// A problem of `object`: named by the overlay, its kind and its name.
    fn obj(&mut self, object: &Value, what: String) {
        let kind = object["kind"].as_str().unwrap_or("?");
        self.list
            .push(format!("{}: {kind}/{}: {what}", self.label, name(object)));
    }

    /// A problem already named.
    fn raw(&mut self, what: String) {
        self.list.push(what);
    }
}

fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or("?")
}

fn array(v: &Value) -> Vec<&Value> {
    v.as_array().map(|a| a.iter().collect()).unwrap_or_default()
}

fn strings(v: &Value) -> Vec<String> {
    array(v)
        .iter()
        .filter_map(|s| s.as_str().map(String::from))
        .collect()
}

/// A port given by number or by the name of one of the container's ports.
fn container_port(container: &Value, port: &Value) -> Option<u64> {
    if let Some(n) = port.as_u64() {
        return Some(n);
    }
    let wanted = port.as_str()?;
    array(&container["ports"])
        .into_iter()
        .find(|p| p["name"].as_str() == Some(wanted))
        .and_then(|p| p["containerPort"].as_u64())
}

/// Whether every label of `selector` (a map) is on `labels`, and it is not empty.
fn selects(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| &labels[k] == v))
}

/// The `${NAME}` variables a config interpolates: in its string values (`$$` is a literal `$`).
pub fn config_vars(config: &toml::Table) -> Vec<String> {
    fn walk(value: &toml::Value, vars: &mut Vec<String>) {
        match value {
            toml::Value::String(s) => {
                let mut rest = s.as_str();
                while let Some(i) = rest.find('$') {
                    rest = &rest[i + 1..];
                    if let Some(after) = rest.strip_prefix('$') {
                        rest = after;
                    } else if let Some((name, after)) =
                        rest.strip_prefix('{').and_then(|inner| inner.split_once('}'))
                    {
                        vars.push(name.to_string());
                        rest = after;
                    }
                }
            }
            toml::Value::Array(items) => items.iter().for_each(|v| walk(v, vars)),
            toml::Value::Table(table) => table.values().for_each(|v| walk(v, vars)),
            _ => {}
        }
    }
    let mut vars = Vec::new();
    config.values().for_each(|v| walk(v, &mut vars));
    vars.sort();
    vars.dedup();
    vars
}
