"""What the benchmark scripts share: core pinning, free ports."""
import os
import shutil
import socket

# Pin the system under test to core 0 and the load driver to core 1 when there are two cores.
PIN = shutil.which("taskset") is not None and (os.cpu_count() or 1) >= 2


def pinned(core, cmd):
    return ["taskset", "-c", str(core), *cmd] if PIN else cmd


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
