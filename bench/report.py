"""docs/benchmarks.md for bench/run.py: the machine, the versions, the method, and one table per
scenario (medians over the repetitions, ratios against the direct path measured in the same run)."""
import json
import os
import platform
import re
import statistics
import subprocess
from pathlib import Path

import cost_report

ROOT = Path(__file__).resolve().parent.parent
DIRECT, DIRECT_STDIO = "direct HTTP", "direct stdio"
MUX_HTTP, MUX_STDIO = "mcpmux → HTTP", "mcpmux → stdio"
# The same HTTP pair with the upstream on the driver's core: mcpmux has core 0 to itself.
DIRECT_CORE1, MUX_HTTP_CORE1 = "direct HTTP, upstream on core 1", "mcpmux → HTTP, upstream on core 1"


def baseline(name):
    """The direct path a system is compared with for added latency: the same upstream transport
    in the same placement."""
    if name in (DIRECT_CORE1, MUX_HTTP_CORE1):
        return DIRECT_CORE1
    return DIRECT if name in (DIRECT, MUX_HTTP) else DIRECT_STDIO


def throughput_baseline(name):
    """The direct HTTP path a system's calls/s are compared with: the one in the same placement."""
    return DIRECT_CORE1 if name in (DIRECT_CORE1, MUX_HTTP_CORE1) else DIRECT


def _cmd(*cmd, cwd=ROOT):
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def machine():
    cpu = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    models = re.findall(r"^model name\s*:\s*(.+)$", cpu, re.M)
    mhz = re.findall(r"^cpu MHz\s*:\s*(.+)$", cpu, re.M)
    mem = Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else ""
    total = re.search(r"^MemTotal:\s*(\d+) kB", mem, re.M)
    osrel = Path("/etc/os-release").read_text() if Path("/etc/os-release").exists() else ""
    pretty = re.search(r'^PRETTY_NAME="?([^"\n]+)', osrel, re.M)
    return {
        "cpu": models[0] if models else platform.processor(),
        "cpus": len(models) or os.cpu_count(),
        "mhz": mhz[0] if mhz else None,
        "mem_gib": round(int(total.group(1)) / 1048576, 1) if total else None,
        "os": pretty.group(1) if pretty else platform.system(),
        "kernel": platform.release(),
        "loadavg_at_start": os.getloadavg()[0],
    }


def versions(peers, driver):
    cargo = (ROOT / "Cargo.toml").read_text()
    version = re.search(r'^version\s*=\s*"([^"]+)"', cargo, re.M)
    commit = _cmd("git", "rev-parse", "--short", "HEAD")
    dirty = "+changes" if _cmd("git", "status", "--porcelain", "--untracked-files=no") else ""
    out = {
        "mcpmux": f"{version.group(1) if version else '?'} ({commit}{dirty})",
        "driver": _cmd(str(driver), "--version"),
        "rustc": _cmd("rustc", "--version"),
        "node": _cmd("node", "--version"),
        "python": platform.python_version(),
    }
    for pkg in ("mcp-proxy", "supergateway"):
        meta = peers / pkg / "node_modules" / pkg / "package.json"
        if meta.exists():
            out[pkg] = json.loads(meta.read_text()).get("version")
    py = peers / "fastmcp" / "bin" / "python"
    if py.exists():
        out["fastmcp"] = _cmd(str(py), "-c", "import importlib.metadata as m; print(m.version('fastmcp'))")
        out["mcp (python, under fastmcp)"] = _cmd(str(py), "-c", "import importlib.metadata as m; print(m.version('mcp'))")
    return out


def med(runs, key):
    vals = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
    return statistics.median(vals) if vals else None


def spread(runs, key, digits=0):
    """The lowest and highest of a figure over the repetitions, "lo–hi" (one value: itself)."""
    vals = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
    if len(vals) < 2:
        return f(vals[0], digits) if vals else "–"
    return f"{f(min(vals), digits)}–{f(max(vals), digits)}"


def errors(runs):
    n = sum(r.get("errors", 0) or 0 for r in runs)
    fatal = [r["fatal"] for r in runs if "fatal" in r]
    return f"{n} + {len(fatal)} failed runs" if fatal else str(n)


def f(x, digits=3):
    return "–" if x is None else f"{x:.{digits}f}"


def ratio(a, b):
    return None if a is None or not b else a / b


def x(r):
    return "–" if r is None else f"{r:.2f}×"


def pct(share):
    return "–" if share is None else f"{share * 100:.0f}%"


def mib(b):
    return "–" if b is None else f"{b / 1048576:.1f}"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def method(res):
    c = res["config"]
    calls = ", ".join(f"K={k}: {n}" for k, n in c["calls"].items())
    peer_calls = ", ".join(f"K={k}: {n}" for k, n in c.get("peer_calls", {}).items())
    warmup = ", ".join(f"K={k}: {n}" for k, n in c["warmup"].items())
    pin = ("every system under test (with its upstream children) runs under `taskset -c 0`, the driver "
           "under `taskset -c 1`" if res["pinned"] else "taskset was not available: nothing is pinned")
    return f"""## Method

- One command: `bench/run.sh{' --quick' if res['quick'] else ''}` builds the release binaries and runs
  `bench/run.py`, which starts each system under test, drives it with `target/release/mcpmux-bench` and
  stops it by its process id. Raw figures: `target/bench-run/results.json`, logs beside it.
- Pinning: {pin}. Before measuring, the run flushes dirty pages and waits until the 1-minute load
  average is under 1 (at most {'20' if res['quick'] else '120'} s; it waited {res.get('settled', '?')} s).
- Repetitions: {res['reps']}; the order of the systems alternates (ABC CBA ABC) and every figure below is
  the median over the repetitions. Errors are summed.
- The upstream is the same everywhere: `bench/rawecho.mjs` (node, dependency-free, tools `echo` and
  `sleep`), over stdio behind mcpmux and every peer, over HTTP for the direct path and mcpmux → HTTP.
- Calls: each session does initialize → `notifications/initialized` → W warm-up calls ({warmup}) → N
  measured sequential `tools/call echo` → DELETE (N = {calls}; for peers {peer_calls}); every reply's id is
  checked and its text must end with the call's unique message. Latency is from sending the POST to having read the response (an SSE
  reply's stream is then read to its end). calls/s = measured calls ÷ the span of the measured phase.
- Ratios are against the direct HTTP path (the driver talking to rawecho over HTTP) in the same run,
  in two placements of the HTTP upstream:
  - **upstream on core 0** (`direct HTTP`, `mcpmux → HTTP`, and every stdio system): the upstream
    belongs to the system under test. Through mcpmux it shares core 0 with the gateway, so throughput
    there is a CPU split: it cannot pass t_upstream ÷ (t_upstream + t_mcpmux) of the direct path
    whatever mcpmux does, and a faster upstream makes the ratio worse. Latency compares fairly here:
    both paths cross between the cores once each way.
  - **upstream on core 1** (`…, upstream on core 1`): rawecho runs on the driver's core on both paths,
    so mcpmux has a core of its own, as a gateway deployed on its own host or pod has. The direct path
    and mcpmux's path then give the upstream and the driver the same CPU, and the ratio says whether the
    extra hop costs throughput. The throughput goal is read in this placement; the other is shown too.
    A ratio above 1× there does not mean mcpmux speeds the upstream up: on the direct path the driver
    and rawecho take turns on core 1, and the CPU columns show both using more CPU per call than when
    the calls reach rawecho through mcpmux.
- Where the instructions of a relayed call go, and what the profile changed: `docs/profiling.md`
  (`bench/callgrind.sh`).
- Catalog: mcpmux in front of `mcpmux-test-server --only-generated` upstreams, `page_size = 100000` (one
  page); startup = from launching mcpmux until a `tools/list` has every tool; then {c['list_calls']}
  sequential `tools/list` on one session.
- Memory: a fresh mcpmux with one stdio rawecho; the driver reads mcpmux's `VmRSS` from `/proc`, opens the
  idle sessions (initialize + initialized, no stream), waits 0.5 s and reads it again.
- Fan-out: {c['listeners']} sessions hold the GET stream open; another session calls the test server's
  `add_tool`, and the driver times each listener's `notifications/tools/list_changed` from the moment it
  sent that call (3 rounds per repetition). mcpmux re-lists at once on the first change of a burst.
- Peers are installed with pinned versions under `target/bench-peers`; they are driven at most at
  K={c['peer_max_sessions']} (supergateway `--stateful` starts one child process per session).
""" + ("\n" + cost_report.method(res["cost"]) if "cost" in res else "")


def micro_rows(text):
    """divan's tree as rows: benchmark path, median time, allocations and bytes per iteration."""
    lines = text.splitlines()
    header = next((l for l in lines if "fastest" in l and "median" in l), None)
    if header is None:
        return []
    seps = [i for i, ch in enumerate(header) if ch == "│"]
    if len(seps) < 3:
        return []
    rows, path, current, kind, values = [], [], None, None, []
    for line in lines[lines.index(header) + 1:]:
        first, median = line[:seps[0]], line[seps[1] + 1:seps[2]].strip()
        label = first.strip(" │├╰─")
        if label.endswith(":"):  # "alloc:", "dealloc:", ...: a count line and a bytes line follow
            kind, values = label, []
            continue
        if kind is not None:
            values.append(median)
            if len(values) == 2:
                if kind == "alloc:" and current is not None:
                    current[2:4] = values
                kind = None
            continue
        fields = re.split(r"\s{2,}", label)
        depth = (len(first) - len(first.lstrip(" │├╰─"))) // 3
        path[max(depth - 1, 0):] = [fields[0]]
        if len(fields) > 1 and median:  # a leaf: its own figures on the line
            current = ["/".join(path), median, "–", "–"]
            rows.append(current)
    return rows


def markdown(res):
    m, v, call = res["machine"], res["versions"], res.get("call", {})
    out = ["# Benchmarks\n"]
    if res["quick"]:
        out.append("> **Quick run** (`bench/run.sh --quick`): small N and one repetition, to show the harness "
                   "works end to end. The figures are indicative only; run `bench/run.sh` on a quiet machine "
                   "for the real comparison.\n")
    out.append(f"Written by `bench/run.py` on {res['started']} in {res.get('duration_s', '?')} s; scenarios: "
               f"{', '.join(res['scenarios'])}.\n")
    out.append("## Machine\n")
    out.append(f"- CPU: {m['cpu']}, {m['cpus']} cores (cpu MHz {m['mhz']})\n- Memory: {m['mem_gib']} GiB\n"
               f"- OS: {m['os']}, kernel {m['kernel']}\n- Load average when measuring started: {m['loadavg_at_start']:.2f}\n")
    out.append("## Versions\n")
    out.append("".join(f"- {k}: {val}\n" for k, val in v.items()))
    out.append("\n" + method(res))
    goals = []

    if call:
        out.append("## 1. Overhead: one session, sequential `tools/call echo`\n")
        out.append("Added latency is against the direct path over the same upstream transport: direct HTTP for "
                   "mcpmux → HTTP, direct stdio (the driver on the child's pipes) for mcpmux → stdio and the "
                   "peers, which all front rawecho over stdio.\n")
        rows = []
        p50_of = lambda name: med(call.get(name, {}).get("1", []), "p50_ms")
        added = {}
        for name, by_k in call.items():
            runs = by_k.get("1", [])
            if not runs:
                rows.append([name, "did not run: " + by_k.get("fatal", "?")] + [""] * 6)
                continue
            p50, base = p50_of(name), p50_of(baseline(name))
            added[name] = None if p50 is None or base is None else p50 - base
            rows.append([name, f(p50), f(med(runs, "p90_ms")), f(med(runs, "p99_ms")), f(med(runs, "max_ms")),
                         f"{f(added[name])} ({baseline(name)})", x(ratio(p50, base)), errors(runs)])
        out.append(table(["system", "p50 ms", "p90 ms", "p99 ms", "max ms", "added p50 ms (vs)",
                          "p50 × direct", "errors"], rows))
        for name in (MUX_HTTP, MUX_STDIO):
            a = added.get(name)
            goals.append((f"added p50 ≤ 0.1 ms ({name} vs {baseline(name)})", f(a) + " ms",
                          a is not None and a <= 0.1))

        ks = sorted({int(k) for by_k in call.values() for k in by_k if k.isdigit()})
        out.append("\n## 2. Throughput: K concurrent sessions\n")
        rows = []
        for name, by_k in call.items():
            for k in ks:
                runs = by_k.get(str(k))
                if not runs:
                    continue
                rate = med(runs, "calls_per_s")
                base_runs = call.get(throughput_baseline(name), {}).get(str(k), [])
                rows.append([name, k, f(rate, 0), spread(runs, "calls_per_s"),
                             x(ratio(rate, med(base_runs, "calls_per_s"))),
                             f(med(runs, "p50_ms")), f(med(runs, "p99_ms")), pct(med(runs, "sut_cpu")),
                             pct(med(runs, "sut_tree_cpu")),
                             pct(med(runs, "driver_cpu")), mib(med(runs, "peak_rss_bytes")), errors(runs)])
        out.append(table(["system", "sessions", "calls/s", "range over reps", "× direct HTTP (same placement)", "p50 ms", "p99 ms", "main process CPU",
                          "with upstreams CPU", "driver CPU", "peak RSS MiB", "errors"], rows))
        out.append("\nThe main process is mcpmux (not its upstream), rawecho for the direct path, a peer's main "
                   "process (not its per-session children); its CPU is the share of one core it used while the "
                   "driver ran, and peak RSS its `VmHWM`; \"with upstreams\" adds every live process of the "
                   "system (the upstream rawecho, a peer's children that outlived the run). Everything of the "
                   "system shares core 0 (but the upstream on core 1 in that placement): near 100% there means "
                   "the system was CPU-bound; a driver near 100% means the driver set the pace.\n")
        for k in (8, 32) if any(str(k) in by_k for by_k in call.values()) else ():
            rate = lambda name: med(call.get(name, {}).get(str(k), []), "calls_per_s")
            r = ratio(rate(MUX_HTTP_CORE1), rate(DIRECT_CORE1))
            goals.append((f"throughput ≥ 0.8× direct HTTP at {k} sessions (mcpmux with a core of its own, "
                          "upstream on core 1)", x(r), r is not None and r >= 0.8))
            r = ratio(rate(MUX_HTTP), rate(DIRECT))
            goals.append((f"the same, mcpmux sharing core 0 with its upstream (a CPU split, see Method)", x(r),
                          r is not None and r >= 0.8))
            own = (DIRECT, MUX_HTTP, MUX_STDIO, DIRECT_STDIO, DIRECT_CORE1, MUX_HTTP_CORE1)
            peers = [(rate(n), n) for n in call if n not in own and rate(n)]
            if peers:
                best, who = max(peers)
                r = ratio(rate(MUX_STDIO), best)
                goals.append((f"≥ 3× the best peer at {k} sessions (mcpmux → stdio vs {who})", x(r),
                              r is not None and r >= 3))

    if "catalog" in res:
        out.append("\n## 3. Catalog: merged `tools/list` and startup\n")
        rows = []
        for shape, runs in res["catalog"].items():
            ups, per = shape.split("x")
            rows.append([f"{ups} × {per}", f(med(runs, "tools"), 0), f(med(runs, "startup_ms"), 1),
                         f(med(runs, "p50_ms")), f(med(runs, "p99_ms")), f(med(runs, "pages"), 0),
                         mib(med(runs, "peak_rss_bytes")), errors(runs)])
        out.append(table(["upstreams × tools", "tools", "startup ms", "tools/list p50 ms", "p99 ms", "pages",
                          "peak RSS MiB", "errors"], rows))
        p50 = med(res["catalog"].get("100x10", []), "p50_ms")
        goals.append(("tools/list over 1,000 merged tools < 1 ms p50 (100 × 10)", f(p50) + " ms",
                      p50 is not None and p50 < 1))

    if "memory" in res:
        out.append("\n## 4. Memory: idle sessions\n")
        rows = []
        for level, runs in sorted(res["memory"].items(), key=lambda kv: int(kv[0])):
            rows.append([level, mib(med(runs, "rss_before_bytes")), mib(med(runs, "rss_after_bytes")),
                         f(med(runs, "bytes_per_session"), 0), f(med(runs, "p50_ms")), errors(runs)])
        out.append(table(["idle sessions", "RSS at 0 MiB", "RSS after MiB", "bytes per session",
                          "initialize p50 ms", "errors"], rows))
        worst = max((med(r, "bytes_per_session") or 0 for r in res["memory"].values()), default=None)
        goals.append(("≤ 20 KiB per idle session", f(worst / 1024 if worst else None, 1) + " KiB",
                      worst is not None and worst <= 20 * 1024))

    if "fanout" in res:
        out.append("\n## 5. Fan-out: `tools/list_changed` to every session\n")
        runs = res["fanout"]
        rounds = [rd for r in runs for rd in r.get("rounds", [])]
        last = med(runs, "last_ms_median")
        out.append(table(["listeners", "rounds", "notified (median)", "first ms", "p50 ms", "last ms",
                          "trigger reply ms", "errors"],
                         [[f(med(runs, "listeners"), 0), len(rounds), f(med(rounds, "notified"), 0),
                           f(med(rounds, "first_ms")),
                           f(med(rounds, "p50_ms")), f(last), f(med(rounds, "trigger_ms")), errors(runs)]]))
        goals.append(("list_changed to 1k sessions < 50 ms (last session)", f(last) + " ms",
                      last is not None and last < 50))

    if goals:
        out.append("\n## Goals (issue 6)\n")
        out.append(table(["goal", "measured", "met"],
                         [[g, val, "yes" if ok else "**no**"] for g, val, ok in goals if not val.startswith("–")]))
    if "cost" in res:
        out.append(cost_report.markdown(res["cost"]))
    if "micro" in res:
        out.append("\n## Microbenchmarks: envelope parse and rewrite (`cargo bench --bench envelope`)\n")
        rows = micro_rows(res["micro"])
        if rows:
            out.append("Pinned to core 0; median time per iteration and the allocations it made (divan's "
                       "counting allocator).\n")
            out.append(table(["benchmark", "median", "allocations", "bytes allocated"], rows))
        else:
            out.append("```text\n" + res["micro"].strip() + "\n```\n")
    if "search" in res:
        out.append("\n## Tool search over 1,000 tools (`cargo bench --bench search`)\n")
        s = res["search"]
        if "error" in s:
            out.append("```text\n" + s["error"].strip() + "\n```\n")
        else:
            out.append(f"The recorded corpus replicated to {s['tools']} tools; its {s['queries']} quality-test "
                       "queries, limit 10, pinned to core 0.\n")
            out.append(table(["index build", "query p50", "query p99", "half hidden p50", "half hidden p99"],
                             [[f"{s['build_ms']:.2f} ms", f"{s['query_p50_us']:.1f} µs", f"{s['query_p99_us']:.1f} µs",
                               f"{s['filtered_p50_us']:.1f} µs", f"{s['filtered_p99_us']:.1f} µs"]]))
    if "peers_error" in res:
        out.append(f"\nPeers could not be installed: {res['peers_error']}\n")
    return "\n".join(out)
