"""Daphne killed with SIGKILL while clients stream: they resume on the other process with Last-Event-ID
and get every event once, and each call's end once (AMB-88).

Two Daphne processes on the same Redis and PostgreSQL. A's process runs the calls: SIGKILL ends them
with it, so no result can ever come; what the platform owes the client is every event A stored, once,
then one error response saying the call was lost (B writes it, once, when A's sign of life is gone).
The official SDK client reaches the servers through a failover proxy (what a load balancer does:
a new connection goes to the first process that accepts it), so its own reconnection, with
Last-Event-ID, lands on B. Raw httpx clients speak to A and B directly: they see the wire (event
ids, a second resume replaying the same events), which the SDK hides by design.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from mcp import MCPError

from mcp_app.streams.events import LOST_MESSAGE
from tests.e2e.helpers import REQUEST_SECONDS, Inbox, mcp_client, open_legacy_session, wait_until
from tests.e2e.servers import DaphneServer, counting_tenant, django_shell, start_daphne

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.services(reason="the surviving Daphne reads the killed one's events from Redis"),
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
]

STEPS, DELAY = 12, 0.4  # long enough that A dies mid-call
CALL_ID = 7


@pytest.fixture
def doomed(e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaphneServer]:
    # A short retry hint: the SDK reconnects that soon after the stream breaks.
    daphne = start_daphne(
        "daphne-doomed", {**e2e_env, "MCP_SSE_RETRY_MS": "200"}, tmp_path_factory.mktemp("kill")
    )
    yield daphne
    daphne.stop()


class FailoverProxy:
    """Each new TCP connection goes to the first upstream that accepts it; bytes pass unchanged."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> FailoverProxy:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.sockets[0].getsockname()[1]

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for port in self.ports:
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
                break
            except OSError:
                continue
        else:
            writer.close()
            return

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except OSError:
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))


def edit_tool(env: dict[str, str], slug: str) -> None:
    """An edit every stream of the tenant hears of (tools list_changed, through Redis)."""
    django_shell(
        env,
        "from mcp_app.models import Tool\n"
        f"tool = Tool.objects.get(tenant__slug={slug!r}, name='poke')\n"
        "tool.description = tool.description + '.'\ntool.save()\n",
    )


class SseReader:
    """Reads an SSE response into (event id, message) pairs until it ends or breaks."""

    def __init__(self) -> None:
        self.events: list[tuple[str | None, dict[str, Any]]] = []
        self.ids: list[str] = []  # every event id seen, the priming event's included
        self.buffer = ""
        self.ended = False

    async def read(self, response: httpx.Response) -> None:
        try:
            with contextlib.suppress(httpx.HTTPError):
                async for chunk in response.aiter_text():
                    self.buffer += chunk.replace("\r\n", "\n")
                    while "\n\n" in self.buffer:
                        block, self.buffer = self.buffer.split("\n\n", 1)
                        self._take(block)
        finally:
            self.ended = True

    def _take(self, block: str) -> None:
        event_id, data = None, []
        for line in block.split("\n"):
            if line.startswith("id:"):
                event_id = line[3:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if event_id:
            self.ids.append(event_id)
        if data and "".join(data).strip():
            self.events.append((event_id, json.loads("\n".join(data))))

    def progress(self) -> list[float]:
        return [
            m["params"]["progress"] for _, m in self.events if m.get("method") == "notifications/progress"
        ]

    def last_id(self) -> str:
        return self.ids[-1]


async def stream_into(http: httpx.AsyncClient, reader: SseReader, method: str, url: str, **kw: Any) -> None:
    async with http.stream(method, url, **kw) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        await reader.read(response)


def count_call(steps: int = STEPS) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": CALL_ID,
        "method": "tools/call",
        "params": {
            "name": "count",
            "arguments": {"n": steps, "delay": DELAY},
            "_meta": {"progressToken": "k"},
        },
    }


def assert_each_once_then_lost(events: list[tuple[str | None, dict[str, Any]]]) -> None:
    ids = [event_id for event_id, _ in events]
    assert all(ids) and len(set(ids)) == len(ids), ids  # every event stored, none twice
    progress = [m["params"]["progress"] for _, m in events if m.get("method") == "notifications/progress"]
    assert progress == list(range(1, len(progress) + 1)), progress  # no gap, no duplicate
    assert 3 <= len(progress) < STEPS, progress  # A died mid-call
    answers = [m for _, m in events if "method" not in m]
    assert len(answers) == 1 and answers[0] == events[-1][1], answers  # the call's end, once, last
    assert answers[0]["id"] == CALL_ID and answers[0]["error"]["message"] == LOST_MESSAGE


async def test_sigkill_mid_stream_clients_resume_on_the_other_daphne_and_get_every_event_once(
    doomed: DaphneServer, server_b: DaphneServer, e2e_env: dict[str, str]
) -> None:
    slug = counting_tenant(e2e_env, "kill")
    on_a, on_b = doomed.mcp_url(slug), server_b.mcp_url(slug)
    inbox = Inbox()
    sdk_progress: list[float] = []
    sdk_outcome: dict[str, Any] = {}

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        sdk_progress.append(value)

    async with (
        FailoverProxy([doomed.port, server_b.port]) as proxy,
        httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_SECONDS, read=60.0)) as http,
        mcp_client(f"http://127.0.0.1:{proxy.port}/t/{slug}/mcp", inbox) as sdk,
        anyio.create_task_group() as streams,
    ):
        await inbox.wait_for_get_stream()
        headers = await open_legacy_session(http, on_a)  # 2025-11-25: every stream starts with an id
        get_a, post_a = SseReader(), SseReader()
        streams.start_soon(
            lambda: stream_into(http, get_a, "GET", on_a, headers={**headers, "Accept": "text/event-stream"})
        )
        await wait_until(lambda: get_a.ids, "the raw GET stream's priming event")
        # Before the kill: a change reaches both GET streams (raw and SDK) on A.
        await anyio.to_thread.run_sync(edit_tool, e2e_env, slug)
        await wait_until(lambda: get_a.events, "list_changed on the raw GET stream")
        await wait_until(lambda: inbox.find("notifications/tools/list_changed"), "list_changed on the SDK's")

        async def sdk_call() -> None:
            try:
                sdk_outcome["result"] = await sdk.call_tool(
                    "count", {"n": STEPS, "delay": DELAY}, progress_callback=on_progress
                )
            except MCPError as exc:
                sdk_outcome["error"] = exc

        streams.start_soon(sdk_call)
        streams.start_soon(
            lambda: stream_into(http, post_a, "POST", on_a, headers=headers, json=count_call())
        )
        await wait_until(lambda: len(post_a.progress()) >= 3 and len(sdk_progress) >= 3, "three steps each")

        doomed.proc.send_signal(signal.SIGKILL)
        await anyio.to_thread.run_sync(doomed.proc.wait)

        # The raw POST stream resumes on B: the events A stored after the last one seen, then the end.
        await wait_until(lambda: post_a.ended, "A's POST stream to break")
        seen = list(post_a.events)
        resumed = SseReader()
        resume_headers = {**headers, "Accept": "text/event-stream", "Last-Event-ID": seen[-1][0] or ""}
        await stream_into(http, resumed, "GET", on_b, headers=resume_headers)
        assert_each_once_then_lost(seen + resumed.events)
        again = SseReader()
        await stream_into(http, again, "GET", on_b, headers=resume_headers)
        assert again.events == resumed.events  # the lost call's error was stored once, not per resume

        # The raw GET stream resumes on B (A's dead stream still holds the session's slot: taken over).
        get_b = SseReader()
        streams.start_soon(
            lambda: stream_into(
                http,
                get_b,
                "GET",
                on_b,
                headers={**headers, "Accept": "text/event-stream", "Last-Event-ID": get_a.last_id()},
            )
        )
        await wait_until(lambda: get_b.ids, "the resumed GET stream on B")
        with anyio.fail_after(REQUEST_SECONDS):
            while "error" not in sdk_outcome and "result" not in sdk_outcome:
                await anyio.sleep(0.05)
        await anyio.to_thread.run_sync(edit_tool, e2e_env, slug)
        await wait_until(lambda: get_b.events, "list_changed on the resumed GET stream")
        await wait_until(
            lambda: (
                len([n for n in inbox.notifications if n.method == "notifications/tools/list_changed"]) >= 2
            ),
            "a second list_changed on the SDK's resumed GET stream",
        )
        await anyio.sleep(0.5)  # anything sent twice would be here by now
        streams.cancel_scope.cancel()

    # The SDK: every step once, then the call's end once (a lost call: an error, never a hang).
    assert sdk_progress == list(range(1, len(sdk_progress) + 1)) and 3 <= len(sdk_progress) < STEPS, (
        sdk_progress
    )
    assert "result" not in sdk_outcome and LOST_MESSAGE in str(sdk_outcome["error"])
    assert len([n for n in inbox.notifications if n.method == "notifications/tools/list_changed"]) == 2
    # The raw GET stream: one list_changed before the kill, one after, each with its own id.
    changes = get_a.events + get_b.events
    assert [m["method"] for _, m in changes] == ["notifications/tools/list_changed"] * 2, changes
    assert len({event_id for event_id, _ in changes}) == 2
