#!/usr/bin/env python3
"""Stateless-era checks with the Python SDK (mcp 2.3.0) client, for mcpmux's tests.

Usage:
    python py_modern.py URL ask TOOL --mode legacy|2026-07-28
        call TOOL {"prompt": ...} with a sampling callback; the result must carry the sampled text.
    python py_modern.py URL listen ADD_TOOL NEW_NAME
        a 2026-07-28 client listens for toolsListChanged while a legacy client holds a session;
        calling ADD_TOOL {"name": NEW_NAME} must reach the listen stream (tagged with its
        subscription id) and the legacy session, and the new tool must then be listed.
    python py_modern.py URL call TOOL JSON_ARGUMENTS EXPECTED_TEXT --mode legacy|2026-07-28
        call TOOL; the result must not be an error and its text must equal EXPECTED_TEXT.
    python py_modern.py URL watch SET_TOOL
        a legacy client subscribes (resources/subscribe) to the resource named "pad" and a
        2026-07-28 client listens with resourceSubscriptions for it; calling SET_TOOL
        {"text": ...} must reach both as notifications/resources/updated for the exposed URI,
        and a read must then return the new text.

stdout carries exactly one JSON line with "ok" and what was observed; exit 0 on success.
"""

from __future__ import annotations

import json
import sys
import traceback
import warnings
from typing import Any

import anyio
import mcp.types as types
from mcp import Client, MCPDeprecationWarning

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

SAMPLED = "sampled-through-mcpmux"


async def on_sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=SAMPLED), model="mcpmux-test"
    )


def text_of(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


async def ask(url: str, tool: str, mode: str, obs: dict[str, Any]) -> None:
    async with Client(url, mode=mode, sampling_callback=on_sampling, cache=None) as client:
        obs["protocol_version"] = client.protocol_version
        result = await client.call_tool(tool, {"prompt": "what is the answer?"})
        obs["text"] = text_of(result)
        obs["is_error"] = result.is_error
        obs["ok"] = SAMPLED in obs["text"] and not result.is_error


async def listen(url: str, add_tool: str, new_name: str, obs: dict[str, Any]) -> None:
    legacy_seen = anyio.Event()

    async def on_legacy_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            legacy_seen.set()

    async with Client(url, mode="legacy", message_handler=on_legacy_message, cache=None) as legacy:
        obs["legacy_version"] = legacy.protocol_version
        async with Client(url, mode="2026-07-28", cache=None, read_timeout_seconds=20) as modern:
            async with modern.listen(tools_list_changed=True) as sub:
                obs["subscription_id"] = sub.subscription_id
                obs["honored"] = str(sub.honored)
                result = await modern.call_tool(add_tool, {"name": new_name})
                obs["add_result"] = text_of(result)
                with anyio.fail_after(10):
                    event = await sub.__anext__()
                obs["listen_event"] = type(event).__name__
            with anyio.fail_after(10):
                await legacy_seen.wait()
            obs["legacy_notified"] = True
            tools = [t.name for t in (await modern.list_tools()).tools]
            obs["tools"] = tools
            obs["ok"] = obs["listen_event"] == "ToolsListChanged" and any(t.endswith(new_name) for t in tools)


async def call(url: str, tool: str, arguments: str, expected: str, mode: str, obs: dict[str, Any]) -> None:
    async with Client(url, mode=mode, cache=None) as client:
        obs["protocol_version"] = client.protocol_version
        await client.list_tools()  # the client learns the tool's x-mcp-header annotations
        result = await client.call_tool(tool, json.loads(arguments))
        obs["text"] = text_of(result)
        obs["is_error"] = result.is_error
        obs["ok"] = obs["text"] == expected and not result.is_error


async def watch(url: str, set_tool: str, obs: dict[str, Any]) -> None:
    legacy_uris: list[str] = []
    legacy_seen = anyio.Event()

    async def on_legacy_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            legacy_uris.append(str(message.params.uri))
            legacy_seen.set()

    async with Client(url, mode="legacy", message_handler=on_legacy_message, cache=None) as legacy:
        resources = (await legacy.list_resources()).resources
        uri = next(str(r.uri) for r in resources if r.name == "pad")
        obs["uri"] = uri
        await legacy.subscribe_resource(uri)
        async with Client(url, mode="2026-07-28", cache=None, read_timeout_seconds=20) as modern:
            async with modern.listen(resource_subscriptions=[uri]) as sub:
                obs["honored"] = list(sub.honored.resource_subscriptions or [])
                await modern.call_tool(set_tool, {"text": "changed-through-mcpmux"})
                with anyio.fail_after(10):
                    event = await sub.__anext__()
                obs["listen_event"] = type(event).__name__
                obs["listen_uri"] = str(getattr(event, "uri", ""))
        with anyio.fail_after(10):
            await legacy_seen.wait()
        obs["legacy_uris"] = legacy_uris
        read = await legacy.read_resource(uri)
        obs["text"] = getattr(read.contents[0], "text", "")
        obs["ok"] = (
            obs["honored"] == [uri]
            and obs["listen_uri"] == uri
            and legacy_uris == [uri]
            and obs["text"] == "changed-through-mcpmux"
        )


def main() -> int:
    url, scenario, *args = sys.argv[1:]
    obs: dict[str, Any] = {"scenario": scenario, "ok": False}
    try:
        if scenario == "ask":
            tool, flag, mode = args
            if flag != "--mode":
                raise SystemExit(2)
            anyio.run(ask, url, tool, mode, obs)
        elif scenario == "listen":
            anyio.run(listen, url, args[0], args[1], obs)
        elif scenario == "call":
            tool, arguments, expected, flag, mode = args
            if flag != "--mode":
                raise SystemExit(2)
            anyio.run(call, url, tool, arguments, expected, mode, obs)
        elif scenario == "watch":
            anyio.run(watch, url, args[0], obs)
        else:
            print(f"unknown scenario {scenario}", file=sys.stderr)
            return 2
    except BaseException as exc:  # report every failure as JSON
        traceback.print_exc(file=sys.stderr)
        obs["error"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(obs))
    return 0 if obs["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
