#!/usr/bin/env python3
"""Replicas behind HAProxy, side by side (python3 standard library; a benchmark, not a test):
calls/s and p50/p99 of `tools/call` through

  direct     one mcpmux replica, the driver talking to it
  forwarded  two replicas sharing a [cluster] key: each session opened on the first, every call
             sent to the second, which forwards it to the session's home (the first)
  haproxy-1  one replica behind HAProxy
  haproxy-3  three replicas behind HAProxy

The added p50 of a forwarded request is forwarded's p50 minus direct's.

Each replica runs its own stdio echo upstream (bench/rawecho.mjs); HAProxy's config is
deploy/balancers/haproxy.cfg with only the addresses changed (consistent hash on Mcp-Session-Id,
the stick table, checks on /readyz). Everything under test (replicas, upstreams, HAProxy) is
pinned to core 0 and the driver (target/release/mcpmux-bench, session era) to core 1, as in
bench/run.py; on a 2-core machine three replicas therefore share one core.

    cargo build --release --locked -p mcpmux -p mcpmux-bench && python3 bench/replicas.py
    python3 bench/replicas.py --sessions 32 --calls 300 --reps 3 [--no-pin]

Needs haproxy on PATH (scripts/install-debian.sh haproxy=haproxy). Logs and configs go to
target/bench-run/replicas/.
"""
import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in bench/
import common  # noqa: E402
from common import free_port, pinned, wait_port, wait_ready  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RELEASE = ROOT / "target" / "release"
MCPMUX, DRIVER = RELEASE / "mcpmux", RELEASE / "mcpmux-bench"
RAWECHO = ROOT / "bench" / "rawecho.mjs"
RUN_DIR = ROOT / "target" / "bench-run" / "replicas"


def log(msg):
    print(f"[replicas] {msg}", file=sys.stderr, flush=True)




class Proc:
    """A process group of ours on core 0; stopped by its own id."""

    def __init__(self, name, cmd):
        logfile = open(RUN_DIR / f"{name}.log", "ab")
        self.proc = subprocess.Popen(pinned(0, cmd), cwd=ROOT, stdin=subprocess.DEVNULL,
                                     stdout=logfile, stderr=logfile, start_new_session=True,
                                     env={**os.environ, "RUST_LOG": "warn"})
        logfile.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass


# A [cluster] key for the forwarded setup (a benchmark's, not a secret).
CLUSTER_KEY = "YmVuY2htYXJrIGtleSwgbm90IGEgc2VjcmV0ICEhISE="


def start_replica(name, cluster=False):
    port = free_port()
    config = RUN_DIR / f"{name}.toml"
    cluster_toml = f'[cluster]\nkey = "{CLUSTER_KEY}"\n\n' if cluster else ""
    config.write_text(
        f'[gateway]\nlisten = "127.0.0.1:{port}"\n\n{cluster_toml}'
        f'[servers.e]\ncommand = "node"\nargs = [{json.dumps(str(RAWECHO))}, "stdio"]\n')
    proc = Proc(name, [str(MCPMUX), "serve", "--config", str(config)])
    if not wait_ready(port, 60.0):
        raise RuntimeError(f"{name} did not become ready; see {RUN_DIR / (name + '.log')}")
    return proc, port


def haproxy_config(port, backends):
    """deploy/balancers/haproxy.cfg in front of `backends` (ports), listening on `port`."""
    text = (ROOT / "deploy" / "balancers" / "haproxy.cfg").read_text()
    for needle in ("bind 127.0.0.1:8080", "maxconn 20000", "server mcpmux1 "):
        if needle not in text:
            raise RuntimeError(f"deploy/balancers/haproxy.cfg no longer has {needle!r}")
    text = text.replace("bind 127.0.0.1:8080", f"bind 127.0.0.1:{port}")
    # Two descriptors per connection must fit under the hard limit.
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    text = text.replace("maxconn 20000", f"maxconn {min(20000, (limit - 200) // 2)}")
    servers = "".join(f"    server mcpmux{i + 1} 127.0.0.1:{p}\n" for i, p in enumerate(backends))
    lines, placed = [], False
    for line in text.splitlines():
        if line.strip().startswith("server mcpmux"):
            if not placed:
                lines.append(servers.rstrip("\n"))
                placed = True
            continue
        lines.append(line)
    return "\n".join(lines) + "\n"


def start_haproxy(name, backends):
    port = free_port()
    config = RUN_DIR / f"{name}.cfg"
    config.write_text(haproxy_config(port, backends))
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    proc = Proc(name, [haproxy, "-db", "-f", str(config)])
    if not wait_port(port, 30.0):
        raise RuntimeError(f"haproxy did not listen; see {RUN_DIR / (name + '.log')}")
    time.sleep(2.5)  # its first health checks (inter 1s, rise 2)
    return proc, port


def setup(kind):
    """Start a system under test: (processes, url, where sessions open or None)."""
    if kind == "direct":
        proc, port = start_replica("direct-replica")
        return [proc], f"http://127.0.0.1:{port}/mcp", None
    if kind == "forwarded":
        (home, home_port), (via, via_port) = (start_replica("forwarded-home", True),
                                              start_replica("forwarded-via", True))
        return [home, via], f"http://127.0.0.1:{via_port}/mcp", f"http://127.0.0.1:{home_port}/mcp"
    n = 1 if kind == "haproxy-1" else 3
    procs, ports = [], []
    for i in range(n):
        proc, port = start_replica(f"{kind}-replica{i + 1}")
        procs.append(proc)
        ports.append(port)
    balancer, port = start_haproxy(f"{kind}-haproxy", ports)
    return [balancer, *procs], f"http://127.0.0.1:{port}/mcp", None


def drive(url, sessions, calls, open_at=None):
    extra = ["--open-at", open_at] if open_at else []
    cmd = pinned(1, [str(DRIVER), url, "--json", "--sessions", str(sessions), "--calls", str(calls),
                     "--warmup", "20", "--tool", "e__echo", "--wait-secs", "10", *extra])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    for line in reversed(out.stdout.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return {"fatal": (out.stderr.strip() or f"driver exited {out.returncode}")[-400:]}


def median(values):
    values = sorted(v for v in values if v is not None)
    return values[len(values) // 2] if values else None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sessions", type=int, default=32)
    p.add_argument("--calls", type=int, default=300, help="measured calls per session")
    p.add_argument("--reps", type=int, default=3, help="runs of each system, alternating order")
    p.add_argument("--no-pin", action="store_true", help="let every process use every core")
    opts = p.parse_args()
    common.PIN = common.PIN and not opts.no_pin
    for need in (MCPMUX, DRIVER):
        if not need.exists():
            sys.exit(f"{need} missing: cargo build --release --locked -p mcpmux -p mcpmux-bench")
    if not (shutil.which("haproxy") or Path("/usr/sbin/haproxy").exists()):
        sys.exit("haproxy missing: scripts/install-debian.sh haproxy=haproxy (as root)")
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    kinds = ["direct", "forwarded", "haproxy-1", "haproxy-3"]
    runs = {k: [] for k in kinds}
    for rep in range(opts.reps):
        for kind in (kinds if rep % 2 == 0 else list(reversed(kinds))):
            procs, url, open_at = setup(kind)
            try:
                log(f"rep {rep + 1}: {kind} ({url})")
                r = drive(url, opts.sessions, opts.calls, open_at)
            finally:
                for proc in procs:
                    proc.stop()
            if "fatal" in r or r.get("errors"):
                log(f"{kind}: {r.get('fatal') or r.get('first_error')} ({r.get('errors')} errors)")
            runs[kind].append(r)
    where = "systems under test on core 0, driver on core 1" if common.PIN else "not pinned"
    print(f"tools/call e__echo, {opts.sessions} sessions x {opts.calls} calls, median of {opts.reps} "
          f"runs; {where}")
    print(f"{'system':<12} {'calls/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
    table = {}
    for kind in kinds:
        rs = runs[kind]
        row = {
            "calls_per_sec": median([r.get("calls_per_s") for r in rs]),
            "p50_ms": median([r.get("p50_ms") for r in rs]),
            "p99_ms": median([r.get("p99_ms") for r in rs]),
            "errors": sum(r.get("errors") or 0 for r in rs) + sum(1 for r in rs if "fatal" in r),
        }
        table[kind] = row
        cell = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
        print(f"{kind:<12} {cell(row['calls_per_sec'], '9.0f')} {cell(row['p50_ms'], '8.2f')} "
              f"{cell(row['p99_ms'], '8.2f')} {row['errors']:>7}")
    direct, forwarded = table["direct"]["p50_ms"], table["forwarded"]["p50_ms"]
    if direct is not None and forwarded is not None:
        print(f"added p50 of a forwarded request: {forwarded - direct:.2f} ms")
    (RUN_DIR / "results.json").write_text(json.dumps({"table": table, "runs": runs}, indent=1))
    print(json.dumps(table))


if __name__ == "__main__":
    main()
