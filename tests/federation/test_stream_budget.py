"""Streams no one call owns have a budget of messages too (AMB-195): a legacy session's GET stream, an
HTTP+SSE session's one stream (which carries every call's messages) and a change watch's stream. A
flood there is cut before the SDK parses it, and the upstream pauses as after a flooded call (AMB-188).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_app.federation import SSE, UpstreamError, UpstreamUnavailable, breaker, call_tool
from mcp_app.federation.change_stream import watch
from tests.federation.support import target_for

BURST, PER_SECOND = 40, 5


@pytest.fixture(autouse=True)
def small_budget(settings):
    settings.MCP_UPSTREAM_MESSAGE_BURST, settings.MCP_UPSTREAM_MESSAGES_PER_SECOND = BURST, PER_SECOND
    settings.MCP_UPSTREAM_BREAKER_SECONDS = 30


async def paused(target: Any, seconds: float = 5.0) -> None:
    """Wait (bounded) until the upstream's breaker is open."""
    async with asyncio.timeout(seconds):
        while breaker.state(target.upstream_key) != "open":
            await asyncio.sleep(0.02)


async def test_an_http_sse_stream_flooded_ends_its_call_in_words_and_pauses_the_upstream(sse_upstream):
    target = target_for(sse_upstream, transport=SSE)
    heard: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        heard.append(value)

    async def log(level: str, data: object, logger: str | None) -> None:
        heard.append(0)

    with pytest.raises(UpstreamError) as ended:
        await call_tool(target, "slow_count", {"n": 300, "delay": 0}, on_progress=progress, on_log=log)

    assert ended.value.message == (
        f"Upstream {target.label} sent this call more than {BURST} messages at once (then {PER_SECOND} "
        "a second); the call was ended. Calls to it pause for 30 s."
    )
    assert len(heard) <= BURST  # nothing past the budget was parsed, let alone relayed
    await paused(target, 0.5)
    with pytest.raises(UpstreamError) as refused:
        await call_tool(target, "echo", {"message": "again"})
    assert refused.value.message.startswith(f"Upstream {target.label} is unavailable; retry after ")


async def test_a_legacy_sessions_get_stream_flooded_pauses_the_upstream(legacy_upstream):
    target = target_for(legacy_upstream, mode="legacy")
    assert (await call_tool(target, "echo", {"message": "hi"}))["structuredContent"] == {"echo": "hi"}
    # The flood comes on the session's GET stream, which the SDK client opens beside the session; the
    # call's own reply carries none of it, so the call itself answers.
    with pytest.raises(UpstreamUnavailable) as refused:
        async with asyncio.timeout(5):
            while True:
                await call_tool(target, "shout", {"n": 3 * BURST})
    assert refused.value.message.startswith(f"Upstream {target.label} is unavailable; retry after ")
    assert breaker.state(target.upstream_key) == "open"


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_a_change_watch_flooded_ends_in_words_and_pauses_the_upstream(era, request):
    server = request.getfixturevalue("legacy_upstream" if era == "legacy" else "modern_upstream")
    target = target_for(server)
    changes: list[str] = []
    ready = asyncio.Event()
    watching = asyncio.create_task(watch(target, changes.append, on_ready=lambda kinds: ready.set()))
    try:
        async with asyncio.timeout(10):
            await ready.wait()
        shouter = target_for(server, headers=(("x-caller", "another"),))  # a connection of its own
        await call_tool(shouter, "shout", {"n": 3 * BURST})
        with pytest.raises(UpstreamError) as ended:
            async with asyncio.timeout(10):
                await watching
    finally:
        watching.cancel()
    assert ended.value.message == (
        f"Upstream {target.label} sent more than {BURST} messages at once (then {PER_SECOND} a second) "
        "on its change stream; the stream was closed."
    )
    assert len(changes) <= BURST
    assert breaker.state(target.upstream_key) == "open"
