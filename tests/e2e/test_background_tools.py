"""Background tools on a real Celery worker process, called by the official SDK client through Daphne.

The seeded `count_in_background` tool has execution "background": Daphne enqueues it on the Redis
broker, the worker runs it and its progress, log messages and result come back through the Redis
channel layer to the client's SSE response. A cancellation stops the work on the worker.
Without Redis (embedded defaults) the same tool runs inside Daphne; the first test covers both.
"""

from __future__ import annotations

import json
import re
import time

import anyio
import httpx
import pytest

from tests.e2e.helpers import INITIALIZE_PARAMS, MCP_HEADERS, REQUEST_SECONDS, Inbox, mcp_client, wait_until
from tests.e2e.servers import DaphneServer, ServerProcess

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

TOOL = "count_in_background"
NEEDS_WORKER = pytest.mark.services(
    reason="background tools run on a Celery worker, which needs the Redis broker"
)


def job_lines(worker: ServerProcess, outcome: str) -> list[str]:
    """The worker's log lines saying a count_in_background job ended with `outcome`."""
    pattern = re.compile(rf"job \S+ \(tool {TOOL}\) {outcome}")
    return [line for line in worker.read_log().splitlines() if pattern.search(line)]


async def test_a_background_tool_streams_progress_and_log_messages_and_runs_on_the_worker_when_there_is_one(
    server: DaphneServer, worker_if_any: ServerProcess | None
) -> None:
    inbox = Inbox()
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    finished_before = len(job_lines(worker_if_any, "finished")) if worker_if_any else 0
    async with mcp_client(server.mcp_url(), inbox) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert TOOL in tools
        await client.set_logging_level("info")
        result = await client.call_tool(TOOL, {"n": 4, "delay": 0.05}, progress_callback=on_progress)
    assert not result.is_error, result
    assert result.structured_content == {"count": 4}
    assert [value for value, _, _ in progress] == [1, 2, 3, 4]
    assert {total for _, total, _ in progress} == {4}
    assert [log.data for log in inbox.logs if log.logger == "count_slowly"] == [
        f"count {i} of 4" for i in range(1, 5)
    ]
    if worker_if_any is not None:  # it ran on the worker, not in Daphne
        await wait_until(
            lambda: len(job_lines(worker_if_any, "finished")) > finished_before, "the worker's log line"
        )


@NEEDS_WORKER
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_ut10_cancelling_from_the_sdk_stops_the_work_on_the_worker(
    server: DaphneServer, celery_worker: ServerProcess, mode: str
) -> None:
    """legacy: the SDK sends notifications/cancelled; auto (2026-07-28): it closes the call's stream."""
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    cancelled_before = len(job_lines(celery_worker, "stopped after"))
    async with mcp_client(server.mcp_url(), mode=mode) as client:
        started = time.monotonic()
        # Leaving the scope makes the SDK send notifications/cancelled for the call.
        with anyio.move_on_after(1.5):
            await client.call_tool(TOOL, {"n": 50, "delay": 0.1}, progress_callback=on_progress)
        assert progress, "no progress arrived before the cancellation"
        await wait_until(
            lambda: len(job_lines(celery_worker, "stopped after")) > cancelled_before,
            "the worker to stop the cancelled job",
        )
        assert time.monotonic() - started < 5.0 + 3.0  # well before the 5 s the count would take
        # The session goes on serving.
        echoed = await client.call_tool("echo", {"message": "still here"})
        assert echoed.structured_content == {"echo": "still here"}
    assert len(progress) < 50


@NEEDS_WORKER
async def test_ut10_a_background_call_on_one_daphne_is_cancelled_through_the_other_and_gets_no_response(
    server: DaphneServer, server_b: DaphneServer, celery_worker: ServerProcess
) -> None:
    cancelled_before = len(job_lines(celery_worker, "stopped after"))
    async with httpx.AsyncClient(timeout=REQUEST_SECONDS) as http:
        init = await http.post(
            server.mcp_url(),
            headers=MCP_HEADERS,
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE_PARAMS},
        )
        session = {
            **MCP_HEADERS,
            "Mcp-Session-Id": init.headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-06-18",
        }
        await http.post(
            server.mcp_url(), headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        call = {
            "jsonrpc": "2.0",
            "id": "bg-1",
            "method": "tools/call",
            "params": {"name": TOOL, "arguments": {"n": 50, "delay": 0.1}, "_meta": {"progressToken": "t"}},
        }
        received: list[dict] = []
        async with http.stream("POST", server.mcp_url(), headers=session, json=call) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            async for line in response.aiter_lines():
                if line.startswith("data:") and line[5:].strip():
                    received.append(json.loads(line[5:]))
                    if len(received) == 2:
                        # Sent to the *other* process: it reaches this one through the channel layer.
                        cancel = {
                            "jsonrpc": "2.0",
                            "method": "notifications/cancelled",
                            "params": {"requestId": "bg-1", "reason": "user pressed stop"},
                        }
                        answer = await http.post(server_b.mcp_url(), headers=session, json=cancel)
                        assert answer.status_code == 202
    # The stream ended after the cancellation with notifications only: no response to bg-1.
    assert received and all("id" not in message for message in received), received
    methods = {message["method"] for message in received}
    assert methods <= {"notifications/progress", "notifications/message"}, methods
    assert len([m for m in received if m["method"] == "notifications/progress"]) < 50
    await wait_until(
        lambda: len(job_lines(celery_worker, "stopped after")) > cancelled_before,
        "the worker to stop the job cancelled through the other Daphne",
    )
