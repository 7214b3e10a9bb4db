"""What the conformance client scripts share: the `mcpmux serve` child process they drive, its
config file, and the made-up arguments they call tools with.

    with Mcpmux(mcpmux_bin, servers_toml, tmp) as gw:   # serves on a free port, stops on exit
        ... gw.url ...

Imported by client_wrapper.py (non-auth scenarios), auth_client.py (auth scenarios) and
auth_host.py (the in-band sign-in host); stdlib only, so any of them can import it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from typing import Any

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0


def logger(tag: str):
    """A function printing `[tag] msg` to stderr (stdout is the scripts' result channel)."""

    def log(msg: str) -> None:
        print(f"[{tag}] {msg}", file=sys.stderr, flush=True)

    return log


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mcpmux exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"mcpmux did not listen on port {port} within {START_TIMEOUT_S} s")


def toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def toml_inline(table: dict[str, Any]) -> str:
    """`{ k = "v", n = ["a"] }` for string and list-of-string values."""

    def value(v: Any) -> str:
        if isinstance(v, list):
            return "[" + ", ".join(toml_string(str(x)) for x in v) + "]"
        return toml_string(str(v))

    return "{ " + ", ".join(f"{k} = {value(v)}" for k, v in table.items()) + " }"


def example_value(schema: dict[str, Any]) -> Any:
    """A value that satisfies a (simple) JSON schema."""
    if "default" in schema:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("oneOf", "anyOf"):
        if schema.get(key):
            return example_value(schema[key][0])
    typ = schema.get("type")
    if isinstance(typ, list):
        typ = next((t for t in typ if t != "null"), "string")
    if typ == "object":
        props = schema.get("properties", {})
        return {k: example_value(v) for k, v in props.items() if k in schema.get("required", list(props))}
    if typ == "array":
        return [example_value(schema.get("items", {}))] if schema.get("minItems") else []
    if typ == "integer":
        return int(schema.get("minimum", 1))
    if typ == "number":
        return float(schema.get("minimum", 1))
    if typ == "boolean":
        return True
    return "test"


def arguments_for(tool: Any) -> dict[str, Any]:
    """Arguments for an `mcp` Tool, made up from its input schema."""
    schema = getattr(tool, "input_schema", None) or {}
    props = schema.get("properties", {})
    return {name: example_value(prop) for name, prop in props.items()}


def gateway_toml(port: int, servers: str, extra: str = "") -> str:
    """A whole mcpmux config: `[gateway]` listening on 127.0.0.1:port, then `servers`."""
    return f'[gateway]\nlisten = "127.0.0.1:{port}"\n{extra}\n\n{servers}'


class Mcpmux:
    """`mcpmux serve --config DIR/mcpmux.toml` as a child process (its log on our stderr)."""

    def __init__(self, binary: str, servers: str, directory: str, log=None) -> None:
        self.binary = binary
        self.port = free_port()
        self.config = os.path.join(directory, "mcpmux.toml")
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = log or logger("mcpmux")
        with open(self.config, "w") as f:
            f.write(gateway_toml(self.port, servers))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> "Mcpmux":
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "mcpmux=info"))
        self.proc = subprocess.Popen([self.binary, "serve", "--config", self.config], env=env, stdout=sys.stderr)
        self.log(f"mcpmux pid {self.proc.pid} on port {self.port}")
        wait_for_port(self.port, self.proc)
        return self

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def __enter__(self) -> "Mcpmux":
        return self.start()

    def __exit__(self, *_exc: Any) -> None:
        self.stop()
