"""Real upstream MCP servers for the tests: the official SDK's server under uvicorn, in a subprocess.

`UpstreamServer` starts `python -m tests.upstreams.servers` on a free 127.0.0.1 port (bounded start
wait; forked from a zygote that imported the SDK once, tests/zygote.py), can be killed and started again on the same port (an upstream restart), and stops at teardown.
Its options choose how the SDK serves: `stateless=False` keeps legacy sessions (the SDK's stateful
Streamable HTTP), `stateless=True` keeps none; `legacy_only=True` answers 2026-07-28 requests as a
server older than that revision does (400, "Missing session ID"), so a client in auto mode falls back to
`initialize`; without it the SDK answers 2026-07-28 requests itself; `json_response` answers JSON
instead of SSE; `bearer` makes every MCP request need `Authorization: Bearer <bearer>` (401 otherwise);
`status` answers every MCP request with that HTTP status (a broken upstream: 502, 503); `sse` serves the
SDK's 2024-11-05 HTTP+SSE app instead (its stream at /sse, messages POSTed to /messages/), and
`cross_origin` (with `sse`) makes it announce its message endpoint on another origin (localhost).

What the tests observe lives at `GET /_stats` (never behind the bearer): the JSON-RPC methods received
(`initialize` counts prove a pooled session is reused; `federated`: those our platform sent), the session ids seen, the `slow_count` runs that
were cancelled, the protocol versions requests carried, and `streams`: the HTTP+SSE streams opened.

Tools: `echo` (text + structuredContent), `add` (output schema), `slow_count` (progress and a log
message per step; a cancelled run is recorded), `fail` (an isError result), `hang` (never answers), `shout`
(announces list_changed n times outside any call's reply: a flood of GET and listen streams), `regional` (an argument mirrored into an
`Mcp-Param-Region` header on 2026-07-28),
`redescribe` (changes another tool's description and announces list_changed, for pinning tests),
`reshape` (gives `echo` a new `loud` argument, which upper-cases its answer, and announces
list_changed: a changed input schema waiting for review). `calls` in the stats is every tools/call's
name and arguments exactly as they reached this server (what a published tool forwarded).
Tools that ask their client, through the SDK's resolvers (so one definition asks in both eras: a
server-to-client request mid-call on a legacy session, an InputRequiredResult on 2026-07-28):
`ask_name` (a form), `summarize` (sampling), `list_roots` (roots/list) and `ask_then_sample` (a form,
then a sampling question built from its answer: two rounds on 2026-07-28), and `ask_forever` (on
2026-07-28, an InputRequiredResult every round). Each run that reaches its body is recorded in
`completed` under its tool's name.
`retool` adds a tool, or removes one, and announces list_changed (the fan-in tests).
`big` answers that many MB of text holding e-mail addresses (a hostile upstream's reply).
`long_job` (`steps`, `delay`, `run`) runs only as a task of this upstream, in both eras, and `maybe_job`
as one when asked (else plainly): served by tests/upstreams/task_server.py (`tasks` in the stats counts
the tasks it created).
Prompts, resources and templates (issue 22's publication of them): the prompt `greet` (an argument
`name`, completed from a fixed list; its messages are a text and an embedded `docs://readme`),
the static `docs://readme` (text), the template `docs://pages/{page}` (`page` completed too), the MCP
Apps UI resource `ui://widgets/card.html` and the tool `show_card` whose `_meta.ui.resourceUri` (and
the older `ui/resourceUri`) names it; `redescribe_prompt` changes a prompt's description.
A legacy session is told `listChanged` in its capabilities, and every open legacy session (on its GET
stream) hears a list change, as a 2026-07-28 listener does: a watcher's session is not the caller's.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypedDict

import httpx
import uvicorn
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context, Elicit, ListRoots, MCPServer, Resolve, Sample
from mcp_types import (
    CallToolResult,
    Completion,
    CreateMessageResult,
    EmbeddedResource,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
    NotificationParams,
    PromptReference,
    SamplingMessage,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field

from tests import zygote
from tests.upstreams import task_server

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.upstreams.servers"
# A busy machine (two suites at once) took over 20 s to start one.
START_SECONDS = 60.0
STOP_SECONDS = 10.0
STATS_PATH = "/_stats"
README_TEXT = "The upstream's readme."
# The greet prompt's name and the page template's page that never answer: a hanging upstream.
STALL = "stall-forever"
CARD_URI = "ui://widgets/card.html"
CARD_HTML = "<html><body>card</body></html>"
NAMES = ("Ada", "Alan", "Grace")
MCP_PATH = "/mcp"
SSE_PATH = "/sse"
MESSAGE_PATH = "/messages/"
# What `big` repeats: e-mail addresses a results guardrail would redact, were the reply ever read whole.
BIG_LINE = "write to ann.lee@example.com or bob.ray@example.org today. "
BIG_TEXTS: dict[int, str] = {}


class EchoOut(TypedDict):
    """Structured output of `echo`."""

    echo: str


class AddOut(TypedDict):
    """Structured output of `add` (its output schema)."""

    sum: int


class NameForm(BaseModel):
    """The form `ask_name` shows."""

    name: str


def want_name() -> Elicit[NameForm]:
    return Elicit("Who are you?", NameForm)


def want_summary(text: str) -> Sample:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarize: {text}"))
    return Sample([message], max_tokens=50)


def want_roots() -> ListRoots:
    return ListRoots()


def want_poem(who: Annotated[NameForm, Resolve(want_name)]) -> Sample:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=f"A poem for {who.name}"))
    return Sample([message], max_tokens=50)


def _text_of(result: CreateMessageResult) -> str:
    return result.content.text if isinstance(result.content, TextContent) else "?"


@dataclass
class Stats:
    """What this server process saw, served at /_stats."""

    methods: Counter[str] = field(default_factory=Counter)
    # The same, of requests from our platform's federation client (its User-Agent): a sync's discover.
    federated: Counter[str] = field(default_factory=Counter)
    sessions: set[str] = field(default_factory=set)
    versions: Counter[str] = field(default_factory=Counter)
    cancelled: list[str] = field(default_factory=list)
    completed: list[str] = field(default_factory=list)
    unauthorized: int = 0
    deletes: int = 0
    streams: int = 0
    tasks: int = 0
    calls: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "methods": dict(self.methods),
            "federated": dict(self.federated),
            "sessions": sorted(self.sessions),
            "versions": dict(self.versions),
            "cancelled": self.cancelled,
            "completed": self.completed,
            "unauthorized": self.unauthorized,
            "deletes": self.deletes,
            "streams": self.streams,
            "tasks": self.tasks,
            "calls": self.calls,
        }


def _announce_list_changes(server: MCPServer) -> Any:
    """Make legacy sessions hear list changes: `listChanged` in the handshake, every open session told.

    Returns `tell_sessions(ctx)`, which sends notifications/tools/list_changed to every legacy session
    that finished its handshake (its GET stream, there being no request to relate it to).
    """
    low = server._lowlevel_server
    options = low.create_initialization_options

    def with_list_changes(notification_options: Any = None, *args: Any, **kwargs: Any) -> Any:
        everything = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
        return options(notification_options or everything, *args, **kwargs)

    low.create_initialization_options = with_list_changes
    sessions: list[Any] = []

    async def initialized(ctx: Any, params: NotificationParams) -> None:
        sessions.append(ctx.session)

    low.add_notification_handler("notifications/initialized", NotificationParams, initialized)

    async def tell_sessions(ctx: Context) -> None:
        legacy = ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
        # The caller's own session too: a stateless server's has no handshake of its own to be listed by.
        caller = [ctx.session] if legacy and ctx.session not in sessions else []
        for session in [*sessions, *caller]:
            try:
                await session.send_tool_list_changed()
            except Exception:  # noqa: BLE001 - a session that ended: forget it
                if session in sessions:
                    sessions.remove(session)

    return tell_sessions


def build_server(stats: Stats) -> MCPServer:
    """The SDK server and its tools."""
    server = MCPServer(
        name="upstream",
        instructions="A test upstream.",
        version="1.0",
        log_level="WARNING",
        middleware=[task_server.TaskMiddleware(stats)],
    )
    tell_sessions = _announce_list_changes(server)

    @server.tool(name="echo", description="Echo the message back.")
    def echo(message: str) -> Annotated[CallToolResult, EchoOut]:
        """Return the message as text and as structured content."""
        return CallToolResult(
            content=[TextContent(type="text", text=message)], structured_content={"echo": message}
        )

    @server.tool(name="add", description="Add two integers.")
    def add(a: int, b: int) -> AddOut:
        """Return a + b."""
        return {"sum": a + b}

    @server.tool(name="slow_count", description="Count to n, reporting progress and logging each step.")
    async def slow_count(n: int, ctx: Context, delay: float = 0.05, run: str = "") -> str:
        """Count slowly; a cancelled run is recorded under its `run` label."""
        try:
            for i in range(1, n + 1):
                await asyncio.sleep(delay)
                await ctx.report_progress(i, n, f"step {i}")
                await ctx.info(f"counted {i}", logger_name="counter")
        except asyncio.CancelledError:
            stats.cancelled.append(run)
            raise
        stats.completed.append(run)
        return f"counted to {n}"

    @server.tool(name=task_server.TOOL, description="A long job, run only as a task.")
    def long_job(steps: int = 3, delay: float = 0.1, run: str = "") -> str:
        """Never runs here: task_server.TaskMiddleware answers every call of it with a task."""
        return "not as a task"

    @server.tool(name=task_server.OPTIONAL_TOOL, description="A job run as a task when asked, else plainly.")
    async def maybe_job(steps: int = 3, delay: float = 0.1, run: str = "") -> str:
        """The plain run (a task-augmented call is task_server.TaskMiddleware's)."""
        await asyncio.sleep(steps * delay)
        stats.completed.append(run)
        return f"job done plainly after {steps} steps"

    @server.tool(name="fail", description="Fail with an error result.")
    def fail(reason: str = "it failed") -> CallToolResult:
        """Return an isError result."""
        return CallToolResult(content=[TextContent(type="text", text=reason)], is_error=True)

    @server.tool(name="hang", description="Never answer.")
    async def hang(run: str = "") -> str:
        """Sleep until cancelled; a cancelled run is recorded."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            stats.cancelled.append(run)
            raise
        return "unreachable"

    @server.tool(name="shout", description="Announce list_changed n times, to every session and listener.")
    async def shout(n: int, ctx: Context) -> str:
        """A flood outside any call's reply: legacy sessions' GET streams (an HTTP+SSE session's one
        stream) and 2026-07-28 `subscriptions/listen` streams."""
        for _ in range(n):
            await ctx.notify_tools_changed()
            await tell_sessions(ctx)
        return f"shouted {n}"

    @server.tool(name="regional", description="Answer for a region mirrored into an Mcp-Param-Region header.")
    def regional(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        """Return the region (2026-07-28 requests must mirror it into the header)."""
        return f"region {region}"

    @server.tool(name="redescribe", description="Change a tool's description and announce list_changed.")
    async def redescribe(tool: str, description: str, ctx: Context) -> str:
        """Rewrite `tool`'s description; tell legacy sessions and 2026-07-28 listeners."""
        target = server._tool_manager.get_tool(tool)
        if target is None:
            return f"no tool {tool}"
        target.description = description
        await ctx.notify_tools_changed()
        await tell_sessions(ctx)
        return "changed"

    @server.tool(name="reshape", description="Give echo a `loud` argument and announce list_changed.")
    async def reshape(ctx: Context) -> str:
        """Replace `echo` by one that also takes `loud` (its input schema changes, its description not)."""

        def loud_echo(message: str, loud: bool = False) -> Annotated[CallToolResult, EchoOut]:
            said = message.upper() if loud else message
            return CallToolResult(
                content=[TextContent(type="text", text=said)], structured_content={"echo": said}
            )

        server.remove_tool("echo")
        server.add_tool(loud_echo, name="echo", description="Echo the message back.")
        await ctx.notify_tools_changed()
        await tell_sessions(ctx)
        return "reshaped"

    @server.tool(name="ask_name", description="Ask the person's name and greet them.")
    def ask_name(answer: Annotated[ElicitationResult[NameForm], Resolve(want_name)]) -> str:
        """Greet the person by the name they give (a form), or say what they did instead."""
        stats.completed.append("ask_name")
        if isinstance(answer, AcceptedElicitation):
            return f"Hello, {answer.data.name}!"
        return f"No name given ({answer.action})."

    @server.tool(name="summarize", description="Summarize a text with the client's model.")
    def summarize(text: str, summary: Annotated[CreateMessageResult, Resolve(want_summary)]) -> str:
        """The client's model's answer to "Summarize: <text>"."""
        stats.completed.append("summarize")
        return f"Summary: {_text_of(summary)}"

    @server.tool(name="list_roots", description="Show the client's roots.")
    def list_roots(roots: Annotated[ListRootsResult, Resolve(want_roots)]) -> str:
        """The client's roots' URIs."""
        stats.completed.append("list_roots")
        return "Roots: " + ", ".join(str(root.uri) for root in roots.roots)

    @server.tool(name="ask_then_sample", description="Ask the person's name, then a poem for them.")
    def ask_then_sample(poem: Annotated[CreateMessageResult, Resolve(want_poem)]) -> str:
        """A form, then a sampling question built from its answer (two rounds on 2026-07-28)."""
        stats.completed.append("ask_then_sample")
        return f"Poem: {_text_of(poem)}"

    @server.tool(name="ask_forever", description="Ask for the roots again every round (2026-07-28).")
    def ask_forever(ctx: Context) -> CallToolResult | InputRequiredResult:
        """An upstream that never stops asking; a legacy session gets an error result."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return CallToolResult(content=[TextContent(type="text", text="2026-07-28 only")], is_error=True)
        rounds = int(ctx.request_state or "0") + 1
        return InputRequiredResult(input_requests={"again": ListRootsRequest()}, request_state=str(rounds))

    @server.tool(
        name="retool", description="Add a tool (a fixed answer) or remove one; announce list_changed."
    )
    async def retool(action: str, tool: str, ctx: Context) -> str:
        """`add` a tool named `tool` answering "I am <tool>", or `remove` the tool `tool`."""
        if action == "add":

            def answer() -> str:
                return f"I am {tool}"

            server.add_tool(answer, name=tool, description=f"The tool {tool}.")
        elif action == "remove":
            try:
                server.remove_tool(tool)
            except Exception:  # noqa: BLE001 - the SDK's ToolError for an unknown name
                return f"no tool {tool}"
        else:
            return f"no action {action}"
        await ctx.notify_tools_changed()
        await tell_sessions(ctx)
        return "done"

    @server.tool(name="big", description="Answer `megabytes` MB of text full of e-mail addresses.")
    def big(megabytes: int) -> CallToolResult:
        """A hostile upstream's reply (tests/e2e/test_governance_hostile.py): made once a size, as the
        SDK's own encoding of it is work enough for this process."""
        if megabytes not in BIG_TEXTS:
            size = megabytes * 1024 * 1024
            BIG_TEXTS[megabytes] = (BIG_LINE * (size // len(BIG_LINE) + 1))[:size]
        return CallToolResult(content=[TextContent(type="text", text=BIG_TEXTS[megabytes])])

    counted = itertools.count(1)

    @server.tool(
        name="public_counter",
        description="A new number each call, its result saying anyone may keep it (a hostile claim).",
        annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True),
    )
    def public_counter(q: str = "") -> CallToolResult:
        """tests/e2e/test_result_cache.py: what the platform keeps for one caller must never reach another,
        whatever the result says of itself."""
        return CallToolResult(
            content=[TextContent(type="text", text=f"call {next(counted)} for {q}")],
            meta={"cacheScope": "public", "ttlMs": 3_600_000},
        )

    _extras(server)
    return server


def _extras(server: MCPServer) -> None:
    """Prompts, resources, a template, an MCP Apps UI resource and the tool that names it, completions."""

    @server.prompt(name="greet", title="Greeting", description="Greet someone, with the readme attached.")
    async def greet(name: str) -> list[dict[str, Any]]:
        """A text message and the readme as an embedded resource (never, for the name STALL)."""
        if name == STALL:
            await asyncio.Event().wait()  # a hanging upstream (tests/e2e/test_upstream_isolation.py)
        readme = EmbeddedResource(
            type="resource", resource=TextResourceContents(uri="docs://readme", text=README_TEXT)
        )
        return [
            {"role": "user", "content": TextContent(type="text", text=f"Say hello to {name}.")},
            {"role": "user", "content": readme},
        ]

    @server.resource("docs://readme", name="readme", description="The readme.", mime_type="text/plain")
    def readme() -> str:
        return README_TEXT

    @server.resource("docs://pages/{page}", name="page", description="A page by name.", mime_type="text/plain")
    async def page(page: str) -> str:
        if page == STALL:
            await asyncio.Event().wait()
        return f"Page {page}."

    app_meta = {"ui": {"prefersBorder": True}}

    @server.resource(CARD_URI, name="card", mime_type="text/html;profile=mcp-app", meta=app_meta)
    def card() -> str:
        return CARD_HTML

    ui_meta = {"ui": {"resourceUri": CARD_URI}, "ui/resourceUri": CARD_URI}

    @server.tool(name="show_card", description="Show a card (an MCP Apps UI).", meta=ui_meta)
    def show_card() -> str:
        return "card shown"

    @server.tool(name="redescribe_prompt", description="Change a prompt's description; announce list_changed.")
    async def redescribe_prompt(prompt: str, description: str, ctx: Context) -> str:
        target = server._prompt_manager.get_prompt(prompt)
        if target is None:
            return f"no prompt {prompt}"
        target.description = description
        await ctx.notify_prompts_changed()
        return "changed"

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> Completion:
        values = NAMES if isinstance(ref, PromptReference) else ("intro", "install", "usage")
        return Completion(values=[v for v in values if v.lower().startswith(argument.value.lower())])


def _json_reply(status: int, body: Any, headers: list[tuple[bytes, bytes]] | None = None) -> tuple:
    data = json.dumps(body).encode()
    return status, [(b"content-type", b"application/json"), *(headers or [])], data


class Front:
    """ASGI wrapper: /_stats, the bearer check, counting, and the legacy-only refusal."""

    def __init__(
        self, app: Any, stats: Stats, bearer: str, legacy_only: bool, status: int, cross_origin: bool = False
    ) -> None:
        self.app, self.stats, self.bearer, self.legacy_only = app, stats, bearer, legacy_only
        self.status, self.cross_origin = status, cross_origin

    async def _send(self, send: Any, reply: tuple) -> None:
        status, headers, data = reply
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    @staticmethod
    def _elsewhere(send: Any, port: int) -> Any:
        """``send``, its endpoint event naming another origin (same port, another host name)."""
        here = f"data: {MESSAGE_PATH}".encode()
        there = f"data: http://localhost:{port}{MESSAGE_PATH}".encode()

        async def rewritten(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": message.get("body", b"").replace(here, there)}
            await send(message)

        return rewritten

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == STATS_PATH:
            await self._send(send, _json_reply(200, self.stats.as_json()))
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        if self.bearer and headers.get("authorization") != f"Bearer {self.bearer}":
            self.stats.unauthorized += 1
            await self._send(send, _json_reply(401, {"error": "unauthorized"}))
            return
        if self.status:
            await self._send(send, (self.status, [(b"content-type", b"text/plain")], b"broken"))
            return
        if session := headers.get("mcp-session-id"):
            self.stats.sessions.add(session)
        if scope["method"] == "DELETE":
            self.stats.deletes += 1
        if scope["method"] == "GET" and scope["path"] == SSE_PATH:
            self.stats.streams += 1
            if self.cross_origin:
                send = self._elsewhere(send, scope["server"][1])
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        method = parsed.get("method", "") if isinstance(parsed, dict) else ""
        version = headers.get("mcp-protocol-version", "")
        self.stats.methods[method] += 1
        if headers.get("user-agent", "").startswith("django-mcp-platform"):
            self.stats.federated[method] += 1
        self.stats.versions[version or "none"] += 1
        if method == "tools/call" and isinstance(parsed.get("params"), dict):
            params = parsed["params"]
            self.stats.calls.append(
                {"name": params.get("name"), "arguments": params.get("arguments"), "meta": params.get("_meta")}
            )
        if self.legacy_only and (version in MODERN_PROTOCOL_VERSIONS or method == "server/discover"):
            # What a server older than 2026-07-28 answers a request outside a session.
            error = {"code": -32600, "message": "Bad Request: Missing session ID"}
            await self._send(send, _json_reply(400, {"jsonrpc": "2.0", "id": None, "error": error}))
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _add_numbered_tool(server: MCPServer, number: int) -> None:
    def answer(text: str) -> str:
        return f"{number}: {text}"

    server.add_tool(answer, name=f"many_{number:04d}", description=f"Numbered tool {number}: repeats the text.")


def build_app(
    *,
    stateless: bool,
    json_response: bool,
    bearer: str,
    legacy_only: bool,
    status: int = 0,
    sse: bool = False,
    cross_origin: bool = False,
    many: int = 0,
) -> Any:
    """The SDK's Streamable HTTP app (or its HTTP+SSE app) behind the test front; `many` more tools
    (`many_0000`, ...: a large publish)."""
    stats = Stats()
    server = build_server(stats)
    for number in range(many):
        _add_numbered_tool(server, number)
    if sse:
        app = server.sse_app(sse_path=SSE_PATH, message_path=MESSAGE_PATH, host="127.0.0.1")
    else:
        app = server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            json_response=json_response,
            stateless_http=stateless,
            host="127.0.0.1",
        )
    return Front(app, stats, bearer, legacy_only, status, cross_origin)


@dataclass
class UpstreamServer:
    """One upstream process on 127.0.0.1:`port`; `start`, `stop` (a kill), `restart`, `stats`."""

    port: int
    log_path: Path
    stateless: bool = False
    json_response: bool = False
    bearer: str = ""
    legacy_only: bool = False
    status: int = 0
    sse: bool = False
    cross_origin: bool = False
    many: int = 0
    proc: zygote.Forked | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{SSE_PATH if self.sse else MCP_PATH}"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", MODULE, "--port", str(self.port)]
        cmd += ["--stateless"] * self.stateless + ["--json-response"] * self.json_response
        cmd += ["--legacy-only"] * self.legacy_only + (["--status", str(self.status)] if self.status else [])
        cmd += ["--sse"] * self.sse + ["--cross-origin"] * self.cross_origin
        cmd += ["--many", str(self.many)] if self.many else []
        return cmd

    def start(self) -> None:
        env = {**os.environ, "UPSTREAM_BEARER": self.bearer}
        # Forked from a process that imported the SDK once (tests/zygote.py): ~1 s of CPU less a server.
        self.proc = zygote.spawn(MODULE, self.command()[3:], env, self.log_path)
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"upstream exited with {self.proc.returncode}: {self.log_path.read_text()}"
                )
            try:
                httpx.get(f"http://127.0.0.1:{self.port}{STATS_PATH}", timeout=1.0)
                return
            except httpx.HTTPError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"upstream did not start within {START_SECONDS} s: {self.log_path.read_text()}")

    def stop(self) -> None:
        """Kill the process (an upstream that dies, not one that shuts down politely)."""
        if self.proc is None:
            return
        self.proc.kill()
        self.proc.wait(timeout=STOP_SECONDS)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def stats(self) -> dict[str, Any]:
        return httpx.get(f"http://127.0.0.1:{self.port}{STATS_PATH}", timeout=5.0).json()


def main() -> None:
    """Serve one upstream with uvicorn (the bearer comes from UPSTREAM_BEARER, never argv)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--stateless", action="store_true")
    parser.add_argument("--json-response", action="store_true")
    parser.add_argument("--legacy-only", action="store_true")
    parser.add_argument("--status", type=int, default=0)
    parser.add_argument("--sse", action="store_true")
    parser.add_argument("--cross-origin", action="store_true")
    parser.add_argument("--many", type=int, default=0)
    args = parser.parse_args()
    app = build_app(
        stateless=args.stateless,
        json_response=args.json_response,
        bearer=os.environ.get("UPSTREAM_BEARER", ""),
        legacy_only=args.legacy_only,
        status=args.status,
        sse=args.sse,
        cross_origin=args.cross_origin,
        many=args.many,
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, access_log=False, log_level="warning", loop="asyncio")


if __name__ == "__main__":
    main()
