"""What the benchmark scripts share: where the binaries are, core pinning, free ports, waiting for
a server, a system under test as a process group, its CPU time from /proc, and one driver run."""
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RELEASE = ROOT / "target" / "release"
MCPMUX, DRIVER, TEST_SERVER = (RELEASE / n for n in ("mcpmux", "mcpmux-bench", "mcpmux-test-server"))
RAWECHO = ROOT / "bench" / "rawecho.mjs"
RUN_DIR = ROOT / "target" / "bench-run"

# Pin the system under test to core 0 and the load driver to core 1 when there are two cores.
PIN = shutil.which("taskset") is not None and (os.cpu_count() or 1) >= 2


def pinned(core, cmd):
    return ["taskset", "-c", str(core), *cmd] if PIN else cmd


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=60.0):
    """Something accepts connections on `port`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def wait_ready(port, timeout=120.0):
    """mcpmux's /readyz answers 200 (by default once every upstream had its first start attempt)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def toml_str(s):
    return json.dumps(str(s)).replace("$", "$$")


class Sut:
    """A process group started on `core`; stopped by its own id (SIGTERM, then SIGKILL)."""

    def __init__(self, name, cmd, env=None, core=0):
        self.name = name
        logfile = open(RUN_DIR / f"{name}.log", "ab")
        self.started_ns = time.time_ns()
        self.proc = subprocess.Popen(pinned(core, cmd), cwd=ROOT, env={**os.environ, **(env or {})},
                                     stdin=subprocess.DEVNULL, stdout=logfile, stderr=logfile,
                                     start_new_session=True)
        logfile.close()

    @property
    def pid(self):
        return self.proc.pid

    def cpu_seconds(self):
        """User + system CPU time of the main process so far (not of its children)."""
        return proc_cpu(self.pid)

    def peak_rss(self):
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        except (OSError, ValueError):
            pass
        return None

    def stop(self, grace=15.0):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        try:  # whatever is left of the group this run created (children of a peer)
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass


def rawecho_http(tag, core=0):
    """bench/rawecho.mjs over HTTP on `core`: (its Sut, its port)."""
    port = free_port()
    sut = Sut(f"{tag}-rawecho", ["node", str(RAWECHO), "http"], {"PORT": str(port)}, core)
    if not wait_port(port):
        sut.stop()
        raise RuntimeError("rawecho did not start")
    return sut, port


def proc_cpu(pid, reaped=False):
    """User + system CPU seconds of one live process, from /proc/PID/stat; with `reaped`, plus
    those of its children that ended and were waited for (cutime + cstime)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = sum(int(v) for v in fields[11:15 if reaped else 13])
        return ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def tree_cpu(roots, reaped=False):
    """CPU seconds of the live processes under `roots` (the roots included): {pid: seconds}.
    With `reaped`, each adds its ended children's: a child that ends between two readings moves
    its time into its parent's, so the sum over the tree stays whole."""
    parent = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    tree, frontier = set(roots), list(roots)
    while frontier:
        pid = frontier.pop()
        kids = [p for p, pp in parent.items() if pp == pid and p not in tree]
        tree.update(kids)
        frontier += kids
    return {pid: cpu for pid in tree if (cpu := proc_cpu(pid, reaped)) is not None}


def drive(url, *args, suts=(), timeout=900):
    """Run the driver on core 1; its JSON line, or {"fatal": why}. Adds the CPU share (of one core)
    the driver, the system's main process and all of the system's processes (its upstreams too)
    used while the driver ran."""
    cmd = pinned(1, [str(DRIVER), url, "--json", *map(str, args)])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    sut = suts[0] if suts else None
    sut_before = sut.cpu_seconds() if sut else None
    tree_before = tree_cpu([s.pid for s in suts])
    t0 = time.monotonic()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"fatal": f"driver timed out after {timeout} s"}
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    for line in reversed(out.stdout.strip().splitlines()):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if not url.startswith("stdio:"):  # a stdio driver's children count as its own
            used = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            r["driver_cpu"] = round(used / wall, 3)
        sut_after = sut.cpu_seconds() if sut else None
        if sut_before is not None and sut_after is not None:
            r["sut_cpu"] = round((sut_after - sut_before) / wall, 3)
        tree_after = tree_cpu([s.pid for s in suts])
        if tree_after:
            used = sum(cpu - tree_before.get(pid, 0.0) for pid, cpu in tree_after.items())
            r["sut_tree_cpu"] = round(used / wall, 3)
        return r
    return {"fatal": (out.stderr.strip() or f"driver exited {out.returncode}")[-400:]}


def settle(limit_s):
    """Let the build and the installs finish with the machine: flush dirty pages (writeback after a
    release build stalls processes for hundreds of ms), then wait until the 1-minute load average is
    under 1 or `limit_s` passed. Returns the seconds waited."""
    started = time.monotonic()
    os.sync()
    while os.getloadavg()[0] >= 1.0 and time.monotonic() - started < limit_s:
        time.sleep(2)
    waited = round(time.monotonic() - started)
    log(f"settled for {waited} s (load average {os.getloadavg()[0]:.2f})")
    return waited
