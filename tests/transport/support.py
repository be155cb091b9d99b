"""Talking to the ASGI application the way an MCP client does, through Channels' communicators."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from channels.testing import ApplicationCommunicator

from mcpsite.asgi import application

HOST = "127.0.0.1:8000"


BOTH = "application/json, text/event-stream"


TIMEOUT = 5


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[dict[str, str]]:
        return parse_sse(self.body.decode())


def parse_sse(text: str) -> list[dict[str, str]]:
    """Split an SSE body into events ({"id", "event", "data", "retry"}); comments dropped."""
    result = []
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            fields[name] = fields[name] + "\n" + value if name == "data" and name in fields else value
        if fields:
            result.append(fields)
    return result


def messages(response_events: list[dict[str, str]]) -> list[dict[str, Any]]:
    return [json.loads(e["data"]) for e in response_events if e.get("event") == "message"]


def make_headers(headers: dict[str, str] | None, body: bytes | None) -> list[tuple[bytes, bytes]]:
    merged = {"host": HOST}
    merged.update(headers or {})
    if body is not None:
        merged.setdefault("content-length", str(len(body)))
    return [(k.lower().encode(), v.encode()) for k, v in merged.items()]


class Client:
    """Talks to /t/<slug>/mcp like an MCP client."""

    def __init__(self, slug: str = "tenant-a", address: str | None = None) -> None:
        self.slug = slug
        self.address = address  # the peer address the server sees (scope["client"]); None: no peer
        self.session_id: str | None = None
        self.version: str | None = None

    @property
    def path(self) -> str:
        return f"/t/{self.slug}/mcp"

    def session_headers(self) -> dict[str, str]:
        headers = {}
        if self.session_id:
            headers["mcp-session-id"] = self.session_id
        if self.version:
            headers["mcp-protocol-version"] = self.version
        return headers

    async def post(
        self, payload: Any, headers: dict[str, str] | None = None, raw: bytes | None = None
    ) -> Response:
        body = raw if raw is not None else json.dumps(payload).encode()
        merged = {
            "accept": BOTH,
            "content-type": "application/json",
            **self.session_headers(),
            **(headers or {}),
        }
        return await call("POST", self.path, body, merged, address=self.address)

    async def initialize(self, version: str = "2025-06-18", initialized: bool = True) -> Response:
        response = await self.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"},
                },
            }
        )
        assert response.status == 200, response.body
        self.session_id = response.headers["mcp-session-id"]
        self.version = response.json()["result"]["protocolVersion"]
        if initialized:
            note = await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert note.status == 202
        return response

    async def request(
        self, method: str, params: dict | None = None, id: int | str = 1, **kw: Any
    ) -> Response:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        return await self.post(message, **kw)


async def call(
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    repeated: list[tuple[bytes, bytes]] | None = None,
    address: str | None = None,
) -> Response:
    """One whole HTTP exchange (the response must end within TIMEOUT); `repeated`: extra header lines,
    `address`: the client's address as the server sees it."""
    path_only, _, query = path.partition("?")
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": method,
        "path": path_only,
        "raw_path": path_only.encode(),
        "query_string": query.encode(),
        "scheme": "http",
        "headers": make_headers(headers, body if method in ("POST", "PUT") else None) + (repeated or []),
    }
    if address is not None:
        scope["client"] = (address, 50000)
    communicator = ApplicationCommunicator(application, scope)
    await communicator.send_input({"type": "http.request", "body": body})
    start = await communicator.receive_output(TIMEOUT)
    assert start["type"] == "http.response.start", start
    chunks = b""
    while True:
        chunk = await communicator.receive_output(TIMEOUT)
        chunks += chunk.get("body", b"")
        if not chunk.get("more_body"):
            break
    await communicator.wait(TIMEOUT)
    headers_out = {k.decode().lower(): v.decode() for k, v in start.get("headers", [])}
    return Response(start["status"], headers_out, chunks)


@dataclass
class Stream:
    """An open SSE response read event by event."""

    communicator: ApplicationCommunicator
    status: int
    headers: dict[str, str]
    buffer: str = ""
    ended: bool = False
    seen: list[dict[str, str]] = field(default_factory=list)

    async def next_event(self, timeout: float = TIMEOUT) -> dict[str, str]:
        """Return the next SSE event (comments skipped); fail if none comes within `timeout`."""
        while "\n\n" not in self.buffer:
            assert not self.ended, f"stream ended; buffer={self.buffer!r}"
            chunk = await self.communicator.receive_output(timeout)
            self.buffer += chunk.get("body", b"").decode()
            self.ended = not chunk.get("more_body", False)
        block, self.buffer = self.buffer.split("\n\n", 1)
        parsed = parse_sse(block + "\n\n")
        if not parsed:
            return await self.next_event(timeout)
        self.seen.append(parsed[0])
        return parsed[0]

    async def next_message(self, timeout: float = TIMEOUT) -> tuple[str | None, dict[str, Any]]:
        while True:
            event = await self.next_event(timeout)
            if event.get("event") == "message":
                return event.get("id"), json.loads(event["data"])

    async def assert_quiet(self, seconds: float = 0.3) -> None:
        """Assert no event arrives for `seconds` (empty chunks, keep-alives and the priming event are fine)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while (left := deadline - loop.time()) > 0:
            if await self.communicator.receive_nothing(left):
                return
            chunk = await self.communicator.receive_output(TIMEOUT)
            self.buffer += chunk.get("body", b"").decode()
            self.ended = not chunk.get("more_body", False)
            assert not self.ended, "the stream ended"
            for event in parse_sse(self.buffer):
                assert event.get("data", "") == "", f"unexpected event {event}"

    async def read_to_end(self, timeout: float = TIMEOUT) -> list[dict[str, str]]:
        while not self.ended:
            chunk = await self.communicator.receive_output(timeout)
            self.buffer += chunk.get("body", b"").decode()
            self.ended = not chunk.get("more_body", False)
        rest = parse_sse(self.buffer)
        self.buffer = ""
        return rest

    async def abort(self) -> None:
        """Drop the connection the way Daphne does when a client leaves: cancel the application."""
        self.communicator.future.cancel()
        with contextlib.suppress(BaseException):
            await self.communicator.future

    async def disconnect(self) -> None:
        await self.communicator.send_input({"type": "http.disconnect"})
        try:
            await self.communicator.wait(TIMEOUT)
        except Exception:
            self.communicator.future.cancel()


async def open_stream(
    method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> Stream:
    """Start a request whose response may be an open stream; return once headers arrive."""
    path_only, _, query = path.partition("?")
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": method,
        "path": path_only,
        "raw_path": path_only.encode(),
        "query_string": query.encode(),
        "scheme": "http",
        "headers": make_headers(headers, body if method == "POST" else None),
    }
    communicator = ApplicationCommunicator(application, scope)
    await communicator.send_input({"type": "http.request", "body": body})
    start = await communicator.receive_output(TIMEOUT)
    assert start["type"] == "http.response.start", start
    headers_out = {k.decode().lower(): v.decode() for k, v in start.get("headers", [])}
    return Stream(communicator, start["status"], headers_out)
