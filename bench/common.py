"""What the benchmark scripts share: core pinning, free ports, waiting for a server."""
import os
import shutil
import socket
import time
import urllib.request

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
