"""Cancelling the caller cancels the upstream call; an upstream that does not answer times out clearly."""

from __future__ import annotations

import asyncio
import time

import pytest

from mcp_app.federation import UpstreamError, UpstreamUnavailable, call_tool
from tests.federation.support import target_for, upstream_sees


async def test_cancelling_the_caller_cancels_the_upstream_call(upstream, era):
    run = f"cancel-{era}"
    started = asyncio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        started.set()

    call = asyncio.create_task(
        call_tool(
            target_for(upstream), "slow_count", {"n": 200, "delay": 0.05, "run": run}, on_progress=on_progress
        )
    )
    async with asyncio.timeout(10):
        await started.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call

    await upstream_sees(upstream, "cancelled", run)
    assert run not in upstream.stats()["completed"]


async def test_a_call_still_works_on_the_connection_after_a_cancellation(upstream, era):
    target = target_for(upstream)
    call = asyncio.create_task(call_tool(target, "hang", {"run": f"before-{era}"}))
    await upstream_sees(upstream, "methods", "tools/call")
    await asyncio.sleep(0.2)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call

    result = await call_tool(target, "echo", {"message": "after"})

    assert result["structuredContent"] == {"echo": "after"}


async def test_an_upstream_that_hangs_fails_after_the_timeout_and_is_cancelled(upstream, era):
    run = f"hang-{era}"
    target = target_for(upstream, timeout_seconds=1.0)
    await call_tool(target, "echo", {"message": "warm"})

    began = time.monotonic()
    with pytest.raises(UpstreamError) as caught:
        await call_tool(target, "hang", {"run": run})
    elapsed = time.monotonic() - began

    assert not isinstance(caught.value, UpstreamUnavailable)
    assert (
        caught.value.message
        == f"Upstream 127.0.0.1:{upstream.port} did not answer the call within 1 seconds."
    )
    assert 0.9 <= elapsed < 3.0
    await upstream_sees(upstream, "cancelled", run)
