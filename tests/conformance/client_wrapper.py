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
import sys
import tempfile
from typing import Any

from harness import Mcpmux, arguments_for, logger, toml_string
from mcp import Client, types

CALL_TIMEOUT_S = 30.0

log = logger("client-wrapper")


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
    with tempfile.TemporaryDirectory(prefix="mcpmux-conformance-client-") as tmp:
        servers = f"[servers.upstream]\nurl = {toml_string(opts.server_url)}\nnamespace = \"\"\n"
        log(f"scenario {scenario}: upstream {opts.server_url}")
        try:
            with Mcpmux(opts.mcpmux, servers, tmp, log) as gw:
                code = asyncio.run(drive(gw.url))
        except Exception as exc:
            log(f"failed: {type(exc).__name__}: {exc}")
            code = 1
    log(f"done, exit {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
