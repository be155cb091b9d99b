"""A small, fast MCP Streamable HTTP load generator: asyncio + raw HTTP/1.1 keep-alive.

One `McpClient` is one simulated client: one keep-alive TCP connection and one MCP session.
`ModernClient` is the same on the 2026-07-28 wire: no initialize, no session; every POST carries
the `_meta` envelope and the request metadata headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name),
and every result must say `resultType: "complete"`. `ListenStream` holds a `subscriptions/listen`;
it and `GetStream` (a legacy session's GET stream) share one SSE pump in `SseStream`, so both stream
kinds are read, counted and fail the same way.
Responses may be `application/json` or `text/event-stream` (read until the JSON-RPC response
with the matching id, then drain the rest of the HTTP body so the connection can be reused).
Plain-socket HTTP because httpx costs more CPU per request than the servers under test.
Longer than 400 lines: the HTTP/1.1 and SSE reader, the MCP client and the load loops belong together.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import json
import math
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

PROTOCOL_VERSION = "2025-06-18"
MODERN_VERSION = "2026-07-28"
REQUEST_TIMEOUT = 30.0
# The `_meta` envelope every 2026-07-28 request carries (basic/index "Per-request protocol fields").
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
}
# Methods whose params.name / params.uri is mirrored into Mcp-Name (streamable-http "Request Metadata").
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


class BenchError(Exception):
    """A response that is not the success we asked for (HTTP status, JSON-RPC error, bad shape)."""


@dataclass
class HttpResponse:
    status: int
    headers: dict[str, str]
    # The JSON-RPC message answering our request (None for 202 / no body).
    message: dict[str, Any] | None
    # Other JSON-RPC messages that arrived on the same SSE stream (notifications, requests).
    others: list[dict[str, Any]] = field(default_factory=list)
    raw_body: bytes = b""


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise BenchError(f"bad status line {lines[0]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


class SseParser:
    """Incremental text/event-stream parser yielding (event id, data) for complete events."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[tuple[str | None, str]]:
        self._buf += data
        if b"\r" in self._buf:
            self._buf = self._buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        events: list[tuple[str | None, str]] = []
        while True:
            end = self._buf.find(b"\n\n")
            if end < 0:
                return events
            block, self._buf = self._buf[:end], self._buf[end + 2 :]
            data_lines: list[str] = []
            event_id: str | None = None
            for line in block.decode("utf-8").split("\n"):
                if line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                if value.startswith(" "):
                    value = value[1:]
                if name == "data":
                    data_lines.append(value)
                elif name == "id":
                    event_id = value
            if data_lines:
                events.append((event_id, "\n".join(data_lines)))


class BodyReader:
    """Read one HTTP/1.1 body (chunked, Content-Length or until close) piece by piece."""

    def __init__(self, reader: asyncio.StreamReader, headers: dict[str, str], status: int = 200) -> None:
        self.reader = reader
        self.chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        self.remaining = int(length) if length is not None and not self.chunked else None
        if status in (204, 304):
            # No body, whatever the headers say (RFC 9112 6.3); reading "until close" would wait
            # for the keep-alive connection to time out (Daphne answers DELETE with a bare 204).
            self.chunked, self.remaining = False, 0
        self.done = False

    async def next_piece(self) -> bytes:
        """Return the next piece of the body; b"" once the body is complete."""
        if self.done:
            return b""
        if self.chunked:
            size_line = await self.reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                # Trailers (none expected) end with an empty line.
                while (await self.reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                self.done = True
                return b""
            data = await self.reader.readexactly(size + 2)
            return data[:-2]
        if self.remaining is not None:
            if self.remaining == 0:
                self.done = True
                return b""
            data = await self.reader.read(min(self.remaining, 65536))
            if not data:
                raise BenchError("connection closed inside the body")
            self.remaining -= len(data)
            return data
        data = await self.reader.read(65536)
        if not data:
            self.done = True
        return data


class McpClient:
    """One simulated MCP client: a keep-alive connection and a session (the legacy wire)."""

    wire = "legacy"
    # What initialize declares (a client that answers elicitations says so).
    capabilities: dict[str, Any] = {}
    # How long one response may take to read in full (a client of slow tools waits longer).
    request_timeout = REQUEST_TIMEOUT

    def __init__(self, host: str, port: int, path: str, extra_headers: dict[str, str] | None = None) -> None:
        self.host, self.port, self.path = host, port, path
        self.extra_headers = extra_headers or {}
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._next_id = 0
        self.connects = 0
        self.notifications: list[dict[str, Any]] = []

    async def _connect(self) -> None:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port, limit=1 << 20)

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await self._writer.wait_closed()
            self._writer = self._reader = None

    def _head(
        self, method: str, content_length: int | None, accept: str, extra: dict[str, str] | None = None
    ) -> bytes:
        lines = [
            f"{method} {self.path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            f"Accept: {accept}",
        ]
        if content_length is not None:
            lines.append("Content-Type: application/json")
            lines.append(f"Content-Length: {content_length}")
        if self.session_id:
            lines.append(f"Mcp-Session-Id: {self.session_id}")
        if self.protocol_version:
            lines.append(f"MCP-Protocol-Version: {self.protocol_version}")
        lines.extend(f"{k}: {v}" for k, v in self.extra_headers.items())
        if extra:
            lines.extend(f"{k}: {v}" for k, v in extra.items())
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def post(self, payload: dict[str, Any], headers: dict[str, str] | None = None) -> HttpResponse:
        """POST one JSON-RPC message and read the whole HTTP response."""
        body = json.dumps(payload, separators=(",", ":")).encode()
        for attempt in (0, 1):
            if self._reader is not None and self._reader.at_eof():
                # The server closed an idle keep-alive connection (uvicorn does after 5 s).
                await self.close()
            reused = self._writer is not None
            if self._writer is None:
                await self._connect()
                self.connects += 1
            assert self._reader is not None and self._writer is not None
            self._writer.write(
                self._head("POST", len(body), "application/json, text/event-stream", headers) + body
            )
            try:
                return await asyncio.wait_for(self._read_response(payload.get("id")), self.request_timeout)
            except asyncio.IncompleteReadError as exc:
                await self.close()
                if reused and attempt == 0 and not exc.partial:
                    # Closed before answering anything: the close raced our request; resend once.
                    continue
                raise BenchError(f"connection closed reading response to {payload.get('method')}") from exc
            except (TimeoutError, ConnectionError, OSError) as exc:
                await self.close()
                raise BenchError(f"{type(exc).__name__} reading response to {payload.get('method')}") from exc
        raise AssertionError("unreachable")

    async def _read_response(self, want_id: Any) -> HttpResponse:
        assert self._reader is not None
        head = await self._reader.readuntil(b"\r\n\r\n")
        status, headers = _parse_head(head)
        body = BodyReader(self._reader, headers, status)
        ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        resp = HttpResponse(status=status, headers=headers, message=None)
        if ctype == "text/event-stream":
            parser = SseParser()
            while True:
                piece = await body.next_piece()
                if not piece:
                    break
                for _event_id, data in parser.feed(piece):
                    msg = json.loads(data)
                    if (
                        resp.message is None
                        and "id" in msg
                        and msg.get("id") == want_id
                        and "method" not in msg
                    ):
                        resp.message = msg
                    else:
                        resp.others.append(msg)
                        await self._on_stream_message(msg)
        else:
            chunks = []
            while True:
                piece = await body.next_piece()
                if not piece:
                    break
                chunks.append(piece)
            raw = b"".join(chunks)
            resp.raw_body = raw
            if raw and ctype == "application/json":
                msg = json.loads(raw)
                if isinstance(msg, dict):
                    resp.message = msg
        if headers.get("connection", "").lower() == "close" or not (
            body.chunked or body.remaining is not None
        ):
            await self.close()
        return resp

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request; return its result or raise BenchError."""
        self._next_id += 1
        payload: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        params = self._params(params)
        if params is not None:
            payload["params"] = params
        resp = await self.post(payload, self._request_headers(method, params))
        self.notifications.extend(resp.others)
        if resp.status != 200:
            raise BenchError(f"{method}: HTTP {resp.status} {resp.raw_body[:200]!r}")
        if resp.message is None:
            raise BenchError(f"{method}: no JSON-RPC response with id {self._next_id}")
        if "error" in resp.message:
            raise BenchError(f"{method}: JSON-RPC error {resp.message['error']}")
        if "result" not in resp.message:
            raise BenchError(f"{method}: response without result {resp.message}")
        if method == "initialize":
            self.session_id = resp.headers.get("mcp-session-id")
        result = resp.message["result"]
        self._check_result(method, result)
        return result

    async def _on_stream_message(self, msg: dict[str, Any]) -> None:
        """A message other than the response, as it arrives on a response's SSE stream (a hook: a
        subclass times progress or answers the server's questions while the call is in flight)."""

    def _params(self, params: dict[str, Any] | None) -> dict[str, Any] | None:
        """The params as sent (the modern wire adds its envelope)."""
        return params

    def _request_headers(self, method: str, params: dict[str, Any] | None) -> dict[str, str] | None:
        """Per-request headers (the modern wire's request metadata)."""
        return None

    def _check_result(self, method: str, result: Any) -> None:
        if not isinstance(result, dict):
            raise BenchError(f"{method}: result is not an object: {str(result)[:200]}")

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification; the server must answer 202."""
        payload: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            payload["params"] = params
        resp = await self.post(payload)
        if resp.status != 202:
            raise BenchError(f"{method}: expected HTTP 202, got {resp.status} {resp.raw_body[:200]!r}")

    async def initialize(self) -> dict[str, Any]:
        """Run the handshake: initialize, then notifications/initialized."""
        result = await self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": self.capabilities,
                "clientInfo": {"name": "mcp-bench", "version": "1.0"},
            },
        )
        if result.get("protocolVersion") != PROTOCOL_VERSION:
            raise BenchError(f"negotiated {result.get('protocolVersion')!r}, wanted {PROTOCOL_VERSION}")
        self.protocol_version = result["protocolVersion"]
        await self.notify("notifications/initialized")
        return result

    async def call_echo(self, message: str) -> None:
        """Call `echo` and check it echoed."""
        result = await self.request("tools/call", {"name": "echo", "arguments": {"message": message}})
        if result.get("isError"):
            raise BenchError(f"echo returned isError: {result.get('content')}")
        content = result.get("content") or []
        if not content or content[0].get("text") != message:
            raise BenchError(f"echo returned {content!r}")
        structured = result.get("structuredContent")
        if structured is not None and structured.get("echo") != message:
            raise BenchError(f"echo structuredContent {structured!r}")

    async def discover(self) -> dict[str, Any]:
        """server/discover (2026-07-28 only): check it names the modern revision and capabilities."""
        result = await self.request("server/discover", {})
        if MODERN_VERSION not in (result.get("supportedVersions") or []):
            raise BenchError(f"server/discover without {MODERN_VERSION}: {str(result)[:200]}")
        if not isinstance(result.get("capabilities"), dict):
            raise BenchError(f"server/discover without capabilities: {str(result)[:200]}")
        return result

    async def list_tools(self, cursor: str | None = None) -> dict[str, Any]:
        """Fetch one page of tools/list and check its shape."""
        result = await self.request("tools/list", {"cursor": cursor} if cursor else {})
        if not isinstance(result.get("tools"), list):
            raise BenchError(f"tools/list without a tools array: {str(result)[:200]}")
        return result

    async def delete_session(self) -> None:
        """End the session (best effort)."""
        if self._writer is None:
            await self._connect()
        assert self._reader is not None and self._writer is not None
        self._writer.write(self._head("DELETE", None, "application/json, text/event-stream"))
        try:
            await asyncio.wait_for(self._read_response(None), 5)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, OSError, BenchError):
            await self.close()


class SseStream:
    """A response held open on its own connection, its SSE messages kept as they arrive.

    The base of `GetStream` and `ListenStream`, so the two stream kinds read SSE the same way: one
    pump, with `_on_message` the per-message hook. `got` is set when a message whose method is
    `want_method` arrives.
    """

    def __init__(self, want_method: str | None = None) -> None:
        self.messages: list[dict[str, Any]] = []
        self.got = asyncio.Event()
        self.want_method = want_method
        self.error: str | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        raise NotImplementedError

    async def _start(
        self, host: str, port: int, request: bytes
    ) -> tuple[asyncio.StreamReader, int, dict[str, str]]:
        """Send `request` on a new connection and read the response head; start the pump when the
        answer is 200 text/event-stream (else `_task` stays None and the caller says why)."""
        reader, self._writer = await asyncio.open_connection(host, port, limit=1 << 20)
        self._writer.write(request)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
        status, headers = _parse_head(head)
        if status == 200 and headers.get("content-type", "").startswith("text/event-stream"):
            self._task = asyncio.create_task(self._pump(reader, headers))
        return reader, status, headers

    async def _pump(self, reader: asyncio.StreamReader, headers: dict[str, str]) -> None:
        body = BodyReader(reader, headers)
        parser = SseParser()
        try:
            while True:
                piece = await body.next_piece()
                if not piece:
                    self.error = "stream ended"
                    return
                for _event_id, data in parser.feed(piece):
                    msg = json.loads(data)
                    self.messages.append(msg)
                    if not self._on_message(msg):
                        return
        except (asyncio.IncompleteReadError, ConnectionError, OSError, ValueError) as exc:
            self.error = f"{type(exc).__name__}: {exc}"

    def _on_message(self, msg: dict[str, Any]) -> bool:
        """Note one message; return False to stop reading (with `error` saying why)."""
        if self.want_method and msg.get("method") == self.want_method:
            self.got.set()
        return True

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._writer is not None:
            self._writer.close()


class GetStream(SseStream):
    """A GET SSE stream for an existing session, on its own connection, counting messages."""

    def __init__(self, client: McpClient, want_method: str | None = None) -> None:
        super().__init__(want_method)
        self.client = client
        self.status: int | None = None

    async def open(self) -> None:
        """Open the stream and wait for the response head (200 + text/event-stream)."""
        c = self.client
        _reader, self.status, headers = await self._start(
            c.host, c.port, c._head("GET", None, "text/event-stream")
        )
        if self._task is None:
            raise BenchError(f"GET stream: HTTP {self.status} {headers.get('content-type')}")


def header_value(value: str) -> str:
    """A value as a header may carry it: verbatim when plain ASCII, else the base64 sentinel."""
    if value.isascii() and value.isprintable() and value == value.strip():
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


def modern_headers(method: str, params: dict[str, Any] | None) -> dict[str, str]:
    """The request metadata headers of a 2026-07-28 POST, mirroring its body."""
    headers = {"MCP-Protocol-Version": MODERN_VERSION, "Mcp-Method": method}
    key = NAME_BEARING.get(method)
    if key is not None and params is not None and isinstance(params.get(key), str):
        headers["Mcp-Name"] = header_value(params[key])
    return headers


class ModernClient(McpClient):
    """One simulated client on the 2026-07-28 wire: a keep-alive connection, no session.

    Every request carries the `_meta` envelope and the request metadata headers; every result must
    say `resultType: "complete"`. `initialize` and `delete_session` are no-ops so the load loops
    drive both wires alike.
    """

    wire = "modern"

    async def initialize(self) -> dict[str, Any]:
        return {}

    async def delete_session(self) -> None:
        return None

    def _params(self, params: dict[str, Any] | None) -> dict[str, Any] | None:
        return {**(params or {}), "_meta": MODERN_META}

    def _request_headers(self, method: str, params: dict[str, Any] | None) -> dict[str, str] | None:
        return modern_headers(method, params)

    def _check_result(self, method: str, result: Any) -> None:
        super()._check_result(method, result)
        if result.get("resultType") != "complete":
            raise BenchError(f"{method}: resultType {result.get('resultType')!r}, wanted 'complete'")


class ListenStream(SseStream):
    """A `subscriptions/listen` POST on its own connection, its SSE answer held open and counted.

    `open()` returns once the stream's first event, `notifications/subscriptions/acknowledged`, has
    arrived; `got` is set when a message with `want_method` arrives after it.
    """

    def __init__(
        self, host: str, port: int, path: str, request_id: int = 1, want_method: str | None = None
    ) -> None:
        super().__init__(want_method)
        self.host, self.port, self.path, self.request_id = host, port, path, request_id
        self.acked = asyncio.Event()

    async def open(self) -> None:
        params = {"notifications": {"toolsListChanged": True}, "_meta": MODERN_META}
        payload = {
            "jsonrpc": "2.0",
            "id": self.request_id,
            "method": "subscriptions/listen",
            "params": params,
        }
        body = json.dumps(payload, separators=(",", ":")).encode()
        lines = [
            f"POST {self.path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            "Accept: application/json, text/event-stream",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            *(f"{k}: {v}" for k, v in modern_headers("subscriptions/listen", params).items()),
        ]
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
        reader, status, headers = await self._start(self.host, self.port, request)
        if self._task is None:
            rest = b""
            with contextlib.suppress(Exception):
                rest = await asyncio.wait_for(reader.read(300), 1)
            raise BenchError(f"listen: HTTP {status} {headers.get('content-type')} {rest[:200]!r}")
        acked = asyncio.create_task(self.acked.wait())
        await asyncio.wait({acked, self._task}, timeout=REQUEST_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
        acked.cancel()
        if not self.acked.is_set():
            raise BenchError(f"listen: no acknowledgment ({self.error or 'timeout'})")

    def _on_message(self, msg: dict[str, Any]) -> bool:
        if self.acked.is_set():
            return super()._on_message(msg)
        method = msg.get("method")
        if method != "notifications/subscriptions/acknowledged":
            self.error = f"first event {method or msg!r}, not the acknowledgment"[:200]
            return False
        self.acked.set()
        return True


# ---------------------------------------------------------------------------------------------
# Measurement


@dataclass
class PhaseResult:
    name: str
    concurrency: int
    requests: int
    seconds: float
    latencies: list[float]
    errors: collections.Counter[str]
    loadgen_cpu: float  # fraction of one core used by this process during the window
    server_cpu: float | None  # fraction of one core used by the server process during the window
    other_cpu: float | None = None  # cores used by everything else on the machine during the window

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def pct(self, q: float) -> float:
        """Latency percentile in milliseconds (nearest rank)."""
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        idx = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
        return ordered[idx] * 1000.0


def proc_cpu_seconds(pid: int) -> float | None:
    """User+system CPU seconds of a process from /proc (None if unavailable)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        # utime and stime are fields 14 and 15 (1-based) of the whole line; fields[0] is field 3.
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def tree_cpu_seconds(pid: int) -> float | None:
    """CPU seconds of a process and its live descendants (a prefork Celery worker and its children)."""
    own = proc_cpu_seconds(pid)
    if own is None:
        return None
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(c) for c in f.read().split()]
    except (OSError, ValueError):
        children = []
    return own + sum(tree_cpu_seconds(c) or 0.0 for c in children)


def machine_busy_seconds() -> float | None:
    """CPU seconds all cores spent not idle since boot, from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    # guest time is already counted in user time.
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def merge(results: list[PhaseResult]) -> PhaseResult:
    """Combine rounds of the same phase: total requests over total time, all latencies."""
    first = results[0]
    seconds = sum(r.seconds for r in results)
    errors: collections.Counter[str] = collections.Counter()
    latencies: list[float] = []
    for r in results:
        errors.update(r.errors)
        latencies.extend(r.latencies)

    def weighted(attr: str) -> float | None:
        vals = [(getattr(r, attr), r.seconds) for r in results]
        if any(v is None for v, _ in vals) or not seconds:
            return None
        return sum(v * w for v, w in vals) / seconds

    return PhaseResult(
        first.name,
        first.concurrency,
        sum(r.requests for r in results),
        seconds,
        latencies,
        errors,
        weighted("loadgen_cpu") or 0.0,
        weighted("server_cpu"),
        weighted("other_cpu"),
    )


def proc_rss_kib(pid: int) -> int | None:
    """VmRSS of a process in KiB from /proc/<pid>/status."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


async def run_phase(
    name: str,
    clients: list[McpClient],
    op: Callable[[McpClient, int], Awaitable[None]],
    duration: float,
    warmup: float,
    server_pid: int | None = None,
    max_requests: int | None = None,
) -> PhaseResult:
    """Drive `op` in a closed loop on every client; record only the window after the warm-up."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    rec_start = start + warmup
    rec_end = rec_start + duration
    latencies: list[float] = []
    errors: collections.Counter[str] = collections.Counter()
    counted = 0
    marks: dict[str, float | None] = {}

    async def mark_start() -> None:
        await asyncio.sleep(max(0.0, rec_start - loop.time()))
        marks["cpu0"] = time.process_time()
        marks["srv0"] = proc_cpu_seconds(server_pid) if server_pid else None
        marks["all0"] = machine_busy_seconds()
        marks["t0"] = time.perf_counter()

    async def worker(client: McpClient, wid: int) -> None:
        nonlocal counted
        seq = 0
        while True:
            now = loop.time()
            if now >= rec_end or (max_requests is not None and counted >= max_requests):
                return
            seq += 1
            t0 = time.perf_counter()
            try:
                await op(client, wid * 1_000_000 + seq)
                ok = True
            except BenchError as exc:
                ok = False
                err = str(exc)[:300]
            t1 = time.perf_counter()
            if now >= rec_start and loop.time() <= rec_end:
                if ok:
                    latencies.append(t1 - t0)
                    counted += 1
                else:
                    errors[err] += 1
            elif not ok:
                errors[f"(warm-up) {err}"] += 1

    marker = asyncio.create_task(mark_start())
    await asyncio.gather(*(worker(c, i) for i, c in enumerate(clients)))
    await marker
    t_end = time.perf_counter()
    window = t_end - (marks["t0"] or t_end)
    cpu = (time.process_time() - (marks["cpu0"] or 0.0)) / window if window > 0 else 0.0
    srv_cpu = None
    if server_pid and marks.get("srv0") is not None:
        now_srv = proc_cpu_seconds(server_pid)
        if now_srv is not None:
            srv_cpu = (now_srv - marks["srv0"]) / window  # type: ignore[operator]
    other = None
    busy = machine_busy_seconds()
    if busy is not None and marks.get("all0") is not None and window > 0:
        other = max(0.0, (busy - marks["all0"]) / window - cpu - (srv_cpu or 0.0))  # type: ignore[operator]
    return PhaseResult(name, len(clients), counted, window, latencies, errors, cpu, srv_cpu, other)


async def make_clients(
    n: int,
    host: str,
    port: int,
    path: str,
    parallel: int = 32,
    extra_headers: dict[str, str] | None = None,
    wire: str = "legacy",
) -> list[McpClient]:
    """Create and initialize `n` clients (one session each), `parallel` handshakes at a time.

    On the modern wire there is no handshake: the clients connect on their first request.
    """
    sem = asyncio.Semaphore(parallel)
    cls = ModernClient if wire == "modern" else McpClient
    clients = [cls(host, port, path, extra_headers) for _ in range(n)]

    async def init(c: McpClient) -> None:
        async with sem:
            await c.initialize()

    await asyncio.gather(*(init(c) for c in clients))
    return clients
