"""mcpmux's second conformance target, on the Python SDK (PyPI `mcp` 2.3.0).

An MCP server, written for this project, that exposes exactly the names the official conformance suite
(@modelcontextprotocol/conformance 0.1.16, `server` side) calls -- the same as target_server.mjs, our TypeScript
target. It lets the suite run through mcpmux against a differently-built upstream (another SDK, with its own
transport and notification routing), as a stand-in for a held-out target.

Usage (python = target/peers/venv/bin/python):
    python py_target.py stdio        MCP over stdin/stdout (logs on stderr); exits on stdin EOF
    python py_target.py http PORT    Streamable HTTP at http://127.0.0.1:PORT/mcp (binds 127.0.0.1 only)

Built on the high-level `MCPServer` (the renamed FastMCP v1) and its `Context` (logging, progress, elicitation).
Where the high-level API cannot say what the suite checks:
  - logging/setLevel, resources/subscribe and /unsubscribe: MCPServer has no API for them; handlers go on the
    low-level server underneath (`app._lowlevel_server.add_request_handler`).
  - json_schema_2020_12_tool: MCPServer derives inputSchema from the signature (no `$schema`, `$defs` keys named
    after classes, no `additionalProperties: false`), so the Tool's advertised schema is replaced by the literal
    one and the Tool goes in through `MCPServer(tools=[...])`; arguments are still validated from the signature.
  - test_elicitation_sep1330_enums: `ctx.elicit` renders a pydantic model and rejects titled enums / `enumNames`,
    so the raw schema goes through `ctx.session.elicit_form`.
  - test_sampling: Context has no sampling helper; `ctx.session.create_message` is used.

HTTP mode: the SDK's own StreamableHTTP session manager (stateful sessions, SSE replies) with an in-memory event
store and `retry: 500`, so test_reconnection can be resumed (GET + Last-Event-ID), and the SDK's default
DNS-rebinding protection for a 127.0.0.1 bind (Host 127.0.0.1:* / localhost:* / [::1]:*). The SDK takes the
protocol version that decides priming events / stream closing from each request's MCP-Protocol-Version header,
so the suite's raw server-sse-polling request (which says 2025-03-26) gets neither: two WARNINGs, no failure.

Environment switches (HTTP mode), to imitate differently-configured servers:
    PY_TARGET_SCOPE=standalone   log/progress notifications and sampling/elicitation requests go on the session's
                                 standalone GET stream instead of the POST stream of the request they belong to
    PY_TARGET_JSON=1             POSTs are answered with application/json (no per-request SSE stream); combine
                                 with PY_TARGET_SCOPE=standalone, else those notifications and requests are lost
    PY_TARGET_STATELESS=1        the SDK's stateless mode (no session id, no GET stream, no server requests)
"""

import asyncio
import base64
import itertools
import json
import os
import sys
import warnings
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

import mcp.types as types
from mcp.server.elicitation import render_elicitation_schema
from mcp.server.mcpserver import Audio, Context, Image, MCPServer, UserMessage
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.streamable_http import EventMessage, EventStore
from mcp.shared.exceptions import MCPDeprecationWarning

# Logging and sampling are deprecated as of protocol 2026-07-28; the suite speaks 2025-11-25.
warnings.simplefilter("ignore", MCPDeprecationWarning)

STANDALONE = os.environ.get("PY_TARGET_SCOPE") == "standalone"
LOG_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
# A 1x1 opaque red PNG (RGB, 8 bit) and 16 samples of silence (RIFF/WAVE, PCM, mono, 8 kHz, 8 bit).
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")
WAV = base64.b64decode("UklGRjQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YRAAAACAgICAgICAgICAgICAgICA")


# ------------------------------------------------------------------ json_schema_2020_12_tool (see docstring)


class Address(BaseModel):
    street: str | None = None
    city: str | None = None


def json_schema_2020_12_tool(name: str | None = None, address: Address | None = None) -> str:
    args = {"name": name, "address": address.model_dump(exclude_none=True) if address else None}
    return f"JSON Schema 2020-12 tool called with: {json.dumps({k: v for k, v in args.items() if v is not None})}"


schema_tool = Tool.from_function(json_schema_2020_12_tool, description="Tool with JSON Schema 2020-12 features")
schema_tool.parameters = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}

app = MCPServer(
    "mcpmux-py-conformance-target",
    version="1.0.0",
    instructions="Python-SDK conformance target for @modelcontextprotocol/conformance server scenarios.",
    tools=[schema_tool],
)

# ------------------------------------------------------------------ logging level and subscriptions

# The logging/setLevel level per session: keyed by the Mcp-Session-Id header over HTTP, None on stdio.
log_levels: dict[str | None, str] = {}


def session_key(request: Any) -> str | None:
    headers = getattr(request, "headers", None)
    return headers.get("mcp-session-id") if headers is not None else None


async def log(ctx: Context, level: str, message: str) -> None:
    """A notifications/message about this request, filtered by the session's logging/setLevel level."""
    minimum = log_levels.get(session_key(ctx.request_context.request))
    if minimum and LOG_LEVELS.index(level) < LOG_LEVELS.index(minimum):
        return
    if STANDALONE:
        await ctx.session.send_log_message(level, message, logger="py-conformance-target")
    else:
        await ctx.log(level, message, logger_name="py-conformance-target")


async def set_level(ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
    log_levels[session_key(ctx.request)] = params.level
    return types.EmptyResult()


async def accept_subscription(ctx, params) -> types.EmptyResult:
    return types.EmptyResult()  # nothing here ever changes, so there is nothing to notify about


lowlevel = app._lowlevel_server  # noqa: SLF001 -- see the module docstring
lowlevel.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, accept_subscription)
lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, accept_subscription)

# ------------------------------------------------------------------ tools


def text_resource(uri: str, mime_type: str, text: str) -> types.EmbeddedResource:
    contents = types.TextResourceContents(uri=uri, mime_type=mime_type, text=text)
    return types.EmbeddedResource(type="resource", resource=contents)


@app.tool(description="Returns a fixed text block")
def test_simple_text() -> str:
    return "This is a simple text response for testing."


@app.tool(description="Returns one image/png content block")
def test_image_content() -> Image:
    return Image(data=PNG, format="png")


@app.tool(description="Returns one audio/wav content block")
def test_audio_content() -> Audio:
    return Audio(data=WAV, format="wav")


@app.tool(description="Returns an embedded text/plain resource")
def test_embedded_resource() -> types.EmbeddedResource:
    return text_resource("test://embedded-resource", "text/plain", "This is an embedded resource content.")


@app.tool(description="Returns text, image and an embedded JSON resource")
def test_multiple_content_types() -> list[types.TextContent | Image | types.EmbeddedResource]:
    intro = types.TextContent(type="text", text="Multiple content types test:")
    data = json.dumps({"test": "data", "value": 123})
    embedded = text_resource("test://mixed-content-resource", "application/json", data)
    return [intro, Image(data=PNG, format="png"), embedded]


@app.tool(description="Sends three notifications/message (info), 50 ms apart, then returns")
async def test_tool_with_logging(ctx: Context) -> str:
    await log(ctx, "info", "Tool execution started")
    await asyncio.sleep(0.05)
    await log(ctx, "info", "Tool processing data")
    await asyncio.sleep(0.05)
    await log(ctx, "info", "Tool execution completed")
    return "Tool with logging executed successfully"


@app.tool(description="Reports progress 0, 50, 100 of 100 on the request's progressToken")
async def test_tool_with_progress(ctx: Context) -> str:
    token = (ctx.request_context.meta or {}).get("progress_token")
    for step, progress in enumerate((0, 50, 100)):
        if not STANDALONE:
            await ctx.report_progress(progress, 100, f"step {step + 1} of 3")  # a no-op without a progressToken
        elif token is not None:
            await ctx.session.send_progress_notification(token, progress, 100, f"step {step + 1} of 3")
        if progress < 100:
            await asyncio.sleep(0.05)
    return "Tool with progress executed successfully"


@app.tool(description="Always returns a tool error (isError: true)")
def test_error_handling() -> str:
    raise ToolError("This tool intentionally returns an error for testing")


@app.tool(description="Asks the client for an LLM completion (sampling/createMessage) of the prompt")
async def test_sampling(
    prompt: Annotated[str, Field(description="The prompt to send to the LLM")], ctx: Context
) -> str:
    if not (ctx.client_capabilities and ctx.client_capabilities.sampling):
        raise ToolError("Client does not support sampling")
    result = await ctx.session.create_message(
        messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=100,
        related_request_id=None if STANDALONE else ctx.request_id,
    )
    content = result.content
    reply = content.text if isinstance(content, types.TextContent) else content.model_dump_json(by_alias=True)
    return f"LLM response: {reply}"


class UserInfo(BaseModel):
    username: str = Field(description="User's response")
    email: str = Field(description="User's email address")


class Sep1034Form(BaseModel):
    name: str = Field("John Doe", description="Your name")
    age: int = Field(30, description="Your age")
    score: float = Field(95.5, description="Your score")
    status: Literal["active", "inactive", "pending"] = Field("active", description="Account status")
    verified: bool = Field(True, description="Verified account")


def require_elicitation(ctx: Context) -> None:
    if not (ctx.client_capabilities and ctx.client_capabilities.elicitation):
        raise ToolError("Client does not support elicitation")


async def elicit_model(ctx: Context, message: str, model: type[BaseModel], label: str) -> str:
    require_elicitation(ctx)
    if STANDALONE:  # ctx.elicit always sends on the request's own stream
        raw = await ctx.session.elicit_form(message, render_elicitation_schema(model))
        return f"{label}: action={raw.action}, content={json.dumps(raw.content or {})}"
    result = await ctx.elicit(message, model)
    content = result.data.model_dump(mode="json") if result.action == "accept" else {}
    return f"{label}: action={result.action}, content={json.dumps(content)}"


@app.tool(description="Asks the user (elicitation/create) for a username and an email address")
async def test_elicitation(
    message: Annotated[str, Field(description="The message to show the user")], ctx: Context
) -> str:
    return await elicit_model(ctx, message, UserInfo, "User response")


@app.tool(description="Elicits a form whose fields carry defaults (SEP-1034)")
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    message = "Please review and update the form fields with defaults"
    return await elicit_model(ctx, message, Sep1034Form, "Elicitation completed")


OPTIONS = ["option1", "option2", "option3"]
ORDINALS = ["First", "Second", "Third"]
SEP1330_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "description": "Untitled single-select", "enum": OPTIONS},
        "titledSingle": {
            "type": "string",
            "description": "Titled single-select",
            "oneOf": [{"const": f"value{i + 1}", "title": f"{n} Option"} for i, n in enumerate(ORDINALS)],
        },
        "legacyEnum": {
            "type": "string",
            "description": "Legacy titled enum (enumNames, deprecated)",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Untitled multi-select",
            "items": {"type": "string", "enum": OPTIONS},
        },
        "titledMulti": {
            "type": "array",
            "description": "Titled multi-select",
            "items": {"anyOf": [{"const": f"value{i + 1}", "title": f"{n} Choice"} for i, n in enumerate(ORDINALS)]},
        },
    },
}


@app.tool(description="Elicits a form with the five enum styles of SEP-1330")
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    require_elicitation(ctx)
    message, related = "Please select options from the enum fields", None if STANDALONE else ctx.request_id
    result = await ctx.session.elicit_form(message, SEP1330_SCHEMA, related_request_id=related)
    return f"Elicitation completed: action={result.action}, content={json.dumps(result.content or {})}"


@app.tool(description="Closes the POST SSE stream mid-call; the result arrives after the client resumes (SEP-1699)")
async def test_reconnection(ctx: Context) -> str:
    await asyncio.sleep(0.05)
    can_close = ctx.request_context.close_sse_stream is not None  # only over HTTP, event store, >= 2025-11-25
    await ctx.close_sse_stream()
    await asyncio.sleep(0.15)
    return f"Reconnection test completed (stream {'closed and resumed' if can_close else 'not closed'})"


# ------------------------------------------------------------------ resources


@app.resource("test://static-text", name="static-text", description="A static text resource", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@app.resource("test://static-binary", name="static-binary", description="A static 1x1 PNG", mime_type="image/png")
def static_binary() -> bytes:
    return PNG


@app.resource("test://watched-resource", name="watched-resource", description="Subscribable", mime_type="text/plain")
def watched_resource() -> str:
    return "This is the content of the watched resource."


@app.resource("test://template/{id}/data", name="template-data", description="JSON data for the given id",
              mime_type="application/json")  # fmt: skip
def template_data(id: str) -> str:  # noqa: A002 -- the template's variable name
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


# ------------------------------------------------------------------ prompts and completion


@app.prompt(description="A prompt without arguments")
def test_simple_prompt() -> list[UserMessage]:
    return [UserMessage("This is a simple prompt for testing.")]


@app.prompt(description="A prompt that substitutes two arguments")
def test_prompt_with_arguments(
    arg1: Annotated[str, Field(description="First test argument")],
    arg2: Annotated[str, Field(description="Second test argument")],
) -> list[UserMessage]:
    return [UserMessage(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]


@app.prompt(description="A prompt that embeds the given resource")
def test_prompt_with_embedded_resource(
    resourceUri: Annotated[str, Field(description="URI of the resource to embed")],  # noqa: N803
) -> list[UserMessage]:
    return [
        UserMessage(text_resource(resourceUri, "text/plain", "Embedded resource content for testing.")),
        UserMessage("Please process the embedded resource above."),
    ]


@app.prompt(description="A prompt with an image")
def test_prompt_with_image() -> list[UserMessage]:
    return [UserMessage(Image(data=PNG, format="png")), UserMessage("Please analyze the image above.")]


COMPLETIONS = {
    ("ref/prompt", "test_prompt_with_arguments", "arg1"): ["paris", "park", "party", "test", "testValue1"],
    ("ref/prompt", "test_prompt_with_arguments", "arg2"): ["world", "wonder", "testValue2"],
    ("ref/resource", "test://template/{id}/data", "id"): ["1", "2", "3", "123"],
}


@app.completion()
async def complete(ref, argument, context) -> types.Completion:
    target = ref.name if isinstance(ref, types.PromptReference) else ref.uri
    prefix = (argument.value or "").lower()
    values = [v for v in COMPLETIONS.get((ref.type, target, argument.name), []) if v.lower().startswith(prefix)]
    return types.Completion(values=values, total=len(values), has_more=False)


# ------------------------------------------------------------------ HTTP: event store for resumability


class MemoryEventStore(EventStore):
    """All sessions' SSE events in arrival order (ids "<stream>.<seq>"); priming events (None) are not replayed."""

    MAX_EVENTS = 10_000

    def __init__(self) -> None:
        self.events: dict[str, tuple[str, Any]] = {}  # event id -> (stream id, message)
        self.seq = itertools.count(1)

    async def store_event(self, stream_id, message):
        event_id = f"{stream_id}.{next(self.seq)}"
        self.events[event_id] = (stream_id, message)
        if len(self.events) > self.MAX_EVENTS:
            del self.events[next(iter(self.events))]
        return event_id

    async def replay_events_after(self, last_event_id, send_callback):
        if last_event_id not in self.events:
            return None
        stream_id, after = self.events[last_event_id][0], False
        for event_id, (sid, message) in list(self.events.items()):
            if event_id == last_event_id:
                after = True
            elif after and sid == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "stdio":
        app.run()
    elif mode == "http" and len(sys.argv) > 2 and sys.argv[2].isdigit():
        port = int(sys.argv[2])
        print(f"py-conformance-target listening on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
        json_response, stateless = os.environ.get("PY_TARGET_JSON") == "1", os.environ.get("PY_TARGET_STATELESS") == "1"
        app.run("streamable-http", host="127.0.0.1", port=port, event_store=MemoryEventStore(), retry_interval=500,
                json_response=json_response, stateless_http=stateless)  # fmt: skip
    else:
        print("usage: py_target.py stdio | py_target.py http PORT", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
