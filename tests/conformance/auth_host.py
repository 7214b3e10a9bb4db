#!/usr/bin/env python3
"""A real MCP host (the Python `mcp` 2.3.0 client) signing in to an upstream through mcpmux,
in-band, the way a person at a chat app would.

    python auth_host.py URL [--mode legacy|2026-07-28] [--login NAME] [--bearer TOKEN] [TOOL JSON ...]

The host declares elicitation (form and URL mode). It lists mcpmux's tools; while an upstream
shows only its `{namespace}__authorize` tool it calls that. Whenever mcpmux asks for a sign-in —
an `elicitation/create` with `mode: "url"` (session era), an `input_required` result carrying a
URL elicitation (2026-07-28: the SDK hands it to the same callback), an error -32042 with the
links in its data, or a tool result with `isError` and a link — the person opens the link in the
test browser (browser.py: follows the redirects, fills the authorization server's login and
consent forms as NAME, lands on mcpmux's /oauth/callback) and the host accepts / retries. Then it
calls each TOOL with its JSON arguments, or, without any, every tool listed with arguments made
up from its schema. A call that fails while the authorize tool is listed again (more scope, a grant
gone) is retried once after signing in through it, as a person would.

stdout carries ONE JSON line: "ok" (every call answered without isError), "tools" (the names
listed after sign-in), "texts" ({tool: text}), "errors" ({tool: why}), "links" (every sign-in
link opened), "landed" (where each browser visit ended), "asked_by" (how each sign-in was asked
for: "elicitation", "error" for -32042, "result" for a tool result with a link), "completed" (the
`elicitationId`s of `notifications/elicitation/complete` heard), "authorize_tool", "relisted"
(calls that failed and were retried once after the authorize tool, listed again, was used). Exit 0 when ok.
Importable: `run(url, mode, login, calls, log)` returns that dict.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import traceback
import warnings
from typing import Any

from browser import visit
from harness import arguments_for, logger
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

CALL_TIMEOUT_S = 60.0
SIGN_IN_ROUNDS = 4  # sign-ins per call before the host gives up (the AS may keep refusing)
RELIST_ROUNDS = 150  # lists of tools (0.1 s apart) waiting for the first tools, or the real ones after a sign-in
AFTER_FAILURE_ROUNDS = 20  # lists of tools (0.1 s apart) looking for the authorize tool after a failed call
LINK = re.compile(r"https?://[^\s\"'<>)\]]+")

try:  # MCPDeprecationWarning exists in mcp 2.x; the legacy mode warns about itself
    from mcp import MCPDeprecationWarning

    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
except ImportError:  # pragma: no cover
    pass


def text_of(result: Any) -> str:
    return " ".join(getattr(c, "text", "") or "" for c in getattr(result, "content", []) or [])


def is_authorize(name: str) -> bool:
    return name == "authorize" or name.endswith("__authorize")


def error_links(exc: BaseException) -> list[str] | None:
    """The URLs of an error -32042 (URL elicitation required), else None."""
    error = getattr(exc, "error", None)
    if error is None or getattr(error, "code", None) != types.URL_ELICITATION_REQUIRED:
        return None
    data = getattr(error, "data", None) or {}
    found = [e.get("url") for e in data.get("elicitations", []) if isinstance(e, dict) and e.get("url")]
    return found or LINK.findall(json.dumps(data)) or LINK.findall(getattr(error, "message", ""))


async def run(
    url: str, mode: str, login: str, calls: list[tuple[str, dict[str, Any]]], log, bearer: str | None = None
) -> dict[str, Any]:
    obs: dict[str, Any] = {
        "ok": False, "links": [], "landed": [], "texts": {}, "errors": {}, "tools": [], "relisted": [],
        "asked_by": [], "completed": [],
    }

    async def open_link(link: str) -> None:
        obs["links"].append(link)
        log(f"browser opens {link}")
        status, final, body = await asyncio.to_thread(visit, link, login)
        obs["landed"].append(f"{status} {final}")
        log(f"browser landed on {final}: HTTP {status}")
        if status >= 300:
            raise RuntimeError(f"sign-in page {final} answered HTTP {status}: {body[:500]}")

    async def on_elicit(_ctx: Any, params: Any) -> types.ElicitResult:
        if getattr(params, "mode", None) == "url":
            log(f"URL elicitation: {getattr(params, 'message', '')}")
            obs["asked_by"].append("elicitation")
            await open_link(params.url)
            return types.ElicitResult(action="accept")
        schema = getattr(params, "requested_schema", None) or {}
        content = {k: v["default"] for k, v in schema.get("properties", {}).items() if "default" in v}
        return types.ElicitResult(action="accept", content=content)

    async def on_message(message: Any) -> None:
        params = getattr(message, "params", None)
        if getattr(message, "method", None) == "notifications/elicitation/complete" and params is not None:
            log(f"elicitation complete: {params.elicitation_id}")
            obs["completed"].append(params.elicitation_id)

    async def list_all(client: Client) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def call(client: Client, name: str, args: dict[str, Any]) -> tuple[bool, str]:
        """Call `name`, signing in whenever asked; (answered without isError, text or why)."""
        visited: set[str] = set()
        for _ in range(SIGN_IN_ROUNDS + 1):
            try:
                result = await asyncio.wait_for(client.call_tool(name, args), CALL_TIMEOUT_S)
            except Exception as exc:  # a JSON-RPC error or a timeout
                links = error_links(exc)
                if not links:
                    return False, f"{type(exc).__name__}: {exc}"
                log(f"{name}: error -32042, {len(links)} link(s)")
                obs["asked_by"].append("error")
                for link in links:
                    await open_link(link)
                continue
            text = text_of(result)
            if not result.is_error:
                return True, text
            links = [link for link in LINK.findall(text) if link not in visited]
            if not links or is_authorize(name) and obs["links"]:
                return False, f"isError: {text}"
            log(f"{name}: isError with a link: {text}")
            obs["asked_by"].append("result")
            for link in links:
                visited.add(link)
                await open_link(link)
        return False, f"still asked to sign in after {SIGN_IN_ROUNDS} sign-ins"

    async def authorize_listed(client: Client, tools: list[types.Tool]) -> list[types.Tool]:
        """Call every authorize tool listed, then wait for the real tools; the tools listed."""
        gates = [t for t in tools if is_authorize(t.name)]
        for gate in gates:
            obs["authorize_tool"] = gate.name
            ok, text = await call(client, gate.name, arguments_for(gate))
            obs["texts"][gate.name] = text
            log(f"{gate.name} -> ok={ok}: {text}")
        if gates:
            for _ in range(RELIST_ROUNDS):
                tools = await list_all(client)
                if not any(is_authorize(t.name) for t in tools):
                    break
                await asyncio.sleep(0.1)
        return tools

    # The host's own credential at mcpmux (its [auth]), never the upstream's.
    target: Any = url
    if bearer:
        headers = {"Authorization": f"Bearer {bearer}"}
        target = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
    async with Client(
        target, mode=mode, cache=None, elicitation_callback=on_elicit, message_handler=on_message
    ) as client:
        tools = await list_all(client)
        for _ in range(RELIST_ROUNDS):  # a gateway just started may not list its upstream yet
            if tools:
                break
            await asyncio.sleep(0.1)
            tools = await list_all(client)
        log(f"tools before sign-in: {[t.name for t in tools]}")
        tools = await authorize_listed(client, tools)
        obs["tools"] = [t.name for t in tools]
        log(f"tools: {obs['tools']}")
        wanted = calls or [(t.name, arguments_for(t)) for t in tools if not is_authorize(t.name)]
        for name, args in wanted:
            ok, text = await call(client, name, args)
            if not ok:
                # A refused call may have put the upstream back behind its authorize tool (more
                # scope, a grant gone): the person signs in as the list now asks, and retries once.
                again = await list_all(client)
                for _ in range(AFTER_FAILURE_ROUNDS):  # the gateway may flip its list just after
                    if any(is_authorize(t.name) for t in again):
                        break
                    await asyncio.sleep(0.1)
                    again = await list_all(client)
                if any(is_authorize(t.name) for t in again):
                    log(f"{name} failed ({text[:200]}); the authorize tool is listed again")
                    obs["relisted"].append(name)
                    await authorize_listed(client, again)
                    ok, text = await call(client, name, args)
            (obs["texts"] if ok else obs["errors"])[name] = text
            log(f"{name}({args}) -> ok={ok}: {text[:300]}")
        obs["ok"] = bool(wanted) and not obs["errors"]
    return obs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("calls", nargs="*", help="TOOL JSON pairs")
    ap.add_argument("--mode", default="legacy", help="the SDK's connect mode: legacy or 2026-07-28")
    ap.add_argument("--login", default="alice", help="who signs in at the authorization server")
    ap.add_argument("--bearer", help="the host's own bearer token at mcpmux (an API key of its [auth])")
    opts = ap.parse_intermixed_args()
    if len(opts.calls) % 2:
        ap.error("calls come as TOOL JSON pairs")
    calls = [(opts.calls[i], json.loads(opts.calls[i + 1])) for i in range(0, len(opts.calls), 2)]
    log = logger("auth-host")
    try:
        obs = asyncio.run(run(opts.url, opts.mode, opts.login, calls, log, opts.bearer))
    except BaseException as exc:  # noqa: BLE001 - report whatever stopped the host
        traceback.print_exc()
        obs = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(obs), flush=True)
    return 0 if obs.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
