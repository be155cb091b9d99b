"""The breaker: consecutive failures to reach an upstream stop calls to it for a while, then one call probes."""

from __future__ import annotations

import asyncio
import time

import anyio
import pytest

from mcp_app.federation import UpstreamError, UpstreamUnavailable, breaker, call_tool
from tests.federation.support import target_for

OPEN_SECONDS = 1


@pytest.fixture(autouse=True)
def _breaker(settings) -> None:
    settings.MCP_UPSTREAM_BREAKER_FAILURES = 2
    settings.MCP_UPSTREAM_BREAKER_SECONDS = OPEN_SECONDS


def era_server(start_upstream, era: str):
    """An upstream of ``era`` not started yet: its port refuses connections until `.start()`."""
    return start_upstream(False, stateless=era == "2026-07-28", legacy_only=era == "legacy")


async def open_breaker(server, target) -> float:
    """Fail twice to reach ``server`` (stopped); return when the breaker opened."""
    server.stop()
    for _ in range(2):
        with pytest.raises(UpstreamUnavailable) as caught:
            await call_tool(target, "echo", {"message": "x"})
        assert caught.value.message == f"Could not connect to upstream 127.0.0.1:{server.port}."
    return time.monotonic()


async def until_half_open(opened: float) -> None:
    with anyio.fail_after(OPEN_SECONDS + 5):
        while time.monotonic() < opened + OPEN_SECONDS + 0.05:
            await anyio.sleep(0.05)


async def test_an_open_breaker_fails_fast_without_trying_the_upstream(start_upstream, era, settings):
    # Open long enough to start the upstream meanwhile.
    settings.MCP_UPSTREAM_BREAKER_SECONDS = 60
    server = era_server(start_upstream, era)
    target = target_for(server)
    await open_breaker(server, target)
    server.start()

    began = time.monotonic()
    with pytest.raises(UpstreamUnavailable) as caught:
        await call_tool(target, "echo", {"message": "x"})

    assert time.monotonic() - began < 0.5
    assert caught.value.message.startswith(f"Upstream 127.0.0.1:{server.port} is unavailable; retry after ")
    assert 50 <= caught.value.retry_after <= 60
    assert caught.value.message.endswith(f" {caught.value.retry_after} s.")
    assert server.stats()["methods"] == {}


async def test_after_the_open_time_a_successful_probe_closes_it(start_upstream, era):
    server = era_server(start_upstream, era)
    target = target_for(server)
    opened = await open_breaker(server, target)
    server.start()
    await until_half_open(opened)

    first = await call_tool(target, "echo", {"message": "probe"})
    second = await call_tool(target, "echo", {"message": "closed"})

    assert first["structuredContent"] == {"echo": "probe"}
    assert second["structuredContent"] == {"echo": "closed"}


async def test_while_the_probe_runs_other_calls_fail_fast(start_upstream, era):
    server = era_server(start_upstream, era)
    target = target_for(server)
    opened = await open_breaker(server, target)
    server.start()
    await until_half_open(opened)
    started = asyncio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        started.set()

    probe = asyncio.create_task(
        call_tool(target, "slow_count", {"n": 10, "delay": 0.05}, on_progress=on_progress)
    )
    async with asyncio.timeout(10):
        await started.wait()
    with pytest.raises(UpstreamUnavailable) as caught:
        await call_tool(target, "echo", {"message": "meanwhile"})

    assert caught.value.message == f"Upstream 127.0.0.1:{server.port} is unavailable; retry after 1 s."
    assert (await asyncio.wait_for(probe, 10))["content"][0]["text"] == "counted to 10"
    assert (await call_tool(target, "echo", {"message": "after"}))["structuredContent"] == {"echo": "after"}


async def test_a_failed_probe_opens_it_again(start_upstream, era):
    server = era_server(start_upstream, era)
    target = target_for(server)
    opened = await open_breaker(server, target)
    await until_half_open(opened)

    with pytest.raises(UpstreamUnavailable) as probe:
        await call_tool(target, "echo", {"message": "probe"})
    with pytest.raises(UpstreamUnavailable) as after:
        await call_tool(target, "echo", {"message": "again"})

    assert probe.value.message == f"Could not connect to upstream 127.0.0.1:{server.port}."
    assert after.value.message == f"Upstream 127.0.0.1:{server.port} is unavailable; retry after 1 s."


async def test_slow_or_failing_tools_do_not_open_it(upstream):
    target = target_for(upstream, timeout_seconds=0.5)
    for _ in range(3):
        with pytest.raises(UpstreamError) as caught:
            await call_tool(target, "hang", {})
        assert not isinstance(caught.value, UpstreamUnavailable)
        assert (await call_tool(target, "fail", {}))["isError"] is True

    assert (await call_tool(target, "echo", {"message": "still"}))["structuredContent"] == {"echo": "still"}


async def test_the_breaker_is_per_upstream(start_upstream, legacy_upstream):
    dead = start_upstream(False, stateless=True)
    await open_breaker(dead, target_for(dead))

    result = await call_tool(target_for(legacy_upstream), "echo", {"message": "other"})

    assert result["structuredContent"] == {"echo": "other"}


async def test_a_call_begun_before_a_trip_does_not_close_the_breaker_when_it_succeeds(upstream):
    target = target_for(upstream)
    running = asyncio.create_task(call_tool(target, "slow_count", {"n": 3, "delay": 0.1}))
    await asyncio.sleep(0.1)
    breaker.trip(target)  # what a flood proved meanwhile (AMB-188, AMB-195)
    result = await asyncio.wait_for(running, 10)
    assert result["content"][0]["text"] == "counted to 3"
    assert breaker.state(target.upstream_key) == "open"  # only its probe may close it
