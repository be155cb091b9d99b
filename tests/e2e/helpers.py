"""Client-side tools for the end-to-end tests: an MCP client with an inbox, an admin browser, raw JSON-RPC."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlencode

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitResult

# Upper bound for one MCP request; a hung server fails the test instead of the suite.
REQUEST_SECONDS = 20.0
# Upper bound for a server-initiated notification to arrive.
NOTIFY_SECONDS = 15.0
POLL_SECONDS = 0.05

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass
class Upstream:
    """What the `fetch_json` tool's upstream received (filled from the server thread)."""

    url: str
    # Where the seeded stream_count posts: a reply of two events (handlers/http_stream.py).
    stream_url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, path: str, headers: dict[str, str], body: bytes) -> None:
        with self._lock:
            self.requests.append({"path": path, "headers": headers, "body": body})

    def reply_for(self, body: bytes) -> bytes:
        try:
            received: Any = json.loads(body or b"null")
        except ValueError:
            received = body.decode("utf-8", "replace")
        return json.dumps({"upstream": "e2e", "received": received}).encode()


async def wait_until(predicate: Callable[[], Any], what: str, timeout: float = NOTIFY_SECONDS) -> Any:
    """Poll `predicate` until it returns something truthy; fail the test after `timeout` seconds."""
    try:
        with anyio.fail_after(timeout):
            while not (found := predicate()):
                await anyio.sleep(POLL_SECONDS)
            return found
    except TimeoutError:
        pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}", pytrace=False)


def modern_request(
    method: str, params: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """A 2026-07-28 request as a hostile or minimal client sends it with httpx: (body, headers)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = {**MCP_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    if method == "tools/call" and params is not None:
        headers["Mcp-Name"] = params["name"]
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {}), "_meta": meta}}, headers


def wait_until_served(
    mcp_url: str, tool: str, present: bool = True, timeout: float = 15.0, kind: str = "tools"
) -> None:
    """Wait until a tool (or prompt: kind="prompts") added or removed by another process is listed, or not.

    With Redis the change is pushed at once; with the embedded defaults a process notices another
    process's edit at its next database recheck (a few seconds), so a test that edits from outside waits.
    """
    body, headers = modern_request(f"{kind}/list")
    deadline = time.monotonic() + timeout
    while True:
        listed = {
            t["name"]
            for t in httpx.post(mcp_url, json=body, headers=headers, timeout=5).json()["result"][kind]
        }
        if (tool in listed) == present:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"the server did not {'list' if present else 'drop'} {tool!r} within {timeout:.0f} s")
        time.sleep(POLL_SECONDS)


class Reports:
    """The progress and log messages one SDK client was sent (its `logging_callback`, a `progress_callback`)."""

    def __init__(self) -> None:
        self.logs: list[Any] = []
        self.progress: list[float] = []

    async def on_log(self, params: Any) -> None:
        self.logs.append(params)

    async def on_progress(self, value: float, total: float | None, message: str | None) -> None:
        self.progress.append(value)


class Inbox:
    """Everything the server pushed to one SDK client: notifications, log messages, GET stream state."""

    def __init__(self) -> None:
        self.notifications: list[Any] = []
        self.logs: list[Any] = []
        self.errors: list[Exception] = []
        self.get_stream_open = anyio.Event()

    async def on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.errors.append(message)
        else:
            self.notifications.append(message)

    async def on_log(self, params: Any) -> None:
        self.logs.append(params)

    async def on_response(self, response: httpx2.Response) -> None:
        if response.request.method == "GET" and response.status_code == 200:
            self.get_stream_open.set()

    def methods(self) -> list[str]:
        return [n.method for n in self.notifications]

    def find(self, method: str, predicate: Callable[[Any], bool] = lambda n: True) -> Any:
        return next((n for n in self.notifications if n.method == method and predicate(n)), None)

    async def wait_for(self, method: str, predicate: Callable[[Any], bool] = lambda n: True) -> Any:
        return await wait_until(
            lambda: self.find(method, predicate), f"{method} (received so far: {self.methods()})"
        )

    async def edit_until(
        self, method: str, edit: Callable[[], Awaitable[None]], attempts: int = 3, seconds_each: float = 5.0
    ) -> Any:
        """Make `edit` until notification `method` arrives; fail after `attempts` bounded waits.

        An edit that lands before the server has subscribed the client's GET stream (the SDK opens
        it in the background) is legitimately not delivered, so a later edit may be needed.
        """
        for _ in range(attempts):
            await edit()
            with anyio.move_on_after(seconds_each):
                while not (found := self.find(method)):
                    await anyio.sleep(POLL_SECONDS)
                return found
        pytest.fail(
            f"no {method} after {attempts} edits, {seconds_each:.0f} s each (received: {self.methods()})",
            pytrace=False,
        )

    async def wait_for_get_stream(self) -> None:
        # The SDK opens its GET stream in the background after notifications/initialized.
        try:
            with anyio.fail_after(NOTIFY_SECONDS):
                await self.get_stream_open.wait()
        except TimeoutError:
            pytest.fail("the client's GET stream was not open (HTTP 200) within the timeout", pytrace=False)


@asynccontextmanager
async def mcp_client(url: str, inbox: Inbox | None = None, mode: str = "legacy") -> AsyncIterator[Client]:
    """Connect the official SDK client: `legacy` (initialize, a session) or `auto` (2026-07-28 here)."""
    inbox = inbox or Inbox()
    http = httpx2.AsyncClient(
        timeout=httpx2.Timeout(REQUEST_SECONDS, read=120.0), event_hooks={"response": [inbox.on_response]}
    )
    async with http:
        client = Client(
            streamable_http_client(url, http_client=http),
            mode=mode,
            message_handler=inbox.on_message,
            logging_callback=inbox.on_log,
            # Bounds every request, the initialize handshake included.
            read_timeout_seconds=REQUEST_SECONDS,
            # Every call must reach the server: the tests are about the server's answers.
            cache=None,
        )
        async with client:
            yield client


# --- raw JSON-RPC over Streamable HTTP ---------------------------------------------------------


async def greet_latencies(url: str, count: int, pace: float = 0.0) -> list[float]:
    """`count` sequential calls of a tenant's `greet` template tool ("Hello, {{ name }}!") through the SDK in
    auto mode (2026-07-28), after one to warm up, `pace` seconds apart: the other tenant's side of the
    isolation tests."""
    taken: list[float] = []
    async with mcp_client(url, mode="auto") as client:
        await client.call_tool("greet", {"name": "warm"})
        for i in range(count):
            started = time.perf_counter()
            result = await client.call_tool("greet", {"name": str(i)})
            taken.append(time.perf_counter() - started)
            assert result.content[0].text == f"Hello, {i}!"
            await asyncio.sleep(pace)
    return taken


def parse_sse(text: str) -> list[dict[str, Any]]:
    """Return the JSON payloads of the `message` events in an SSE body."""
    messages: list[dict[str, Any]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        event, data = "message", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data and event == "message" and "".join(data).strip():
            messages.append(json.loads("\n".join(data)))
    return messages


def rpc_reply(response: httpx.Response, request_id: int | str) -> dict[str, Any]:
    """Return the JSON-RPC response to `request_id` from a JSON or SSE answer."""
    assert response.status_code == 200, f"HTTP {response.status_code}: {response.text[:500]}"
    content_type = response.headers.get("content-type", "")
    if content_type.startswith("application/json"):
        messages = [response.json()]
    else:
        assert content_type.startswith("text/event-stream"), content_type
        messages = parse_sse(response.text)
    for message in messages:
        if message.get("id") == request_id and ("result" in message or "error" in message):
            return message
    raise AssertionError(f"no response to id {request_id!r} in {messages!r}")


INITIALIZE_PARAMS = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "e2e-raw", "version": "1.0"},
}


# --- the Django admin, driven over HTTP ------------------------------------------------------


class _FormFields(HTMLParser):
    """Collect what a browser would submit for the form with a given id."""

    def __init__(self, form_id: str) -> None:
        super().__init__(convert_charrefs=True)
        self.form_id = form_id
        self.found = False
        self.fields: list[tuple[str, str]] = []
        self._inside = False
        self._textarea: tuple[str, list[str]] | None = None
        self._select: dict[str, Any] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {key: value if value is not None else "" for key, value in attrs}
        if tag == "form":
            self._inside = a.get("id") == self.form_id
            self.found = self.found or self._inside
            return
        if not self._inside:
            return
        name = a.get("name")
        if tag == "input" and name and "disabled" not in a:
            kind = a.get("type", "text").lower()
            if kind in {"submit", "button", "image", "reset", "file"}:
                return
            if kind in {"checkbox", "radio"}:
                if "checked" in a:
                    self.fields.append((name, a.get("value") or "on"))
                return
            self.fields.append((name, a.get("value", "")))
        elif tag == "textarea" and name and "disabled" not in a:
            self._textarea = (name, [])
        elif tag == "select" and name and "disabled" not in a:
            self._select = {"name": name, "multiple": "multiple" in a, "selected": [], "first": None}
        elif tag == "option" and self._select is not None:
            value = a.get("value", "")
            if self._select["first"] is None:
                self._select["first"] = value
            if "selected" in a:
                self._select["selected"].append(value)

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._textarea[1].append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._inside = False
        elif tag == "textarea" and self._textarea is not None:
            name, parts = self._textarea
            # Browsers drop the newline Django puts right after <textarea>.
            self.fields.append((name, "".join(parts).removeprefix("\r\n").removeprefix("\n")))
            self._textarea = None
        elif tag == "select" and self._select is not None:
            chosen = self._select["selected"]
            if not chosen and not self._select["multiple"] and self._select["first"] is not None:
                chosen = [self._select["first"]]
            self.fields.extend((self._select["name"], value) for value in chosen)
            self._select = None


def form_fields(html: str, form_id: str) -> list[tuple[str, str]]:
    """Return the (name, value) pairs a browser would post for `<form id=form_id>`."""
    parser = _FormFields(form_id)
    parser.feed(html)
    assert parser.found, f"no <form id={form_id!r}> in the page"
    return parser.fields


class AdminBrowser:
    """A logged-in admin user, posting the admin's own forms with their CSRF tokens."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.http = httpx.AsyncClient(base_url=base_url, timeout=REQUEST_SECONDS, follow_redirects=False)

    async def __aenter__(self) -> AdminBrowser:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()

    async def login(self, username: str, password: str) -> None:
        page = await self.http.get("/admin/login/")
        assert page.status_code == 200, page.text[:500]
        fields = dict(form_fields(page.text, "login-form"))
        fields.update(username=username, password=password, next="/admin/")
        response = await self.http.post(
            "/admin/login/?next=/admin/", data=fields, headers={"Referer": f"{self.base_url}/admin/login/"}
        )
        assert response.status_code == 302, (
            f"admin login failed (HTTP {response.status_code}): {response.text[:2000]}"
        )

    async def change(
        self,
        path: str,
        form_id: str,
        updates: dict[str, str],
        button: tuple[str, str] = ("_publish", "Save and publish"),
    ) -> None:
        """Open a change form, replace some fields, and save it as a browser would (a definition's form:
        published, unless `button` is ("_save", "Save draft"))."""
        page = await self.http.get(path)
        assert page.status_code == 200, f"GET {path}: HTTP {page.status_code}: {page.text[:500]}"
        fields = [(name, value) for name, value in form_fields(page.text, form_id) if name not in updates]
        fields += [*updates.items(), button]
        # Encoded by hand: httpx's `data=` takes a dict, and a form may repeat a name (multi-selects).
        response = await self.http.post(
            path,
            content=urlencode(fields),
            headers={
                "Referer": f"{self.base_url}{path}",
                "Content-Type": "application/x-www-form-urlencoded",
            },
        )
        assert response.status_code == 302, (
            f"saving {path} was refused (HTTP {response.status_code}); errors: {_form_errors(response.text)}"
        )


def _form_errors(html: str) -> str:
    # Good enough to show Django's error lists in an assertion message.

    errors = re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', html, flags=re.S)
    return "; ".join(re.sub(r"<[^>]+>", " ", e).strip() for e in errors) or html[:2000]


async def open_legacy_session(
    http: httpx.AsyncClient,
    mcp_url: str,
    version: str = "2025-11-25",
    capabilities: dict[str, Any] | None = None,
) -> dict[str, str]:
    """initialize and notifications/initialized over raw HTTP; return the headers later requests carry."""
    params = {**INITIALIZE_PARAMS, "protocolVersion": version, "capabilities": capabilities or {}}
    init = await http.post(
        mcp_url,
        headers=MCP_HEADERS,
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params},
    )
    assert init.status_code == 200, init.text
    headers = {
        **MCP_HEADERS,
        "Mcp-Session-Id": init.headers["mcp-session-id"],
        "MCP-Protocol-Version": version,
    }
    note = await http.post(
        mcp_url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
    )
    assert note.status_code == 202
    return headers


async def answered_on_the_other_server(first_url: str, second_url: str, tool: str, name: str) -> str:
    """A legacy session calls `tool` on `first_url`; its elicitation is answered (`name`) by a POST to
    `second_url`, as when a load balancer sends the answer to another process. Returns the tool's text."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_SECONDS)) as http:
        headers = await open_legacy_session(http, first_url, capabilities={"elicitation": {}})
        call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": tool, "arguments": {}}}
        buffer = ""
        async with http.stream("POST", first_url, headers=headers, json=call) as response:
            chunks = response.aiter_text()
            async for chunk in chunks:
                buffer += chunk
                questions = [m for m in parse_sse(buffer) if m.get("method") == "elicitation/create"]
                if questions:
                    break
            answer = {
                "jsonrpc": "2.0",
                "id": questions[0]["id"],
                "result": {"action": "accept", "content": {"name": name}},
            }
            posted = await http.post(second_url, headers=headers, json=answer)
            assert posted.status_code == 202
            async for chunk in chunks:
                buffer += chunk
    final = [m for m in parse_sse(buffer) if m.get("id") == 5]
    assert final, buffer
    return final[0]["result"]["content"][0]["text"]


def sdk_client(url: str, mode: str, **callbacks: Any) -> Client:
    """The official SDK client as a person's app uses it (`mode` "legacy" or "auto"), bounded by the
    tests' request timeout and without its list cache, so every call reaches the server."""
    return Client(url, mode=mode, read_timeout_seconds=REQUEST_SECONDS, cache=None, **callbacks)  # type: ignore[arg-type]


async def call_answering_a_name(url: str, mode: str, tool: str, action: str) -> tuple[list[str], Any]:
    """Call `tool` (which asks for a name) with the SDK client whose person answers `action` (with "Ada"
    when accepting); returns the messages the person was shown and the call's result."""
    asked: list[str] = []

    async def person(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action=action, content={"name": "Ada"} if action == "accept" else None)

    async with sdk_client(url, mode, elicitation_callback=person) as client:
        result = await client.call_tool(tool, {"question": "Who are you?"})
    return asked, result
