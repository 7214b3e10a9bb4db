"""The report of bench/cost.py (issue 28, the cost of a relayed call): its method text, its tables
(medians over the repetitions; ratios against nginx, agentgateway and the direct path measured in
the same run) and its goals. Used by bench/report.py (docs/benchmarks.md) and bench/cost.py."""
import statistics

DIRECT, DIRECT_STDIO = "direct HTTP", "direct stdio"
NGINX_HTTP = "nginx → HTTP"
MUX_STDIO, MUX_HTTP = "mcpmux → stdio", "mcpmux → HTTP"
TEAM_STDIO, TEAM_HTTP = "mcpmux (team) → stdio", "mcpmux (team) → HTTP"
AGW_STDIO, AGW_HTTP = "agentgateway → stdio", "agentgateway → HTTP"
MAIN = [DIRECT, DIRECT_STDIO, NGINX_HTTP, MUX_STDIO, MUX_HTTP, TEAM_STDIO, TEAM_HTTP, AGW_STDIO, AGW_HTTP]
# What each per-feature run is compared with (in the same repetition).
FEATURE_BASE = {"api key + 3 policy rules": "api key"}


def feature(plain, name):
    return f"{plain} + {name}"


def med(runs, key):
    vals = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
    return statistics.median(vals) if vals else None


def fmt(v, digits=0):
    if v is None:
        return "–"
    return f"{v + 0.0 if round(v, digits) else 0.0:,.{digits}f}"  # no "-0.0"


def rng(runs, key, digits=0, scale=1.0):
    vals = [r[key] * scale for r in runs if isinstance(r.get(key), (int, float))]
    if len(vals) < 2:
        return "–"
    return f"{fmt(min(vals), digits)}–{fmt(max(vals), digits)}"


def ratio(a, b):
    return None if a is None or not b else a / b


def x(r):
    return "–" if r is None else f"{r:.2f}×"


def errors(runs):
    n = sum(r.get("errors", 0) or 0 for r in runs)
    fatal = [r for r in runs if "fatal" in r]
    return f"{n} + {len(fatal)} failed runs" if fatal else str(n)


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


class View:
    """Medians of one run of bench/cost.py."""

    def __init__(self, res):
        self.res, self.sys = res, res.get("systems", {})

    def runs(self, name, k):
        return self.sys.get(name, {}).get(str(k), [])

    def rate(self, name, k):
        return med(self.runs(name, k), "calls_per_s")

    def cpu(self, name, k):
        """The gateway's CPU ms per 1,000 relayed calls (= µs per call)."""
        return med(self.runs(name, k), "gw_us_per_call")

    def p50(self, name):
        return med(self.runs(name, 1), "p50_ms")

    def why_not(self, name):
        e = self.sys.get(name, {})
        return e.get("unavailable") or (f"did not start: {e['fatal']}" if "fatal" in e else None)

    def agw_for(self, name):
        return AGW_STDIO if self.res.get("paths", {}).get(name) == "stdio" else AGW_HTTP

    def direct_for(self, name):
        return DIRECT_STDIO if self.res.get("paths", {}).get(name) == "stdio" else DIRECT

    def delta(self, name, base, k=8):
        """The per-repetition differences of the gateway's µs per call, name minus base."""
        by_rep = {r.get("rep"): r.get("gw_us_per_call") for r in self.runs(base, k)}
        return [r["gw_us_per_call"] - by_rep[r.get("rep")] for r in self.runs(name, k)
                if r.get("gw_us_per_call") is not None and by_rep.get(r.get("rep")) is not None]


def pair(a, b):
    return "–" if a == "–" and b == "–" else f"{a} / {b}"


def method(res):
    """The "Cost of a relayed call" part of the Method section."""
    c, w, v = res.get("calls", {}), res.get("warmup", {}), res.get("versions", {})
    calls = ", ".join(f"K={k}: {int(k) * n:,} ({n} per session, + {w.get(k, '?')} warm-up)" for k, n in c.items())
    checked = res.get("check_config", {})
    check = "; ".join(f"{p}: {'passed' if r['exit'] == 0 else 'FAILED'}" for p, r in checked.items()) or "not run"
    return f"""### Cost of a relayed call (issue 28)

- `bench/run.py --only cost` (or `python3 bench/cost.py`, which prints the tables): every system in one
  run, {res.get('reps', '?')} repetition(s), the order of the systems alternating; medians, errors summed.
  Calls per run: {calls}.
- Placement: everything of the system under test on core 0 (the gateway, its upstream, a stdio
  child), the driver on core 1, and the OTLP receiver on core 1.
- **Gateway CPU** is utime + stime from `/proc/PID/stat` of the gateway's own processes over one
  driver run, divided by the calls relayed in it (measured + warm-up; the K initialize and DELETE
  exchanges are under 1% of them): nginx's master and worker; mcpmux's and agentgateway's own
  process, not their stdio child nor the HTTP upstream. "All of core 0" adds the upstream and
  every stdio child, those that ended during the run too (their time moves to the parent's
  cutime + cstime, which is counted). The
  tick is 10 ms; a K=8/32 run relays ≥ 16,000 calls in the full run (far fewer with `--quick`).
- Systems: `direct` is the driver talking to `bench/rawecho.mjs` itself (over HTTP, or its stdio
  child for the K=1 latency baseline of the stdio paths). `nginx → HTTP`: {v.get('nginx', 'nginx: not installed')},
  `worker_processes 1`, `access_log off`, an `upstream` with `keepalive 64`, `proxy_http_version
  1.1`, `proxy_set_header Connection ""`, `proxy_buffering off`, `proxy_request_buffering off`
  (it parses no JSON-RPC). `mcpmux → stdio` runs rawecho as its child, `mcpmux → HTTP` as its own
  process; plain: no `[auth]`, `RUST_LOG=warn` (no access log), no telemetry, no `[cluster]`.
  agentgateway: {v.get('agentgateway', 'not measured (AGENTGATEWAY_BIN unset)')}; one MCP route with one
  target (stdio or HTTP), stateful, its admin, stats and readiness listeners off, logging at warn.
- **Team** set-up (`mcpmux (team)`): `[auth]` with one `[[auth.api_keys]]` (the driver sends it as a
  bearer), three `[[policy]]` rules (two for other groups, the last for the key's, allowing `e__*`),
  `RUST_LOG=info` (the access log, one line per call, to `target/bench-run/*.log`), `[telemetry]
  otlp_endpoint` at `bench/otlp_sink.py` (accepts OTLP/HTTP, counts the spans, drops them) and
  `[cluster] key` (from `mcpmux keygen`) with `advertise`. `mcpmux check-config` on it: {check}.
- **Per feature**: the plain set-up with one feature (K=8 only, after an unmeasured warm-up); its
  cost is the difference from the plain run of the same path in the same repetition (the policy
  rules: from `api key`), median over the repetitions; the dearest feature of each path is in bold.
  Runs with telemetry wait 1.2 s before and after each measured run, so the spans of its calls
  (sent in batches every second) are exported inside its CPU window and the previous run's outside.
- agentgateway keeps a stdio upstream per session (it starts a `node` child for each session it
  opens and ends it with the session: 8 sessions, 8 children); mcpmux shares one child among all
  sessions. Those start-ups are in agentgateway's "all of core 0", not in its own CPU.
"""


def markdown(res):
    """The result tables and the goals."""
    v = View(res)
    order = [n for n in MAIN if n in v.sys] + [n for n in res.get("order", []) if n in v.sys and n not in MAIN]
    out = ["\n## 6. Cost of a relayed call (issue 28)\n"]
    if res.get("quick"):
        out.append("> Quick run: few calls per run, one repetition; the CPU figures carry the 10 ms tick's error.\n")

    rows = []
    for name in [n for n in MAIN if n in v.sys and n != DIRECT_STDIO]:
        why = v.why_not(name)
        if why and not v.runs(name, 8):
            rows.append([name, why] + [""] * 8)
            continue
        agw = v.agw_for(name)
        ks = (8, 32)
        rows.append([
            name, pair(*(fmt(v.rate(name, k)) for k in ks)),
            pair(*(x(ratio(v.rate(name, k), v.rate(DIRECT, k))) for k in ks)),
            pair(*(x(ratio(v.rate(name, k), v.rate(agw, k))) for k in ks)) if name not in (agw, DIRECT) else "–",
            pair(*(fmt(v.cpu(name, k), 1) for k in ks)),
            pair(*(x(ratio(v.cpu(name, k), v.cpu(NGINX_HTTP, k))) for k in ks)) if name != DIRECT else "–",
            pair(*(x(ratio(v.cpu(name, k), v.cpu(agw, k))) for k in ks)) if name not in (agw, DIRECT) else "–",
            pair(*(fmt(med(v.runs(name, k), "core0_us_per_call"), 1) for k in ks)),
            errors(v.runs(name, 1) + v.runs(name, 8) + v.runs(name, 32)),
        ])
    out.append("Each cell is K=8 / K=32 sessions. CPU is the gateway's own (ms per 1,000 calls = µs per call); "
               "\"all of core 0\" adds the upstream (and a stdio child). × agentgateway is against "
               "agentgateway on the same path (stdio or HTTP).\n")
    out.append(table(["system", "calls/s", "× direct HTTP calls/s", "× agentgateway calls/s",
                      "gateway CPU ms/1k calls", "× nginx CPU", "× agentgateway CPU", "all of core 0 ms/1k",
                      "errors"], rows))

    out.append("\n### One session: latency\n")
    rows = []
    for name in [n for n in MAIN if n in v.sys]:
        runs = v.runs(name, 1)
        if not runs:
            rows.append([name, v.why_not(name) or "–", "", "", ""])
            continue
        base = v.direct_for(name)
        p50, b = v.p50(name), v.p50(base)
        added = None if p50 is None or b is None or name == base else p50 - b
        rows.append([name, fmt(p50, 3), fmt(med(runs, "p99_ms"), 3),
                     "–" if name == base else f"{fmt(added, 3)} (vs {base})", errors(runs)])
    out.append(table(["system", "p50 ms", "p99 ms", "added p50 ms", "errors"], rows))

    out.append("\n### Every run at 8 and 32 sessions\n")
    rows = []
    for name in order:
        for k in (8, 32):
            runs = v.runs(name, k)
            if runs:
                rows.append([name, k, fmt(v.rate(name, k)), rng(runs, "calls_per_s"), fmt(med(runs, "p50_ms"), 3),
                             fmt(med(runs, "p99_ms"), 3), fmt(v.cpu(name, k), 1), rng(runs, "gw_us_per_call", 1),
                             fmt(med(runs, "core0_us_per_call"), 1), errors(runs)])
    out.append(table(["system", "sessions", "calls/s", "range", "p50 ms", "p99 ms", "gateway CPU ms/1k calls",
                      "range", "all of core 0 ms/1k", "errors"], rows))

    out.append("\n### What each feature costs per call (8 sessions)\n")
    rows, dearest = [], {}
    features = [n.split(" + ", 1)[1] for n in res.get("order", []) if n.startswith(MUX_STDIO + " + ")]
    for fname in features + ["team (all of them)"]:
        for plain, team in ((MUX_STDIO, TEAM_STDIO), (MUX_HTTP, TEAM_HTTP)):
            name = team if fname.startswith("team") else feature(plain, fname)
            base = feature(plain, FEATURE_BASE[fname]) if fname in FEATURE_BASE else plain
            runs = v.runs(name, 8)
            if not runs:
                rows.append([fname, plain, v.why_not(name) or "–", "", "", "", "", ""])
                continue
            d = v.delta(name, base)
            mid = statistics.median(d) if d else None
            if mid is not None and not fname.startswith("team") and mid > dearest.get(plain, (None, float("-inf")))[1]:
                dearest[plain] = (len(rows), mid)
            rows.append([fname, plain, fmt(v.cpu(name, 8), 1), fmt(mid, 1),
                         base, (f"{fmt(min(d), 1)} – {fmt(max(d), 1)}" if len(d) > 1 else "–"),
                         fmt(v.rate(name, 8)), errors(runs)])
    for i, _ in dearest.values():  # the dearest feature of each path in bold
        rows[i][3] = f"**{rows[i][3]}**"
    out.append(table(["feature", "path", "gateway µs/call", "Δ µs/call", "against", "Δ range", "calls/s", "errors"],
                     rows))
    spans = [o for n in (TEAM_STDIO, TEAM_HTTP) + tuple(n for n in v.sys if n.endswith("telemetry (OTLP)"))
             for o in v.sys.get(n, {}).get("otlp", [])]
    if spans:
        got = {key: sum(o.get(key, 0) for o in spans) for key in ("requests", "bytes", "spans", "relayed")}
        per = ratio(got["spans"], got["relayed"])
        out.append(f"\nThe OTLP receiver got {got['requests']:,} export requests, {got['bytes']:,} bytes, "
                   f"{got['spans']:,} spans from the runs with telemetry ({fmt(per, 2)} spans per relayed call; "
                   "each call makes a SERVER and a CLIENT span, and the sessions' initialize and DELETE make a few "
                   "more; fewer than 2 means spans were dropped).\n")

    out.append("\n### Goals (issue 28)\n")
    out.append(table(["goal", "measured (K=8 / K=32 where two)", "met"], goals(v)))
    return "\n".join(out)


def goals(v):
    rows = []
    agw_missing = not (v.runs(AGW_HTTP, 8) or v.runs(AGW_STDIO, 8))
    agw_why = v.why_not(AGW_HTTP) or v.why_not(AGW_STDIO) or "no figures"
    agw_note = (f"not measured ({agw_why})" if "AGENTGATEWAY_BIN" in agw_why
                else f"not measured (agentgateway: {agw_why})")

    def both(fig, limit, better):
        vals = [fig(k) for k in (8, 32)]
        text = " / ".join(x(r) for r in vals)
        if None in vals:
            return text, "not measured"
        return text, "yes" if all((r <= limit) if better == "le" else (r >= limit) for r in vals) else "**no**"

    for label, http, stdio in (("", MUX_HTTP, MUX_STDIO), ("team set-up: ", TEAM_HTTP, TEAM_STDIO)):
        cpu, rate = v.cpu, v.rate
        # (goal, figure, mcpmux's system, the system it is compared with, limit, better)
        for goal, metric, mine, base, limit, better in (
            ("CPU per call, mcpmux → HTTP ≤ 1.5× nginx's", cpu, http, NGINX_HTTP, 1.5, "le"),
            ("CPU per call, mcpmux → stdio ≤ 0.8× nginx's", cpu, stdio, NGINX_HTTP, 0.8, "le"),
            ("CPU per call, mcpmux → HTTP ≤ 0.2× agentgateway → HTTP", cpu, http, AGW_HTTP, 0.2, "le"),
            ("CPU per call, mcpmux → stdio ≤ 0.2× agentgateway → stdio", cpu, stdio, AGW_STDIO, 0.2, "le"),
            ("calls/s, mcpmux → HTTP ≥ 5× agentgateway → HTTP", rate, http, AGW_HTTP, 5, "ge"),
            ("calls/s, mcpmux → stdio ≥ 5× agentgateway → stdio", rate, stdio, AGW_STDIO, 5, "ge"),
            ("calls/s, mcpmux → HTTP ≥ 0.6× the direct path's", rate, http, DIRECT, 0.6, "ge"),
        ):
            if base in (AGW_HTTP, AGW_STDIO) and agw_missing:
                rows.append([label + goal, agw_note, "–"])
                continue
            text, met = both(lambda k: ratio(metric(mine, k), metric(base, k)), limit, better)
            rows.append([label + goal, text, met])
        for name, base in ((http, DIRECT), (stdio, DIRECT_STDIO)):
            p50, b = v.p50(name), v.p50(base)
            added = None if p50 is None or b is None else p50 - b
            rows.append([f"{label}p50 added latency at 1 session < 0.1 ms, {name} (vs {base})", "not measured" if added is None else f"{added:.3f} ms",
                         "–" if added is None else ("yes" if added < 0.1 else "**no**")])
    return rows
