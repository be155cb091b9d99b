"""Upstreams on the 2024-11-05 HTTP+SSE transport (AMB-186): the SDK's SSE server, reached by its SSE client."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_app import federation
from mcp_app.federation import SSE, UpstreamUnavailable, call_tool, discover
from mcp_app.federation.questions import Asking
from tests.federation.support import target_for, upstream_sees


def sse_target(server: Any, **options: object) -> federation.Target:
    return target_for(server, transport=SSE, **options)


async def test_discover_and_call_over_http_sse(sse_upstream):
    target = sse_target(sse_upstream)

    offering = await discover(target)
    result = await call_tool(target, "echo", {"message": "over sse"})

    assert {tool["name"] for tool in offering.tools} >= {"echo", "slow_count", "hang"}
    assert offering.instructions == "A test upstream."
    assert result["structuredContent"] == {"echo": "over sse"}


async def test_progress_and_logs_reach_the_one_call_running(sse_upstream):
    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[tuple[str, Any, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def on_log(level: str, data: Any, logger: str | None) -> None:
        logs.append((level, data, logger))

    result = await call_tool(
        sse_target(sse_upstream),
        "slow_count",
        {"n": 3, "delay": 0.01},
        on_progress=on_progress,
        on_log=on_log,
    )

    assert result["content"][0]["text"] == "counted to 3"
    assert [p[0] for p in progress] == [1, 2, 3]
    assert ("info", "counted 3", "counter") in logs


async def test_a_question_reaches_the_one_call_running(sse_upstream):
    asked: list[dict[str, Any]] = []

    async def ask(requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        asked.append(requests)
        return {"q1": {"action": "accept", "content": {"name": "Ada"}}}

    result = await call_tool(sse_target(sse_upstream), "ask_name", {}, asking=Asking(ask=ask))

    assert result["content"][0]["text"] == "Hello, Ada!"
    assert asked[0]["q1"]["method"] == "elicitation/create"


async def test_cancelling_the_caller_cancels_the_upstream_call(sse_upstream):
    target = sse_target(sse_upstream)
    call = asyncio.create_task(call_tool(target, "hang", {"run": "sse-cancel"}))
    await upstream_sees(sse_upstream, "methods", "tools/call")
    await asyncio.sleep(0.2)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call

    await upstream_sees(sse_upstream, "cancelled", "sse-cancel")
    result = await call_tool(target, "echo", {"message": "after"})
    assert result["structuredContent"] == {"echo": "after"}


async def test_one_session_serves_every_call_of_its_key(start_upstream):
    server = start_upstream(sse=True)
    target = sse_target(server)

    await discover(target)
    await asyncio.gather(*(call_tool(target, "echo", {"message": str(i)}) for i in range(5)))
    await call_tool(target, "add", {"a": 1, "b": 2})

    stats = server.stats()
    assert stats["methods"]["initialize"] == 1
    assert stats["streams"] == 1


async def test_the_next_call_after_an_upstream_restart_opens_a_new_session(start_upstream):
    server = start_upstream(sse=True)
    target = sse_target(server)
    assert (await call_tool(target, "echo", {"message": "before"}))["structuredContent"] == {"echo": "before"}

    # In a thread: the loop meanwhile sees the old stream end, as a serving process does.
    await asyncio.to_thread(server.restart)
    result = await call_tool(target, "echo", {"message": "after"})

    assert result["structuredContent"] == {"echo": "after"}
    assert server.stats()["methods"]["initialize"] == 1  # the new process: one new session


async def test_a_message_endpoint_on_another_origin_is_refused(start_upstream):
    server = start_upstream(sse=True, cross_origin=True)

    with pytest.raises(UpstreamUnavailable) as caught:
        await asyncio.wait_for(call_tool(sse_target(server, timeout_seconds=5.0), "echo", {"message": "x"}), 4)

    assert "message endpoint is on another origin (http://localhost)" in caught.value.message
    assert server.stats()["methods"] == {}


async def test_a_message_past_the_limit_on_the_stream_is_refused_with_words_and_the_next_call_works(
    start_upstream, settings
):
    settings.MCP_UPSTREAM_MAX_MESSAGE_BYTES = 64 * 1024
    server = start_upstream(sse=True)
    target = sse_target(server)

    with pytest.raises(federation.UpstreamError) as refused:
        await call_tool(target, "echo", {"message": "x" * 100_000})

    assert refused.value.message == (
        f"Upstream {target.label} sent a message larger than 65536 bytes; it was not read."
    )
    result = await call_tool(target, "echo", {"message": "small"})
    assert result["structuredContent"] == {"echo": "small"}
    assert server.stats()["streams"] == 2
