#!/usr/bin/env python3
"""The cost of a relayed call (issue 28): calls/s and the gateway's CPU per call, side by side with
the direct path, nginx `proxy_pass` (which parses nothing) and, given `AGENTGATEWAY_BIN`,
agentgateway; mcpmux plain, with what a team runs (an API key, three `[[policy]]` rules, the access
log, OTLP traces, `[cluster]`) and with each of those features alone.

    python3 bench/cost.py [--quick] [--reps N]    prints the tables (raw: target/bench-run/cost.json)
    python3 bench/run.py --only cost [--quick]     the same, also written to docs/benchmarks.md

Everything of a system under test runs on core 0, the driver (and the OTLP receiver) on core 1.
A gateway's CPU is its own processes' utime + stime from /proc over a driver run (nginx: master and
worker; mcpmux and agentgateway: their own process, not a stdio child), divided by the calls it
relayed in that run. The report is bench/cost_report.py.
"""
import argparse
import contextlib
import json
import os
import pwd
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in bench/
import cost_report as names  # noqa: E402
from common import (MCPMUX, PIN, RAWECHO, ROOT, RUN_DIR, Sut, drive, free_port, log, proc_cpu,  # noqa: E402
                    rawecho_http, settle, toml_str, tree_cpu, wait_port, wait_ready)

NGINX = Path("/usr/sbin/nginx")
OTLP_SINK = ROOT / "bench" / "otlp_sink.py"
API_KEY = "bench-key-0123456789abcdef"  # a benchmark's key, not a secret
# One feature each on top of the plain set-up; the team set-up has them all.
FEATURES = {"api key": {"key"}, "api key + 3 policy rules": {"key", "policy"}, "access log": {"log"},
            "telemetry (OTLP)": {"otlp"}, "cluster": {"cluster"}}
TEAM = {"key", "policy", "log", "otlp", "cluster"}

# agentgateway's configuration (v1.3 and v1.4), the equivalent of mcpmux's: one MCP route, one target
# (tool names unprefixed), its admin, stats and readiness listeners off, logging at warn (no
# per-request access log, as mcpmux's plain set-up).
AGW_YAML = """config:
  adminAddr: "off"
  statsAddr: "off"
  readinessAddr: "off"
  logging:
    level: warn
binds:
- port: {listen}
  listeners:
  - protocol: HTTP
    routes:
    - name: mcp
      matches:
      - path:
          pathPrefix: /mcp
      backends:
      - mcp:
          statefulMode: stateful
          prefixMode: conditional
          targets:
          - name: rawecho
{target}"""
AGW_STDIO_TARGET = """            stdio:
              cmd: node
              args: [{rawecho}, "stdio"]
"""
AGW_HTTP_TARGET = """            mcp:
              host: http://127.0.0.1:{upstream}/mcp
"""


class Unavailable(Exception):
    """A system that cannot run on this machine (its binary is missing): reported, not measured."""


class Started:
    """A running system: its processes, the URL and tool the driver calls, the bearer it sends and
    the processes whose CPU is the gateway's (empty: no gateway, the direct path)."""

    def __init__(self, suts, url, tool, gateway=(), tree=False, bearer=None, flush=0.0):
        self.suts, self.url, self.tool, self.bearer = suts, url, tool, bearer
        self.gateway, self.tree = list(gateway), tree
        # Seconds to wait around a measured run so the spans of its calls (batched every
        # second) leave inside its CPU window, and those of the run before outside it.
        self.flush = flush

    def gateway_cpu(self):
        if not self.gateway:
            return None
        if self.tree:  # nginx: the master and its workers
            return sum(tree_cpu([s.pid for s in self.gateway]).values())
        vals = [proc_cpu(s.pid) for s in self.gateway]
        return None if None in vals else sum(vals)

    def core0_cpu(self):
        """Every process of the system: the upstream, stdio children, those that ended too."""
        return sum(tree_cpu([s.pid for s in self.suts], reaped=True).values()) if self.suts else None

    def stop(self):
        for s in self.suts:
            s.stop()


# ------------------------------------------------------------------------------------------------
# The systems

def start_direct(_ctx):
    echo, port = rawecho_http("cost-direct")
    return Started([echo], f"http://127.0.0.1:{port}/mcp", "echo")


def start_direct_stdio(_ctx):
    return Started([], f"stdio:{'taskset -c 0 ' if PIN else ''}node {RAWECHO} stdio", "echo")


def nginx_conf(d, port, upstream):
    user = f"user {pwd.getpwuid(os.geteuid()).pw_name};\n" if os.geteuid() == 0 else ""
    temps = "".join(f"    {kind}_temp_path {d / kind};\n"
                    for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return f"""daemon off;
{user}worker_processes 1;
pid {d / 'nginx.pid'};
error_log stderr warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
{temps}    keepalive_requests 1000000;
    upstream rawecho {{
        server 127.0.0.1:{upstream};
        keepalive 64;
        keepalive_requests 1000000;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://rawecho;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering off;
        }}
    }}
}}
"""


def start_nginx(_ctx):
    if not NGINX.exists():
        raise Unavailable(f"{NGINX} is missing (Debian: apt-get install nginx-light)")
    echo, upstream = rawecho_http("cost-nginx")
    d = RUN_DIR / "nginx"
    d.mkdir(parents=True, exist_ok=True)
    port = free_port()
    (d / "nginx.conf").write_text(nginx_conf(d, port, upstream))
    nginx = Sut("cost-nginx", [str(NGINX), "-p", str(d), "-c", str(d / "nginx.conf"), "-e", "stderr"])
    if not wait_port(port):
        nginx.stop()
        echo.stop()
        raise RuntimeError(f"nginx did not start; see {RUN_DIR / 'cost-nginx.log'}")
    return Started([nginx, echo], f"http://127.0.0.1:{port}/mcp", "echo", [nginx], tree=True)


def mux_toml(port, path, features, ctx):
    """mcpmux's configuration for `path` ("stdio" or the HTTP upstream's port) with `features`."""
    lines = ["[gateway]", f'listen = "127.0.0.1:{port}"', "", "[servers.e]"]
    if path == "stdio":
        lines += ['command = "node"', f"args = [{toml_str(RAWECHO)}, \"stdio\"]"]
    else:
        lines.append(f'url = "http://127.0.0.1:{path}/mcp"')
    if "key" in features:
        lines += ["", "[auth]", "[[auth.api_keys]]", 'name = "bench"', f'key = "{API_KEY}"', 'groups = ["bench"]']
    if "policy" in features:  # two rules for other groups, the last one for the key's
        for i in (1, 2):
            lines += ["", "[[policy]]", f'groups = ["team-{i}"]', f'allow = ["e__*", "other{i}__*"]',
                      'deny = ["e__secret-*"]']
        lines += ["", "[[policy]]", 'groups = ["bench"]', 'allow = ["e__*", "mcpmux://e/*"]',
                  'deny = ["e__trigger-*", "*admin*"]']
    if "otlp" in features:
        lines += ["", "[telemetry]", f'otlp_endpoint = "http://127.0.0.1:{ctx["otlp_port"]}"',
                  'service_name = "mcpmux-bench"']
    if "cluster" in features:
        lines += ["", "[cluster]", f'key = "{ctx["cluster_key"]}"', f'advertise = "http://127.0.0.1:{port}"']
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def stopped_on_failure():
    """The processes a system's start-up launches (appended to the list it yields): all stopped
    if the start-up fails, left running for the measurement if it succeeds."""
    suts = []
    try:
        yield suts
    except Exception:
        for s in suts:
            s.stop()
        raise


def mcpmux_starter(tag, transport, features):
    def start(ctx):
        with stopped_on_failure() as suts:
            upstream = "stdio"
            if transport == "http":
                echo, upstream = rawecho_http(tag)
                suts.append(echo)
            port = free_port()
            config = RUN_DIR / f"{tag}.toml"
            config.write_text(mux_toml(port, upstream, features, ctx))
            # The access log is on by default and written at INFO; warn leaves it out. Its lines
            # (one a call) are kept for the last repetition only.
            (RUN_DIR / f"{tag}.log").unlink(missing_ok=True)
            mux = Sut(tag, [str(MCPMUX), "serve", "--config", str(config)],
                      {"RUST_LOG": "info" if "log" in features else "warn"})
            suts.insert(0, mux)
            if not wait_ready(port, 60):
                raise RuntimeError(f"mcpmux did not become ready; see {RUN_DIR / (tag + '.log')}")
        return Started(suts, f"http://127.0.0.1:{port}/mcp", "e__echo", [mux],
                       bearer=API_KEY if "key" in features else None, flush=1.2 if "otlp" in features else 0.0)
    return start


def agentgateway_starter(transport):
    def start(ctx):
        exe = os.environ.get("AGENTGATEWAY_BIN")
        if not exe:
            raise Unavailable("AGENTGATEWAY_BIN unset")
        if not Path(exe).is_file():
            raise Unavailable(f"AGENTGATEWAY_BIN={exe} is not a file")
        with stopped_on_failure() as suts:
            port = free_port()
            if transport == "http":
                echo, upstream = rawecho_http(f"cost-agw-{transport}")
                suts.append(echo)
                target = AGW_HTTP_TARGET.format(upstream=upstream)
            else:
                target = AGW_STDIO_TARGET.format(rawecho=json.dumps(str(RAWECHO)))
            config = RUN_DIR / f"cost-agw-{transport}.yaml"
            config.write_text(AGW_YAML.format(listen=port, target=target))
            agw = Sut(f"cost-agw-{transport}", [exe, "-f", str(config)], {"RUST_LOG": "warn"})
            suts.insert(0, agw)
            if not wait_port(port, 60):
                raise RuntimeError(f"agentgateway did not start; see {RUN_DIR / f'cost-agw-{transport}.log'}")
        return Started(suts, f"http://127.0.0.1:{port}/mcp", "echo", [agw])
    return start


def systems():
    """name -> (start, session counts measured, path the system relays to)."""
    out = {
        names.DIRECT: (start_direct, (1, 8, 32), "http"),
        names.DIRECT_STDIO: (start_direct_stdio, (1,), "stdio"),
        names.NGINX_HTTP: (start_nginx, (1, 8, 32), "http"),
        names.MUX_STDIO: (mcpmux_starter("cost-mux-stdio", "stdio", set()), (1, 8, 32), "stdio"),
        names.MUX_HTTP: (mcpmux_starter("cost-mux-http", "http", set()), (1, 8, 32), "http"),
        names.TEAM_STDIO: (mcpmux_starter("cost-team-stdio", "stdio", TEAM), (1, 8, 32), "stdio"),
        names.TEAM_HTTP: (mcpmux_starter("cost-team-http", "http", TEAM), (1, 8, 32), "http"),
    }
    for feature, keys in FEATURES.items():
        for path, plain in (("stdio", names.MUX_STDIO), ("http", names.MUX_HTTP)):
            tag = "cost-" + "".join(c if c.isalnum() else "-" for c in f"{path}-{feature}").strip("-")
            out[names.feature(plain, feature)] = (mcpmux_starter(tag, path, keys), (8,), path)
    out[names.AGW_STDIO] = (agentgateway_starter("stdio"), (1, 8, 32), "stdio")
    out[names.AGW_HTTP] = (agentgateway_starter("http"), (1, 8, 32), "http")
    return out


# ------------------------------------------------------------------------------------------------
# Measuring

def otlp_stats(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=5) as r:
            return json.loads(r.read())
    except (OSError, ValueError):
        return None


def measure(started, k, calls, warmup, label):
    """One driver run; adds the gateway's CPU (and all of core 0's) per relayed call. The calls
    relayed in the window are the measured and the warm-up ones (the K initialize and DELETE
    exchanges are not counted: under 1% of the calls here)."""
    time.sleep(started.flush)
    gw0, all0 = started.gateway_cpu(), started.core0_cpu()
    bearer = ["--bearer", started.bearer] if started.bearer else []
    r = drive(started.url, "--sessions", k, "--calls", calls, "--warmup", warmup, "--tool", started.tool,
              "--wait-secs", 30, "--label", label, *bearer, suts=started.suts)
    time.sleep(started.flush)
    gw1, all1 = started.gateway_cpu(), started.core0_cpu()
    relayed = k * (calls + warmup)
    r["relayed"] = relayed
    if "fatal" not in r:
        if gw0 is not None and gw1 is not None:
            r["gw_cpu_s"] = round(gw1 - gw0, 3)
            r["gw_us_per_call"] = (gw1 - gw0) * 1e6 / relayed
        if all0 is not None and all1 is not None:
            r["core0_us_per_call"] = (all1 - all0) * 1e6 / relayed
    return r


def run_system(cfg, name, start, ks, ctx, rep, out):
    entry = out["systems"].setdefault(name, {})
    try:
        started = start(ctx)
    except Unavailable as e:
        entry["unavailable"] = str(e)
        log(f"  {name}: not measured: {e}")
        return
    except Exception as e:  # a system that cannot start is reported, not fatal
        entry.setdefault("fatal", str(e))
        log(f"  {name} did not start: {e}")
        return
    relayed = 0  # every call of this start, warm-up included: what the spans are counted against
    try:
        if ks == (8,):  # no K=1 run before: warm the system up unmeasured
            warm = cfg.cost_calls[1] // 2
            drive(started.url, "--sessions", 1, "--calls", warm, "--warmup", 0, "--tool", started.tool,
                  "--wait-secs", 30, *(["--bearer", started.bearer] if started.bearer else []))
            relayed += warm
        for k in ks:
            r = measure(started, k, cfg.cost_calls[k], cfg.cost_warmup[k], f"{name} K={k}")
            r["rep"] = rep
            relayed += r["relayed"]
            entry.setdefault(str(k), []).append(r)
            cpu = r.get("gw_us_per_call")
            log(f"  {name} K={k}: {r.get('calls_per_s')} calls/s p50 {r.get('p50_ms')} ms"
                + (f" gateway {cpu:.1f} µs/call" if cpu is not None else "") + f" errors {r.get('errors')}"
                + (f" fatal {r['fatal']}" if "fatal" in r else ""))
    finally:
        started.stop()
    if ctx.get("otlp_port") and name in ctx["otlp_systems"]:  # stopped: its queued spans were sent
        stats = otlp_stats(ctx["otlp_port"])
        if stats:
            before, ctx["otlp_last"] = ctx["otlp_last"], stats
            got = {key: stats[key] - before.get(key, 0) for key in stats}
            got["relayed"] = relayed
            entry.setdefault("otlp", []).append(got)


def versions():
    out = {}
    if NGINX.exists():
        v = subprocess.run([str(NGINX), "-v"], capture_output=True, text=True)
        out["nginx"] = (v.stderr or v.stdout).strip().replace("nginx version: ", "")
    exe = os.environ.get("AGENTGATEWAY_BIN")
    if exe and Path(exe).is_file():
        v = subprocess.run([exe, "--version"], capture_output=True, text=True)
        try:
            meta = json.loads(v.stdout)
            out["agentgateway"] = f"agentgateway {meta.get('version')} ({str(meta.get('git_revision', '?'))[:9]})"
        except ValueError:
            out["agentgateway"] = (v.stdout or v.stderr or "?").strip().splitlines()[0]
    return out


def check_configs(ctx):
    """`mcpmux check-config` on the team set-up (both paths), once per run."""
    out = {}
    for path in ("stdio", "http"):
        f = RUN_DIR / f"cost-team-{path}-check.toml"
        f.write_text(mux_toml(free_port(), "stdio" if path == "stdio" else free_port(), TEAM, ctx))
        r = subprocess.run([str(MCPMUX), "check-config", "--config", str(f)], capture_output=True, text=True)
        out[path] = {"exit": r.returncode, "output": (r.stdout + r.stderr).strip()[-1500:]}
        if r.returncode != 0:
            log(f"check-config on the team set-up ({path}) failed:\n{out[path]['output']}")
    return out


def configure(cfg):
    """The cost scenario's calls per session and warm-up calls (≥ 16,000 calls per K=8/32 run)."""
    cfg.cost_calls = {1: 200, 8: 150, 32: 40} if cfg.quick else {1: 2000, 8: 2000, 32: 500}
    cfg.cost_warmup = {1: 20, 8: 10, 32: 5} if cfg.quick else {1: 100, 8: 50, 32: 10}


def run(cfg):
    """The whole scenario: every system, cfg.reps times in alternating order. Returns the results."""
    configure(cfg)
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    for old in RUN_DIR.glob("cost-*.log"):  # the access-log runs write a line per call
        old.unlink()
    key = subprocess.run([str(MCPMUX), "keygen"], capture_output=True, text=True).stdout.strip()
    otlp_port = free_port()
    sink = Sut("cost-otlp-sink", [sys.executable, str(OTLP_SINK), str(otlp_port)], core=1)
    table = systems()
    ctx = {"cluster_key": key, "otlp_port": otlp_port if wait_port(otlp_port) else None, "otlp_last": {},
           "otlp_systems": {n for n in table if n in (names.TEAM_STDIO, names.TEAM_HTTP)
                            or n.endswith(" + telemetry (OTLP)")}}
    out = {"systems": {}, "versions": versions(), "calls": cfg.cost_calls, "warmup": cfg.cost_warmup,
           "reps": cfg.reps, "quick": cfg.quick, "order": list(table), "check_config": check_configs(ctx)}
    try:
        if ctx["otlp_port"]:
            ctx["otlp_last"] = otlp_stats(otlp_port) or {}
        order = list(table)
        for rep in range(cfg.reps):
            for name in (order if rep % 2 == 0 else order[::-1]):
                start, ks, _ = table[name]
                log(f"rep {rep + 1}: {name}")
                run_system(cfg, name, start, ks, ctx, rep, out)
    finally:
        sink.stop()
    out["paths"] = {n: path for n, (_, _, path) in table.items()}
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small N and one repetition, to check it all works")
    p.add_argument("--reps", type=int, help="repetitions (default 3; 1 with --quick)")
    cfg = p.parse_args()
    cfg.reps = cfg.reps or (1 if cfg.quick else 3)
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    settled = settle(20 if cfg.quick else 120)
    started = time.monotonic()
    res = run(cfg)
    res["settled"], res["duration_s"] = settled, round(time.monotonic() - started)
    (RUN_DIR / "cost.json").write_text(json.dumps(res, indent=1, ensure_ascii=False))
    print(names.method(res))
    print(names.markdown(res))
    log(f"wrote {RUN_DIR / 'cost.json'} in {res['duration_s']} s")


if __name__ == "__main__":
    main()
