#!/usr/bin/env python3
"""mcpmux as the *client* under test of the official conformance suite.

The suite's client mode starts its own MCP test server and runs `COMMAND ARGS... SERVER_URL`.
This wrapper starts mcpmux with SERVER_URL as its only upstream (Streamable HTTP, no namespace),
drives it with the Python `mcp` 2.3.0 client, and exits. So what the suite's server sees is
mcpmux's upstream client: its initialize, its tool calls, its SSE resumption.

    python client_wrapper.py --mcpmux PATH/TO/mcpmux SERVER_URL

Through mcpmux the client lists every tool and calls each once, with arguments made up from the
tool's input schema. It answers elicitation by accepting with every default the schema gives
(SEP-1034) and sampling with a fixed text. mcpmux's log goes to this process's stderr.
Exit 0 when every call got a reply (a tool error counts as a reply), 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

from mcp import Client, types

START_TIMEOUT_S = 20.0
CALL_TIMEOUT_S = 30.0


def log(msg: str) -> None:
    print(f"[client-wrapper] {msg}", file=sys.stderr, flush=True)


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


def arguments_for(tool: types.Tool) -> dict[str, Any]:
    schema = tool.input_schema or {}
    props = schema.get("properties", {})
    return {name: example_value(prop) for name, prop in props.items()}


async def drive(url: str) -> int:
    async def on_elicit(_ctx: Any, params: Any) -> types.ElicitResult:
        schema = getattr(params, "requested_schema", None) or {}
        content = {k: v["default"] for k, v in schema.get("properties", {}).items() if "default" in v}
        log(f"elicitation answered with the schema's defaults: {content}")
        return types.ElicitResult(action="accept", content=content)

    async def on_sampling(_ctx: Any, _params: Any) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="sampled by the mcpmux conformance wrapper"),
            model="mcpmux-wrapper",
        )

    failures = 0
    async with Client(
        url, mode="legacy", cache=None, elicitation_callback=on_elicit, sampling_callback=on_sampling
    ) as client:
        tools: list[types.Tool] = []
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        log(f"{len(tools)} tools through mcpmux: {[t.name for t in tools]}")
        for tool in tools:
            args = arguments_for(tool)
            try:
                result = await asyncio.wait_for(client.call_tool(tool.name, args), CALL_TIMEOUT_S)
                log(f"{tool.name}({args}) -> isError={result.is_error}")
            except Exception as exc:  # a JSON-RPC error or a timeout: report, keep going
                failures += 1
                log(f"{tool.name}({args}) failed: {type(exc).__name__}: {exc}")
    return 1 if failures else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mcpmux", required=True, help="path to the mcpmux binary")
    ap.add_argument("server_url")
    opts = ap.parse_args()
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "?")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="mcpmux-conformance-client-") as tmp:
        config = os.path.join(tmp, "mcpmux.toml")
        with open(config, "w") as f:
            f.write(
                f'[gateway]\nlisten = "127.0.0.1:{port}"\n\n'
                f"[servers.upstream]\nurl = {toml_string(opts.server_url)}\nnamespace = \"\"\n"
            )
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "mcpmux=info"))
        proc = subprocess.Popen([opts.mcpmux, "serve", "--config", config], env=env, stdout=sys.stderr)
        log(f"scenario {scenario}: mcpmux pid {proc.pid} on port {port}, upstream {opts.server_url}")
        try:
            wait_for_port(port, proc)
            code = asyncio.run(drive(f"http://127.0.0.1:{port}/mcp"))
        except Exception as exc:
            log(f"failed: {type(exc).__name__}: {exc}")
            code = 1
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    log(f"done, exit {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
