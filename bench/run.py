#!/usr/bin/env python3
"""The whole benchmark comparison in one run (python3 standard library only; `bench/run.sh` builds
the release binaries first and then runs this). Writes docs/benchmarks.md and the raw figures to
target/bench-run/results.json.

Every system under test (mcpmux and its upstreams, the upstream alone, each peer gateway) runs
pinned to core 0 with taskset, the driver (target/release/mcpmux-bench) to core 1; the "upstream on
core 1" pair runs the HTTP upstream on the driver's core instead, so mcpmux has core 0 to itself.
Scenarios run REPS times, the order of the systems alternating (ABC CBA ABC); tables show medians.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in bench/
import report  # noqa: E402
import cost  # noqa: E402
from common import (DRIVER, MCPMUX, PIN, RAWECHO, ROOT, RUN_DIR, TEST_SERVER, Sut, drive, free_port,  # noqa: E402
                    log, pinned, rawecho_http, settle, toml_str, wait_port, wait_ready)

FM_AGG = ROOT / "bench" / "fm_agg.py"
PEERS = ROOT / "target" / "bench-peers"
SCENARIOS = ["overhead", "throughput", "catalog", "memory", "fanout", "peers", "micro", "search", "cost"]
PEER_VERSIONS = {"mcp-proxy": "6.7.19", "supergateway": "4.0.0", "fastmcp": "4.1.2"}


def mcpmux_config(servers, page_size=None):
    """Write a config with `servers` (name -> dict of TOML values) and return (path, port)."""
    port = free_port()
    lines = ["[gateway]", f'listen = "127.0.0.1:{port}"']
    if page_size:
        lines.append(f"page_size = {page_size}")
    for name, keys in servers.items():
        lines += ["", f"[servers.{name}]"]
        for k, v in keys.items():
            val = "[" + ", ".join(toml_str(x) for x in v) + "]" if isinstance(v, list) else toml_str(v)
            lines.append(f"{k} = {val}")
    fd, path = tempfile.mkstemp(prefix="mcpmux-", suffix=".toml", dir=RUN_DIR)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path, port


def start_mcpmux(name, servers, page_size=None):
    path, port = mcpmux_config(servers, page_size)
    sut = Sut(name, [str(MCPMUX), "serve", "--config", path], {"RUST_LOG": "warn"})
    return sut, port


# ------------------------------------------------------------------------------------------------
# Systems under test for the call scenarios: name -> start() returning (suts, url, tool)

def start_direct():
    sut, port = rawecho_http("direct")
    return [sut], f"http://127.0.0.1:{port}/mcp", "echo"


def start_direct_stdio():
    # The driver starts the child itself; taskset keeps it on the system-under-test core.
    return [], f"stdio:{'taskset -c 0 ' if PIN else ''}node {RAWECHO} stdio", "echo"


def start_mcpmux_http(echo_core=0):
    echo, echo_port = rawecho_http("mcpmux-http", echo_core)
    mux, port = start_mcpmux("mcpmux-http", {"e": {"url": f"http://127.0.0.1:{echo_port}/mcp"}})
    if not wait_ready(port):
        raise RuntimeError("mcpmux did not become ready")
    return [mux, echo], f"http://127.0.0.1:{port}/mcp", "e__echo"


# The gateway with a core of its own: the HTTP upstream shares core 1 with the driver, on the
# direct path and behind mcpmux alike.
def start_direct_core1():
    sut, port = rawecho_http("direct-core1", 1)
    return [sut], f"http://127.0.0.1:{port}/mcp", "echo"


def start_mcpmux_http_core1():
    return start_mcpmux_http(echo_core=1)


def start_mcpmux_stdio():
    mux, port = start_mcpmux("mcpmux-stdio", {"e": {"command": "node", "args": [str(RAWECHO), "stdio"]}})
    if not wait_ready(port):
        raise RuntimeError("mcpmux did not become ready")
    return [mux], f"http://127.0.0.1:{port}/mcp", "e__echo"


def start_mcp_proxy():
    port = free_port()
    exe = PEERS / "mcp-proxy" / "node_modules" / ".bin" / "mcp-proxy"
    sut = Sut("mcp-proxy", [str(exe), "--host", "127.0.0.1", "--port", str(port), "--server", "stream",
                            "--", "node", str(RAWECHO), "stdio"])
    if not wait_port(port):
        raise RuntimeError("mcp-proxy did not start")
    return [sut], f"http://127.0.0.1:{port}/mcp", "echo"


def start_supergateway():
    port = free_port()
    exe = PEERS / "supergateway" / "node_modules" / ".bin" / "supergateway"
    sut = Sut("supergateway", [str(exe), "--stdio", f"node {RAWECHO} stdio", "--outputTransport",
                               "streamableHttp", "--stateful", "--port", str(port), "--logLevel", "none"])
    if not wait_port(port):
        raise RuntimeError("supergateway did not start")
    return [sut], f"http://127.0.0.1:{port}/mcp", "echo"


def start_fastmcp():
    port = free_port()
    py = PEERS / "fastmcp" / "bin" / "python"
    sut = Sut("fastmcp", [str(py), str(FM_AGG), str(port), f"echo=node,{RAWECHO},stdio"])
    if not wait_port(port, 120):
        raise RuntimeError("the FastMCP aggregator did not start")
    return [sut], f"http://127.0.0.1:{port}/mcp", "echo_echo"


CALL_TARGETS = {
    report.DIRECT: start_direct,
    report.DIRECT_STDIO: start_direct_stdio,
    report.MUX_HTTP: start_mcpmux_http,
    report.MUX_STDIO: start_mcpmux_stdio,
    report.DIRECT_CORE1: start_direct_core1,
    report.MUX_HTTP_CORE1: start_mcpmux_http_core1,
}
PEER_TARGETS = {
    "mcp-proxy 6.7.19 → stdio": start_mcp_proxy,
    "supergateway 4.0.0 → stdio": start_supergateway,
    "FastMCP 4 → stdio": start_fastmcp,
}


# ------------------------------------------------------------------------------------------------
# Peers: installed once under target/bench-peers with pinned versions

def install_peers():
    PEERS.mkdir(parents=True, exist_ok=True)
    for pkg in ("mcp-proxy", "supergateway"):
        if not (PEERS / pkg / "node_modules" / ".bin" / pkg).exists():
            log(f"installing {pkg}@{PEER_VERSIONS[pkg]}")
            subprocess.run(["npm", "install", "--prefix", str(PEERS / pkg), "--no-audit", "--no-fund", "--loglevel=error",
                            f"{pkg}@{PEER_VERSIONS[pkg]}"], check=True, stdout=subprocess.DEVNULL)
    venv = PEERS / "fastmcp"
    if not (venv / "bin" / "fastmcp").exists():
        log(f"installing fastmcp=={PEER_VERSIONS['fastmcp']} in a venv")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"fastmcp=={PEER_VERSIONS['fastmcp']}"],
                       check=True)


# ------------------------------------------------------------------------------------------------
# Scenarios

def call_scenarios(cfg, targets, results):
    """Overhead (K=1) and throughput (every K) for each target, in alternating order per rep."""
    names = list(targets)
    for rep in range(cfg.reps):
        for name in (names if rep % 2 == 0 else names[::-1]):
            is_peer = name in PEER_TARGETS
            limit = 1 if name == report.DIRECT_STDIO else cfg.peer_max_sessions if is_peer else None
            ks = [k for k in cfg.sessions if limit is None or k <= limit]
            log(f"rep {rep + 1}: {name}: sessions {ks}")
            try:
                suts, url, tool = targets[name]()
            except Exception as e:  # a peer that cannot start is reported, not fatal
                results.setdefault("call", {}).setdefault(name, {}).setdefault("fatal", str(e))
                log(f"  {name} did not start: {e}")
                continue
            try:
                for k in ks:
                    n = (cfg.peer_calls if is_peer else cfg.calls)[k]
                    r = drive(url, "--sessions", k, "--calls", n, "--warmup", cfg.warmup[k], "--tool", tool,
                              "--wait-secs", 30, "--label", f"{name} K={k}", suts=suts)
                    r["peak_rss_bytes"] = suts[0].peak_rss() if suts else None
                    results.setdefault("call", {}).setdefault(name, {}).setdefault(str(k), []).append(r)
                    log(f"  K={k}: {r.get('calls_per_s')} calls/s p50 {r.get('p50_ms')} ms errors {r.get('errors')}"
                        + (f" fatal {r['fatal']}" if "fatal" in r else ""))
            finally:
                for s in suts:
                    s.stop()


def test_server_args(tools, name):
    return ["--tools", str(tools), "--only-generated", "--resources", "0", "--prompts", "0",
            "--templates", "0", "--page-size", "0", "--name", name]


def catalog(cfg, results):
    for rep in range(cfg.reps):
        for upstreams, per in (cfg.catalogs if rep % 2 == 0 else cfg.catalogs[::-1]):
            total = upstreams * per
            log(f"rep {rep + 1}: catalog {upstreams} × {per}")
            servers = {f"s{i}": {"command": str(TEST_SERVER), "args": test_server_args(per, f"s{i}")}
                       for i in range(upstreams)}
            mux, port = start_mcpmux(f"catalog-{upstreams}x{per}", servers, page_size=100_000)
            try:
                r = drive(f"http://127.0.0.1:{port}/mcp", "--mode", "list", "--calls", cfg.list_calls,
                          "--warmup", cfg.warmup[1] // 10, "--expect-tools", total, "--started-at-ns",
                          mux.started_ns, "--wait-secs", 120)
                r["peak_rss_bytes"] = mux.peak_rss()
            finally:
                mux.stop()
            results.setdefault("catalog", {}).setdefault(f"{upstreams}x{per}", []).append(r)
            log(f"  startup {r.get('startup_ms')} ms, tools/list p50 {r.get('p50_ms')} ms, errors {r.get('errors')}"
                + (f" fatal {r['fatal']}" if "fatal" in r else ""))


def memory(cfg, results):
    for rep in range(cfg.reps):
        for level in (cfg.idle_levels if rep % 2 == 0 else cfg.idle_levels[::-1]):
            log(f"rep {rep + 1}: memory with {level} idle sessions")
            mux, port = start_mcpmux("memory", {"e": {"command": "node", "args": [str(RAWECHO), "stdio"]}})
            try:
                wait_ready(port)
                r = drive(f"http://127.0.0.1:{port}/mcp", "--mode", "idle", "--sessions", level,
                          "--rss-pid", mux.pid, "--concurrency", 32, "--wait-secs", 30)
            finally:
                mux.stop()
            results.setdefault("memory", {}).setdefault(str(level), []).append(r)
            log(f"  {r.get('bytes_per_session')} bytes/session, errors {r.get('errors')}"
                + (f" fatal {r['fatal']}" if "fatal" in r else ""))


def fanout(cfg, results):
    for rep in range(cfg.reps):
        log(f"rep {rep + 1}: list_changed fan-out to {cfg.listeners} sessions")
        mux, port = start_mcpmux("fanout", {"t": {"command": str(TEST_SERVER),
                                                  "args": ["--tools", "0", "--resources", "0", "--prompts", "0",
                                                           "--templates", "0"]}})
        try:
            wait_ready(port)
            r = drive(f"http://127.0.0.1:{port}/mcp", "--mode", "fanout", "--sessions", cfg.listeners,
                      "--tool", "t__add_tool", "--args", '{"name":"dyn"}', "--unique-arg", "name",
                      "--check", "result", "--rounds", 3, "--timeout-secs", 10, "--wait-secs", 30)
        finally:
            mux.stop()
        results.setdefault("fanout", []).append(r)
        log(f"  last notified after {r.get('last_ms_median')} ms (median of rounds), errors {r.get('errors')}"
            + (f" fatal {r['fatal']}" if "fatal" in r else ""))


def micro(cfg, results):
    log("microbenchmarks: cargo bench --bench envelope")
    # Build on both cores first; only the measuring runs pinned.
    subprocess.run(["cargo", "bench", "--locked", "--bench", "envelope", "--no-run"], cwd=ROOT,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cmd = pinned(0, ["cargo", "bench", "--locked", "--bench", "envelope", "--", *cfg.micro_args])
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    results["micro"] = out.stdout if out.returncode == 0 else f"failed ({out.returncode}):\n{out.stderr[-2000:]}"


def search(results):
    log("tool search: cargo bench --bench search (1,000 tools)")
    subprocess.run(["cargo", "bench", "--locked", "--bench", "search", "--no-run"], cwd=ROOT,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = subprocess.run(pinned(0, ["cargo", "bench", "--locked", "--bench", "search"]), cwd=ROOT,
                         capture_output=True, text=True)
    if out.returncode != 0:
        results["search"] = {"error": f"failed ({out.returncode}): {out.stderr[-2000:]}"}
        return
    results["search"] = json.loads(out.stdout.strip().splitlines()[-1])
    log(f"  build {results['search']['build_ms']:.2f} ms, query p50 {results['search']['query_p50_us']:.1f} µs"
        f" p99 {results['search']['query_p99_us']:.1f} µs")


# ------------------------------------------------------------------------------------------------

def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small N and one repetition, to check it all works")
    p.add_argument("--reps", type=int, help="repetitions (default 3; 1 with --quick)")
    p.add_argument("--skip", default="", help=f"comma-separated scenarios to skip: {','.join(SCENARIOS)}")
    p.add_argument("--only", default="", help="comma-separated scenarios to run (default: all)")
    p.add_argument("--peer-max-sessions", type=int, default=32,
                   help="largest session count run against peers (supergateway spawns a child per session)")
    p.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    cfg = p.parse_args()
    wanted = set(filter(None, cfg.only.split(","))) or set(SCENARIOS)
    skipped = set(filter(None, cfg.skip.split(",")))
    unknown = (wanted | skipped) - set(SCENARIOS)
    if unknown:
        p.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    cfg.run = wanted - skipped
    cfg.reps = cfg.reps or (1 if cfg.quick else 3)
    q = cfg.quick
    cfg.sessions = [1] + ([8, 32, 256] if "throughput" in cfg.run or "peers" in cfg.run else [])
    # Measured calls per session (peers are 10 to 50 times slower: fewer calls, still thousands
    # of samples), and unmeasured warm-up calls per session.
    cfg.calls = {1: 300, 8: 100, 32: 30, 256: 8} if q else {1: 3000, 8: 1000, 32: 400, 256: 60}
    cfg.peer_calls = {1: 100, 8: 25, 32: 8} if q else {1: 1000, 8: 250, 32: 60}
    cfg.warmup = {1: 20, 8: 10, 32: 5, 256: 2} if q else {1: 200, 8: 50, 32: 20, 256: 5}
    cfg.list_calls = 50 if q else 1000
    cfg.catalogs = [(100, 10), (10, 1000)]
    cfg.idle_levels = [1000, 10000]
    cfg.listeners = 1000
    cfg.micro_args = ["--sample-count", "20"] if q else []
    return cfg


def main():
    cfg = parse_args()
    for exe in (MCPMUX, DRIVER, TEST_SERVER):
        if not exe.exists():
            sys.exit(f"{exe} is missing: run bench/run.sh (it builds the release binaries first)")
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    results = {"started": time.strftime("%Y-%m-%d %H:%M:%S %z"), "quick": cfg.quick, "reps": cfg.reps,
               "pinned": PIN, "scenarios": sorted(cfg.run), "config": {
                   "sessions": cfg.sessions, "calls": cfg.calls, "peer_calls": cfg.peer_calls, "warmup": cfg.warmup,
                   "list_calls": cfg.list_calls, "catalogs": cfg.catalogs, "idle_levels": cfg.idle_levels,
                   "listeners": cfg.listeners, "peer_max_sessions": cfg.peer_max_sessions}}
    results["machine"] = report.machine()
    targets = dict(CALL_TARGETS) if cfg.run & {"overhead", "throughput"} else {}
    if "peers" in cfg.run:
        try:
            install_peers()
            targets.update(PEER_TARGETS)
        except (subprocess.CalledProcessError, OSError) as e:
            results["peers_error"] = str(e)
            log(f"peers could not be installed: {e}")
        if not targets.keys() & CALL_TARGETS.keys():  # peers alone: still against the same baselines
            targets = {n: CALL_TARGETS[n] for n in (report.DIRECT, report.DIRECT_STDIO, report.MUX_STDIO)} | targets
    results["versions"] = report.versions(PEERS, DRIVER)
    results["settled"] = settle(20 if cfg.quick else 120)
    results["machine"]["loadavg_at_start"] = os.getloadavg()[0]
    started = time.monotonic()
    if targets:
        call_scenarios(cfg, targets, results)
    if "catalog" in cfg.run:
        catalog(cfg, results)
    if "memory" in cfg.run:
        memory(cfg, results)
    if "fanout" in cfg.run:
        fanout(cfg, results)
    if "micro" in cfg.run:
        micro(cfg, results)
    if "search" in cfg.run:
        search(results)
    if "cost" in cfg.run:
        results["cost"] = cost.run(cfg)
    results["duration_s"] = round(time.monotonic() - started)
    (RUN_DIR / "results.json").write_text(json.dumps(results, indent=1, ensure_ascii=False))
    Path(cfg.out).write_text(report.markdown(results))
    if "cost" in results:  # its tables on stdout too
        print(cost.names.method(results["cost"]) + cost.names.markdown(results["cost"]))
    log(f"wrote {cfg.out} and {RUN_DIR / 'results.json'} in {results['duration_s']} s")


if __name__ == "__main__":
    main()
