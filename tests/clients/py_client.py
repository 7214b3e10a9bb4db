#!/usr/bin/env python3
"""MCP test client built on the Python SDK (mcp 2.3.0), used by mcpmux's integration tests.

Usage:
    python py_client.py URL SCENARIO [ARGS...] [--mode legacy|auto] [--transport http|sse] [--prefix PREFIX] [--timeout SECS] [--no-roots] [--resource-prefix P]

--mode defaults to "auto" (the SDK default: probe server/discover, fall back to initialize).
--transport sse connects with the SDK's legacy HTTP+SSE client (`mcp.client.sse.sse_client`): URL is
           then the SSE endpoint (e.g. http://127.0.0.1:8080/sse). Default: Streamable HTTP.
--resource-prefix P (everything only): read the first listed resource whose URI starts with P
           (default: the first one listed).
--cancel-prefix P (everything only): also a cancellation round trip through the in-repo test server
           exposed with prefix P: P+"slow" {"ms": 30000} is cancelled by the client after 0.5 s,
           the cancellation must reach the upstream (P+"cancellations" lists one more id), then
           P+"echo" must answer.
--no-roots (everything only): still call get-roots-list, but do not require the roots round trip
           (a shared upstream caches roots per its own session, so behind a gateway with shared
           isolation they come back empty).

Scenarios:
    smoke          list tools (all pages), call {PREFIX}echo {"message": "hi"}
    everything     sampling / elicitation / roots / progress / prompts / resources / logging
                   against server-everything (directly, or behind the gateway with --prefix everything__)
    concurrent N   N concurrent sessions, 20 echo calls each with per-session unique messages
    soak N         N sessions (--mode legacy or 2026-07-28) calling in a loop until --stop-file appears or
                   --duration passes: echoes and, every third call, {PREFIX}trigger-long-running-operation
                   running --long-secs with progress. When --park-file appears, each session makes one
                   call of --park-secs; once every session has seen its first progress, --parked-file is
                   written (every session then has exactly that one call in flight). Each call is bounded
                   by --call-timeout (a call that takes longer is a failure "hang"). Observed: per
                   session its calls ok/failed, how many `initialize` it sent and the session ids it
                   used (the session era), and when (Unix seconds) it got tools/list_changed; every
                   failure with its start and end (Unix seconds) and error. Failures are data: the
                   scenario itself fails only when it cannot run.
    call TOOL JSON [TOOL JSON ...]
                   list tools (all pages), then call each TOOL (full exposed name, --prefix is not
                   applied) with the JSON object as arguments; every call must succeed. Observed:
                   "tools" and "calls": [{"tool", "text"}] in order.
    shaped TOOL JSON [UNKNOWN ...]
                   list tools (all pages, with descriptions), prompts, resources and templates;
                   call TOOL (full exposed name) with the JSON arguments (must succeed); call each
                   UNKNOWN tool and read each UNKNOWN `mcpmux://` URI (each must fail). Observed:
                   "tools": [{"name", "description"}], "prompts", "resources", "templates",
                   "text" (TOOL's) and "refusals": {UNKNOWN: {"code", "message"}}.
    resubscribe URI RESOURCE MARKER
                   against the test server behind mcpmux (--mode legacy --prefix t__): subscribe to
                   URI (as mcpmux exposes it), set the log level to warning, write the file MARKER
                   (the test then moves the session to another replica, breaking every connection),
                   then call {PREFIX}touch {"uri": RESOURCE} until a resources/updated for URI
                   arrives (the GET stream came back and the subscription was re-made), then
                   {PREFIX}log at info and at error: only the error messages may arrive.
    meta HIDDEN      a profile that discovers by search (--prefix everything__, --cancel-prefix P): list
                   tools ONCE (only mcpmux__search_tools, mcpmux__describe_tool, mcpmux__call_tool may
                   be listed), then work only through them: search "add two numbers together" (PREFIX
                   get-sum must be found), describe it, call it; search for and call PREFIX
                   trigger-long-running-operation with progress (>= 3 notifications) and PREFIX
                   trigger-sampling-request (the sampling callback answers); cancel P+"slow" after
                   0.5 s (the upstream must see it); HIDDEN (a tool the profile leaves out) must be
                   neither found, described nor called. Observed: "tools", "found", "progress",
                   "sampled", "hidden".
    reload MARKER NEW_TOOL
                   list tools (NEW_TOOL must not be listed), listen for tools/list_changed (the
                   SDK's listen at 2026-07-28, the session's stream before), create the file
                   MARKER, wait for one list_changed and 2 s more; then NEW_TOOL must be listed and
                   answer {"message": "sdk"}, on the same connection. Observed: "list_changed"
                   (how many; must be 1), "tools_after", "text".

Environment: MCPMUX_TEST_BEARER=TOKEN sends `Authorization: Bearer TOKEN` on every request;
MCPMUX_TEST_HEADERS='{"Name": "value"}' those headers on every request;
MCPMUX_TEST_TRACEPARENT=TP a `traceparent: TP` header on every request; MCPMUX_TEST_META_TRACEPARENT=TP
puts `traceparent: TP` in the `_meta` of every tool call (the SDK's `meta` argument).

Human-readable progress goes to stderr. stdout carries exactly ONE line: a JSON object with
"ok", "scenario", "error" (on failure) and what was observed. Exit 0 on success, 1 on a failed
check, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import traceback
import uuid
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, MCPDeprecationWarning
from mcp.shared.exceptions import MCPError
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

# Roots, logging and sampling are deprecated at 2026-07-28; the tests still exercise them on purpose.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

SAMPLED_TEXT = "sampled-by-python"
ROOT_URI = "file:///tmp/mcpmux-test"
ELICIT_NAME = "mcpmux-py-elicit"


class CheckFailed(Exception):
    pass


TRANSPORT = "http"
SOAK: Any = None


HTTP_VERSIONS: set[str] = set()


def tls_client(headers: dict[str, str]) -> Any:
    """An httpx2 client for an https:// gateway: trusting the CA file MCPMUX_TEST_CA (only),
    presenting MCPMUX_TEST_CLIENT_CERT / MCPMUX_TEST_CLIENT_KEY when set, HTTP/2 by ALPN when
    MCPMUX_TEST_HTTP2=1. The HTTP version of every response is recorded (`http_versions`)."""
    import ssl
    import httpx2

    context = ssl.create_default_context(cafile=os.environ["MCPMUX_TEST_CA"])
    if os.environ.get("MCPMUX_TEST_CLIENT_CERT"):
        context.load_cert_chain(os.environ["MCPMUX_TEST_CLIENT_CERT"], os.environ["MCPMUX_TEST_CLIENT_KEY"])

    async def record(response: Any) -> None:
        HTTP_VERSIONS.add(response.http_version)

    return httpx2.AsyncClient(
        headers=headers,
        verify=context,
        http2=os.environ.get("MCPMUX_TEST_HTTP2") == "1",
        timeout=httpx2.Timeout(30, read=300),
        event_hooks={"response": [record]},
    )


def server(url: str) -> Any:
    """What Client connects to: the URL (Streamable HTTP) or a legacy SSE transport for it. With
    MCPMUX_TEST_BEARER set, every request carries `Authorization: Bearer <it>`; with
    MCPMUX_TEST_TRACEPARENT set, a W3C `traceparent: <it>` header; with MCPMUX_TEST_CA set, TLS
    as `tls_client` says."""
    headers = {}
    bearer = os.environ.get("MCPMUX_TEST_BEARER")
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    traceparent = os.environ.get("MCPMUX_TEST_TRACEPARENT")
    if traceparent:
        headers["traceparent"] = traceparent
    headers.update(json.loads(os.environ.get("MCPMUX_TEST_HEADERS") or "{}"))
    if os.environ.get("MCPMUX_TEST_CA"):
        return streamable_http_client(url, http_client=tls_client(headers))
    if headers:
        if TRANSPORT == "sse":
            return sse_client(url, headers=headers)
        return streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
    return sse_client(url) if TRANSPORT == "sse" else url


def log(msg: str) -> None:
    print(f"[py_client] {msg}", file=sys.stderr, flush=True)


def check(cond: Any, msg: str) -> None:
    if not cond:
        raise CheckFailed(msg)


def text_of(result: Any) -> str:
    """Concatenate the text blocks of a CallToolResult / prompt message list."""
    parts = []
    for block in getattr(result, "content", None) or []:
        if getattr(block, "type", None) == "text":
            parts.append(block.text)
    return "\n".join(parts)


async def list_all_tools(client: Client) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools
    raise CheckFailed("tools/list: more than 100 pages (nextCursor never ends)")


async def list_all_prompts(client: Client) -> list[Any]:
    out: list[Any] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_prompts(cursor=cursor)
        out.extend(page.prompts)
        cursor = page.next_cursor
        if not cursor:
            return out
    raise CheckFailed("prompts/list: more than 100 pages")


async def list_all_resources(client: Client) -> list[Any]:
    out: list[Any] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_resources(cursor=cursor)
        out.extend(page.resources)
        cursor = page.next_cursor
        if not cursor:
            return out
    raise CheckFailed("resources/list: more than 100 pages")


def call_meta() -> dict[str, Any] | None:
    """The `_meta` every tool call carries: `traceparent` from MCPMUX_TEST_META_TRACEPARENT."""
    traceparent = os.environ.get("MCPMUX_TEST_META_TRACEPARENT")
    return {"traceparent": traceparent} if traceparent else None


async def call_ok(client: Client, name: str, args: dict[str, Any], **kw: Any) -> Any:
    if "meta" not in kw and call_meta():
        kw["meta"] = call_meta()
    result = await client.call_tool(name, args, **kw)
    check(not result.is_error, f"tools/call {name} returned isError: {text_of(result)[:500]}")
    return result


def conn_info(client: Client) -> dict[str, Any]:
    info = client.server_info
    return {
        "protocol_version": client.protocol_version,
        "server_name": info.name if info else None,
    }


# ---------------------------------------------------------------- scenarios


async def scenario_smoke(url: str, mode: str, prefix: str, _args: list[str], obs: dict[str, Any]) -> None:
    async with Client(server(url), mode=mode, cache=None) as client:
        obs.update(conn_info(client))
        tools = await list_all_tools(client)
        names = [t.name for t in tools]
        log(f"{len(names)} tools: {', '.join(names)}")
        obs["tools"] = names
        echo = f"{prefix}echo"
        check(echo in names, f"tool {echo!r} not listed; got {names}")
        result = await call_ok(client, echo, {"message": "hi"})
        text = text_of(result)
        obs["echo_text"] = text
        check("hi" in text, f"{echo} reply does not contain 'hi': {text!r}")


def _value_for(name: str, schema: dict[str, Any]) -> Any:
    """A value that satisfies one (flat) elicitation property schema."""
    if "default" in schema:
        return schema["default"]
    typ = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if "oneOf" in schema:
        return schema["oneOf"][0]["const"]
    if typ == "array":
        items = schema.get("items", {})
        if "enum" in items:
            return [items["enum"][0]]
        if "anyOf" in items:
            return [items["anyOf"][0]["const"]]
        return []
    if typ == "boolean":
        return True
    if typ == "integer":
        return int(schema.get("minimum", 1))
    if typ == "number":
        return float(schema.get("minimum", 1))
    fmt = schema.get("format")
    if fmt == "email":
        return "tester@example.com"
    if fmt == "uri":
        return "https://example.com/"
    if fmt == "date":
        return "2000-01-01"
    if fmt == "date-time":
        return "2000-01-01T00:00:00Z"
    if name == "name":
        return ELICIT_NAME
    return f"value-{name}"


async def scenario_everything(url: str, mode: str, prefix: str, _args: list[str], obs: dict[str, Any]) -> None:
    seen: dict[str, Any] = {"sampling": 0, "elicitation": 0, "roots": 0, "logs": []}

    async def on_sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        seen["sampling"] += 1
        seen["sampling_prompt"] = str(params.messages[0].content.text if params.messages else "")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=SAMPLED_TEXT),
            model="mcpmux-test-model",
            stop_reason="endTurn",
        )

    async def on_elicit(ctx: Any, params: Any) -> types.ElicitResult:
        seen["elicitation"] += 1
        schema = getattr(params, "requested_schema", None) or {}
        props = schema.get("properties", {})
        content = {k: _value_for(k, v) for k, v in props.items()}
        seen["elicitation_fields"] = sorted(props)
        return types.ElicitResult(action="accept", content=content)

    async def on_roots(ctx: Any) -> types.ListRootsResult:
        seen["roots"] += 1
        return types.ListRootsResult(roots=[types.Root(uri=ROOT_URI, name="mcpmux-test")])

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        seen["logs"].append({"level": params.level, "data": params.data if isinstance(params.data, str) else json.dumps(params.data)})

    modern = mode not in ("legacy", "auto")
    async with Client(
        server(url),
        mode=mode,
        cache=None,
        # 2026-07-28 has no logging/setLevel: the level travels with every request.
        **({"log_level": "debug"} if modern else {}),
        sampling_callback=on_sampling,
        elicitation_callback=on_elicit,
        list_roots_callback=on_roots,
        logging_callback=on_log,
    ) as client:
        obs.update(conn_info(client))

        # Conditional tools are registered after notifications/initialized: poll briefly.
        required = [f"{prefix}{n}" for n in (
            "echo", "get-sum", "trigger-long-running-operation",
            "trigger-sampling-request", "trigger-elicitation-request", "get-roots-list")]
        names: list[str] = []
        deadline = time.monotonic() + 5
        while True:
            names = [t.name for t in await list_all_tools(client)]
            missing = [n for n in required if n not in names]
            if not missing or time.monotonic() > deadline:
                break
            await anyio.sleep(0.2)
        obs["tools_count"] = len(names)
        obs["tools"] = names
        check(not missing, f"tools missing from tools/list: {missing}; got {names}")

        # logging/setLevel (session era) or the per-request level (2026-07-28)
        if client.protocol_version != "2026-07-28":
            await client.set_logging_level("debug")
        obs["set_level"] = "ok"

        # sampling round trip
        r = await call_ok(client, f"{prefix}trigger-sampling-request", {"prompt": "say something", "maxTokens": 20})
        t = text_of(r)
        obs["sampling_calls"] = seen["sampling"]
        obs["sampling_result_has_text"] = SAMPLED_TEXT in t
        check(seen["sampling"] >= 1, "sampling callback was never called")
        check(SAMPLED_TEXT in t, f"sampled text not in tool result: {t[:400]!r}")

        # elicitation round trip
        r = await call_ok(client, f"{prefix}trigger-elicitation-request", {})
        t = text_of(r)
        obs["elicitation_calls"] = seen["elicitation"]
        obs["elicitation_accepted"] = "User provided the requested information" in t and ELICIT_NAME in t
        check(seen["elicitation"] >= 1, "elicitation callback was never called")
        check(obs["elicitation_accepted"], f"elicitation result does not show accepted content: {t[:400]!r}")

        # roots
        r = await call_ok(client, f"{prefix}get-roots-list", {})
        t = text_of(r)
        obs["roots_calls"] = seen["roots"]
        obs["roots_listed"] = ROOT_URI in t
        if obs.get("no_roots"):
            log(f"--no-roots: roots round trip not required (callback calls: {seen['roots']})")
        else:
            check(seen["roots"] >= 1, "roots callback was never called")
            check(ROOT_URI in t, f"root uri not in get-roots-list result: {t[:400]!r}")

        # progress
        progress: list[list[Any]] = []

        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            progress.append([p, total])

        t0 = time.monotonic()
        r = await call_ok(
            client, f"{prefix}trigger-long-running-operation", {"duration": 1, "steps": 3},
            progress_callback=on_progress,
        )
        obs["long_running_ms"] = round((time.monotonic() - t0) * 1000)
        obs["progress"] = progress
        check(len(progress) >= 3, f"expected >=3 progress notifications, got {progress}")
        check("completed" in text_of(r), f"long-running op result unexpected: {text_of(r)!r}")

        # cancellation: a long call cancelled by the client reaches the upstream as cancelled
        if obs.get("cancel_prefix"):
            await cancel_round_trip(client, obs["cancel_prefix"], obs)

        # get-sum
        r = await call_ok(client, f"{prefix}get-sum", {"a": 2, "b": 40})
        obs["sum_text"] = text_of(r)
        check("42" in obs["sum_text"], f"get-sum result lacks 42: {obs['sum_text']!r}")

        # prompts
        prompts = [p.name for p in await list_all_prompts(client)]
        obs["prompts"] = prompts
        simple = f"{prefix}simple-prompt"
        check(simple in prompts, f"prompt {simple!r} not listed; got {prompts}")
        pr = await client.get_prompt(simple)
        check(len(pr.messages) >= 1, "simple-prompt returned no messages")
        first = pr.messages[0].content
        obs["prompt_text"] = getattr(first, "text", None)

        # resources
        resources = await list_all_resources(client)
        obs["resources_count"] = len(resources)
        check(resources, "resources/list returned nothing")
        wanted = obs.get("resource_prefix", "")
        matching = [str(r.uri) for r in resources if str(r.uri).startswith(wanted)]
        check(matching, f"no listed resource URI starts with {wanted!r}: {[str(r.uri) for r in resources]}")
        uri = matching[0]
        obs["resource_uri"] = uri
        rr = await client.read_resource(uri)
        check(len(rr.contents) >= 1, f"resources/read {uri} returned no contents")
        obs["resource_read_uri"] = str(rr.contents[0].uri)
        body = getattr(rr.contents[0], "text", None)
        obs["resource_text_len"] = len(body) if body is not None else None

        # Let any late log notifications arrive (e.g. roots-updated log) before closing.
        await anyio.sleep(0.2)
        obs["logs"] = seen["logs"]


async def cancellations(client: Client, prefix: str) -> list[Any]:
    """The request ids the test server saw cancelled (one list per upstream connection)."""
    return json.loads(text_of(await call_ok(client, f"{prefix}cancellations", {})))


async def cancel_round_trip(client: Client, prefix: str, obs: dict[str, Any]) -> None:
    """Cancel a 30 s call after 0.5 s; the upstream must see the cancellation, then a call works."""
    before = len(await cancellations(client, prefix))
    t0 = time.monotonic()
    with anyio.move_on_after(0.5):
        await client.call_tool(f"{prefix}slow", {"ms": 30000})
        raise CheckFailed(f"{prefix}slow answered before it was cancelled")
    seen = before
    deadline = time.monotonic() + 10
    while seen <= before and time.monotonic() < deadline:
        await anyio.sleep(0.2)
        seen = len(await cancellations(client, prefix))
    obs["cancel_reached_upstream"] = seen > before
    obs["cancel_ms"] = round((time.monotonic() - t0) * 1000)
    check(seen > before, f"the cancellation did not reach the upstream within 10 s ({before} -> {seen})")
    r = await call_ok(client, f"{prefix}echo", {"message": "after cancel"})
    obs["after_cancel_text"] = text_of(r)
    check("after cancel" in obs["after_cancel_text"], f"call after the cancellation: {obs['after_cancel_text']!r}")


class SessionTrace:
    """What one soak session sent, from its HTTP client's request hook: `initialize` requests and
    the `Mcp-Session-Id` values it carried."""

    def __init__(self) -> None:
        self.initializes = 0
        self.session_ids: set[str] = set()

    async def on_request(self, request: Any) -> None:
        sid = request.headers.get("mcp-session-id")
        if sid:
            self.session_ids.add(sid)
        if request.method == "POST" and b'"initialize"' in (request.content or b""):
            try:
                body = json.loads(request.content)
            except ValueError:
                return
            for msg in body if isinstance(body, list) else [body]:
                if isinstance(msg, dict) and msg.get("method") == "initialize":
                    self.initializes += 1


async def scenario_soak(url: str, mode: str, prefix: str, args: list[str], obs: dict[str, Any]) -> None:
    check(len(args) == 1 and args[0].isdigit() and int(args[0]) > 0, "usage: soak N (N > 0)")
    n = int(args[0])
    o = SOAK
    check(o.stop_file or o.duration, "soak needs --stop-file or --duration")
    echo, long_tool = f"{prefix}echo", f"{prefix}trigger-long-running-operation"
    t_end = time.monotonic() + o.duration if o.duration else None
    failures: list[dict[str, Any]] = []
    parked: set[int] = set()

    def stopping() -> bool:
        return (t_end is not None and time.monotonic() > t_end) or bool(
            o.stop_file and os.path.exists(o.stop_file))

    async def one_call(client: Client, i: int, k: int, tool: str, args: dict[str, Any], expect: str,
                       on_progress: Any = None) -> bool:
        started = time.time()
        try:
            with anyio.fail_after(o.call_timeout):
                r = await client.call_tool(tool, args, progress_callback=on_progress)
            t = text_of(r)
            if r.is_error or expect not in t:
                raise CheckFailed(f"unexpected answer: {t[:300]!r}")
            return True
        except TimeoutError:
            error = f"hang: no answer within {o.call_timeout} s"
        except Exception as exc:  # noqa: BLE001 - every failure is data
            error = describe(exc)
        failures.append({"session": i, "call": k, "tool": tool, "started": started,
                         "ended": time.time(), "error": error})
        log(f"session {i} call {k} ({tool}) failed: {error}")
        return False

    async def session(i: int) -> dict[str, Any]:
        trace = SessionTrace()
        changed: list[float] = []

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                changed.append(time.time())

        http = create_mcp_http_client()
        http.event_hooks = {"request": [trace.on_request], "response": []}
        ok = failed = 0
        async with http, Client(streamable_http_client(url, http_client=http), mode=mode, cache=None,
                                message_handler=on_message) as client:
            version = client.protocol_version
            k = 0
            while not stopping():
                k += 1
                if o.park_file and i not in parked and os.path.exists(o.park_file):
                    async def first_progress(p: float, total: float | None, message: str | None) -> None:
                        if i not in parked:
                            parked.add(i)
                            if len(parked) == n and o.parked_file:
                                with open(o.parked_file, "w") as f:
                                    json.dump({"parked": n, "at": time.time()}, f)
                    secs = o.park_secs
                    done = await one_call(client, i, k, long_tool, {"duration": secs, "steps": secs},
                                          "completed", first_progress)
                    parked.add(i)  # also when it failed before its first progress
                elif k % 3 == 0:
                    secs = o.long_secs
                    done = await one_call(client, i, k, long_tool, {"duration": secs, "steps": secs},
                                          "completed")
                else:
                    msg = f"py-{i}-{k}"
                    done = await one_call(client, i, k, echo, {"message": msg}, f"Echo: {msg}")
                ok, failed = ok + done, failed + (not done)
                await anyio.sleep(0.05)
        return {"session": i, "ok": ok, "failed": failed, "initializes": trace.initializes,
                "session_ids": len(trace.session_ids), "list_changed_at": changed,
                "protocol_version": version}

    results: list[dict[str, Any]] = [{} for _ in range(n)]

    async def run(i: int) -> None:
        results[i] = await session(i)

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(run, i)
    obs["sessions"] = results
    obs["ok_calls"] = sum(r["ok"] for r in results)
    obs["failed_calls"] = sum(r["failed"] for r in results)
    obs["failures"] = failures
    obs["protocol_version"] = results[0]["protocol_version"] if results else None


async def scenario_concurrent(url: str, mode: str, prefix: str, args: list[str], obs: dict[str, Any]) -> None:
    check(len(args) == 1 and args[0].isdigit() and int(args[0]) > 0, "usage: concurrent N (N > 0)")
    n = int(args[0])
    calls = 20
    echo = f"{prefix}echo"
    run_id = uuid.uuid4().hex[:8]

    async def one(i: int) -> dict[str, Any]:
        ok = 0
        async with Client(server(url), mode=mode, cache=None) as client:
            for j in range(calls):
                msg = f"py-{run_id}-s{i}-c{j}"
                r = await client.call_tool(echo, {"message": msg})
                t = text_of(r)
                check(not r.is_error, f"session {i} call {j}: isError: {t!r}")
                check(t == f"Echo: {msg}" or (msg in t and all(
                    f"-s{k}-" not in t for k in range(n) if k != i)),
                    f"session {i} call {j}: reply {t!r} does not match its message {msg!r}")
                ok += 1
            return {"session": i, "ok": ok, "protocol_version": client.protocol_version}

    t0 = time.monotonic()
    results = await asyncio.gather(*(one(i) for i in range(n)))
    obs["sessions"] = n
    obs["calls_per_session"] = calls
    obs["ok_calls"] = sum(r["ok"] for r in results)
    obs["elapsed_ms"] = round((time.monotonic() - t0) * 1000)
    obs["protocol_version"] = results[0]["protocol_version"] if results else None
    check(obs["ok_calls"] == n * calls, f"only {obs['ok_calls']} of {n * calls} calls succeeded")


async def scenario_call(url: str, mode: str, _prefix: str, args: list[str], obs: dict[str, Any]) -> None:
    check(args and len(args) % 2 == 0, "usage: call TOOL JSON [TOOL JSON ...]")
    calls: list[tuple[str, dict[str, Any]]] = []
    for name, raw in zip(args[0::2], args[1::2]):
        try:
            arguments = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise CheckFailed(f"call {name}: arguments are not JSON: {exc}") from exc
        check(isinstance(arguments, dict), f"call {name}: arguments must be a JSON object")
        calls.append((name, arguments))
    async with Client(server(url), mode=mode, cache=None) as client:
        obs.update(conn_info(client))
        names = [t.name for t in await list_all_tools(client)]
        obs["tools"] = names
        obs["calls"] = []
        for name, arguments in calls:
            check(name in names, f"tool {name!r} not listed; got {names}")
            text = text_of(await call_ok(client, name, arguments))
            log(f"{name} -> {text[:200]!r}")
            obs["calls"].append({"tool": name, "text": text})


META_TOOLS = ["mcpmux__call_tool", "mcpmux__describe_tool", "mcpmux__search_tools"]


async def meta_search(client: Client, query: str) -> list[str]:
    """The names mcpmux__search_tools finds for QUERY (its structured result)."""
    r = await call_ok(client, "mcpmux__search_tools", {"query": query, "limit": 5})
    found = (r.structured_content or {}).get("tools", [])
    check(json.loads(text_of(r)) == r.structured_content, "the text is not the structured result")
    return [t["name"] for t in found]


async def meta_call(client: Client, name: str, arguments: dict[str, Any], **kw: Any) -> Any:
    return await call_ok(client, "mcpmux__call_tool", {"name": name, "arguments": arguments}, **kw)


async def scenario_meta(url: str, mode: str, prefix: str, args: list[str], obs: dict[str, Any]) -> None:
    check(len(args) == 1, "usage: meta HIDDEN")
    hidden = args[0]
    sampled: list[str] = []

    async def on_sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        sampled.append(str(params.messages[0].content.text if params.messages else ""))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=SAMPLED_TEXT),
            model="mcpmux-test-model",
            stop_reason="endTurn",
        )

    async with Client(server(url), mode=mode, cache=None, sampling_callback=on_sampling) as client:
        obs.update(conn_info(client))
        # The one list of the session: the meta-tools and nothing else.
        listed = sorted(t.name for t in await list_all_tools(client))
        obs["tools"] = listed
        check(listed == META_TOOLS, f"the profile lists {listed}, not only the meta-tools")
        found: dict[str, list[str]] = {}
        get_sum = f"{prefix}get-sum"
        found["sum"] = await meta_search(client, "add two numbers together")
        check(get_sum in found["sum"], f"{get_sum} not found: {found['sum']}")
        r = await call_ok(client, "mcpmux__describe_tool", {"name": get_sum})
        tool = (r.structured_content or {}).get("tool", {})
        check(tool.get("name") == get_sum and "inputSchema" in tool, f"describe: {tool}")
        obs["sum"] = text_of(await meta_call(client, get_sum, {"a": 2, "b": 40}))
        check("42" in obs["sum"], f"get-sum through mcpmux__call_tool: {obs['sum']!r}")
        # A long call with progress, through the meta-tool.
        long_op = f"{prefix}trigger-long-running-operation"
        found["long"] = await meta_search(client, "long running operation that reports progress")
        check(long_op in found["long"], f"{long_op} not found: {found['long']}")
        progress: list[list[Any]] = []

        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            progress.append([p, total])

        r = await meta_call(client, long_op, {"duration": 1, "steps": 3}, progress_callback=on_progress)
        obs["progress"] = progress
        check(len(progress) >= 3, f"expected >=3 progress notifications, got {progress}")
        check("completed" in text_of(r), f"long-running op result unexpected: {text_of(r)!r}")
        # A server-to-client request (sampling) within a call through the meta-tool.
        sampling = f"{prefix}trigger-sampling-request"
        found["sampling"] = await meta_search(client, "ask the client LLM to sample a message")
        check(sampling in found["sampling"], f"{sampling} not found: {found['sampling']}")
        r = await meta_call(client, sampling, {"prompt": "through the meta-tool", "maxTokens": 20})
        obs["sampled"] = sampled
        check(sampled and SAMPLED_TEXT in text_of(r), f"sampling: {sampled} {text_of(r)[:300]!r}")
        # Cancellation of a call through the meta-tool reaches the upstream.
        cancel = obs.get("cancel_prefix")
        if cancel:
            def seen_ids(r: Any) -> int:
                return len(json.loads(text_of(r)))
            before = seen_ids(await meta_call(client, f"{cancel}cancellations", {}))
            with anyio.move_on_after(0.5):
                await meta_call(client, f"{cancel}slow", {"ms": 30000})
                raise CheckFailed("slow answered before it was cancelled")
            seen, deadline = before, time.monotonic() + 10
            while seen <= before and time.monotonic() < deadline:
                await anyio.sleep(0.2)
                seen = seen_ids(await meta_call(client, f"{cancel}cancellations", {}))
            obs["cancel_reached_upstream"] = seen > before
            check(seen > before, f"the cancellation did not reach the upstream ({before} -> {seen})")
        # A tool the profile leaves out is neither found, described nor called.
        every = await call_ok(client, "mcpmux__search_tools", {"query": hidden.split("__")[-1], "limit": 50})
        names = [t["name"] for t in (every.structured_content or {}).get("tools", [])]
        described = await client.call_tool("mcpmux__describe_tool", {"name": hidden})
        refused: Any = None
        try:
            result = await client.call_tool("mcpmux__call_tool", {"name": hidden, "arguments": {}})
            refused = {"isError": result.is_error, "text": text_of(result)}
        except MCPError as exc:
            refused = {"code": exc.code, "message": exc.message}
        obs["hidden"] = {"found": hidden in names, "described": not described.is_error, "called": refused}
        check(hidden not in names, f"{hidden} was found: {names}")
        check(described.is_error, f"{hidden} was described: {text_of(described)[:200]!r}")
        check(refused.get("code") == -32602, f"{hidden} was not refused as unknown: {refused}")
        obs["found"] = found


async def scenario_shaped(url: str, mode: str, _prefix: str, args: list[str], obs: dict[str, Any]) -> None:
    check(len(args) >= 2, "usage: shaped TOOL JSON [UNKNOWN ...]")
    tool, arguments, unknown = args[0], json.loads(args[1]), args[2:]
    async with Client(server(url), mode=mode, cache=None) as client:
        obs.update(conn_info(client))
        obs["tools"] = [{"name": t.name, "description": t.description} for t in await list_all_tools(client)]
        obs["prompts"] = [p.name for p in await list_all_prompts(client)]
        obs["resources"] = [str(r.uri) for r in await list_all_resources(client)]
        templates = await client.list_resource_templates()
        obs["templates"] = [t.uri_template for t in templates.resource_templates]
        obs["text"] = text_of(await call_ok(client, tool, arguments))
        obs["refusals"] = {}
        for name in unknown:
            try:
                if name.startswith("mcpmux://"):
                    await client.read_resource(name)
                else:
                    result = await client.call_tool(name, {}, meta=call_meta())
                    check(result.is_error, f"{name}: answered {text_of(result)[:200]!r}")
                    obs["refusals"][name] = {"code": None, "message": text_of(result)}
                    continue
            except MCPError as exc:
                obs["refusals"][name] = {"code": exc.code, "message": exc.message}
                continue
            raise CheckFailed(f"{name}: read succeeded")


async def scenario_resubscribe(url: str, mode: str, prefix: str, args: list[str], obs: dict[str, Any]) -> None:
    check(len(args) == 3, "usage: resubscribe URI RESOURCE MARKER")
    uri, resource, marker = args
    seen: dict[str, Any] = {"updated": 0, "logs": []}

    async def on_message(message: Any) -> None:
        message = getattr(message, "root", message)
        if isinstance(message, types.ResourceUpdatedNotification) and str(message.params.uri) == uri:
            seen["updated"] += 1

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        seen["logs"].append(params.level)

    async with Client(server(url), mode=mode, cache=None, message_handler=on_message, logging_callback=on_log) as client:
        obs.update(conn_info(client))
        await client.subscribe_resource(uri)
        await client.set_logging_level("warning")
        # The changes reach the GET stream as fresh event ids (priming events) right away.
        await anyio.sleep(1)
        with open(marker, "w", encoding="utf-8") as f:
            f.write("subscribed\n")
        touches = 0
        deadline = time.monotonic() + 45
        while seen["updated"] == 0:
            check(time.monotonic() < deadline, f"no resources/updated after {touches} touches")
            await anyio.sleep(0.3)
            touches += 1
            try:
                await client.call_tool(f"{prefix}touch", {"uri": resource})
            except Exception as exc:  # noqa: BLE001 - a call cut by the move is retried
                log(f"touch {touches}: {describe(exc)}")
        obs["touches"] = touches
        await call_ok(client, f"{prefix}log", {"count": 2, "level": "info"})
        await call_ok(client, f"{prefix}log", {"count": 2, "level": "error"})
        obs["logs"] = seen["logs"]
        check(seen["logs"] == ["error", "error"], f"the log level did not come back: {seen['logs']}")


async def scenario_reload(url: str, mode: str, _prefix: str, args: list[str], obs: dict[str, Any]) -> None:
    check(len(args) == 2, "usage: reload MARKER NEW_TOOL")
    marker, new_tool = args
    # Told on the session's stream (session era) or on the listen stream (2026-07-28; the
    # message handler may see those too, so only the subscription's events count there).
    told: list[str] = []
    listened: list[str] = []
    seen = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            told.append("tools")
            seen.set()

    async with Client(server(url), mode=mode, message_handler=on_message, cache=None) as client:
        obs.update(conn_info(client))
        before = [t.name for t in await list_all_tools(client)]
        check(new_tool not in before, f"{new_tool} is listed before the reload")
        modern = client.protocol_version == "2026-07-28"
        if modern:
            async with client.listen(tools_list_changed=True) as sub:
                open(marker, "w").close()
                with anyio.fail_after(60):
                    listened.append(type(await sub.__anext__()).__name__)
                with anyio.move_on_after(2):
                    listened.append(type(await sub.__anext__()).__name__)
        else:
            open(marker, "w").close()
            with anyio.fail_after(60):
                await seen.wait()
            await anyio.sleep(2)
        changes = listened if modern else told
        obs["list_changed"] = len(changes)
        obs["events"] = changes
        after = [t.name for t in await list_all_tools(client)]
        obs["tools_after"] = after
        check(new_tool in after, f"{new_tool} is not listed after the reload: {after}")
        obs["text"] = text_of(await call_ok(client, new_tool, {"message": "sdk"}))
        check(len(changes) == 1, f"told {len(changes)} times that the tools changed")


SCENARIOS = {
    "smoke": scenario_smoke,
    "everything": scenario_everything,
    "concurrent": scenario_concurrent,
    "call": scenario_call,
    "shaped": scenario_shaped,
    "soak": scenario_soak,
    "resubscribe": scenario_resubscribe,
    "reload": scenario_reload,
    "meta": scenario_meta,
}


def describe(exc: BaseException) -> str:
    """Flatten exception groups (anyio task groups) into one readable message."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


def only_checks(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(only_checks(e) for e in exc.exceptions)
    return isinstance(exc, CheckFailed)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url")
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    ap.add_argument("args", nargs="*")
    ap.add_argument("--mode", default="auto", choices=["legacy", "auto", "2026-07-28"])
    ap.add_argument("--transport", default="http", choices=["http", "sse"])
    ap.add_argument("--prefix", default="")
    ap.add_argument("--timeout", type=float, default=90.0, help="overall deadline in seconds")
    ap.add_argument("--no-roots", action="store_true", help="everything: do not require the roots round trip")
    ap.add_argument("--resource-prefix", default="",
                    help="everything: read the first listed resource whose URI starts with this")
    ap.add_argument("--cancel-prefix", default="",
                    help="everything: cancellation round trip through the test server with this prefix")
    ap.add_argument("--stop-file", default="", help="soak: stop once this file exists")
    ap.add_argument("--duration", type=float, default=0.0, help="soak: stop after this many seconds")
    ap.add_argument("--park-file", default="", help="soak: once this file exists, one call of --park-secs")
    ap.add_argument("--parked-file", default="", help="soak: written once every session's park call runs")
    ap.add_argument("--long-secs", type=int, default=2, help="soak: duration of the long calls")
    ap.add_argument("--park-secs", type=int, default=12, help="soak: duration of the park call")
    ap.add_argument("--call-timeout", type=float, default=30.0, help="soak: a call taking longer hangs")
    opts = ap.parse_intermixed_args()
    global TRANSPORT, SOAK
    TRANSPORT = opts.transport
    SOAK = opts

    obs: dict[str, Any] = {"scenario": opts.scenario, "mode": opts.mode, "transport": opts.transport,
                           "prefix": opts.prefix, "client": "python-mcp-2.3.0"}
    if opts.no_roots:
        obs["no_roots"] = True
    if opts.resource_prefix:
        obs["resource_prefix"] = opts.resource_prefix
    if opts.cancel_prefix:
        obs["cancel_prefix"] = opts.cancel_prefix
    t0 = time.monotonic()

    async def run() -> None:
        with anyio.fail_after(opts.timeout):
            await SCENARIOS[opts.scenario](opts.url, opts.mode, opts.prefix, opts.args, obs)

    code = 0
    try:
        asyncio.run(run())
        obs["ok"] = True
    except BaseException as exc:  # noqa: BLE001 - report everything, including groups and timeouts
        if isinstance(exc, KeyboardInterrupt):
            raise
        code = 1
        obs["ok"] = False
        obs["error"] = "timeout" if isinstance(exc, TimeoutError) else describe(exc)
        log(f"FAILED: {obs['error']}")
        if not only_checks(exc):
            traceback.print_exc(file=sys.stderr)
    obs["total_ms"] = round((time.monotonic() - t0) * 1000)
    if HTTP_VERSIONS:
        obs["http_versions"] = sorted(HTTP_VERSIONS)
    print(json.dumps(obs, default=str), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
