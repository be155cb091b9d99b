"""Connections are kept per pool key and reused, re-created after an upstream restart, bounded, closed when idle."""

from __future__ import annotations

import asyncio
import gc
import warnings

import anyio
import pytest

from mcp_app import federation
from mcp_app.federation import UpstreamUnavailable, breaker, call_tool, discover, pool
from tests.federation.support import target_for

HANDSHAKES = {"2026-07-28": "server/discover", "legacy": "initialize"}


async def test_calls_reuse_one_connection(start_upstream, era):
    server = start_upstream(stateless=era == "2026-07-28", legacy_only=era == "legacy")
    target = target_for(server)

    for i in range(5):
        await call_tool(target, "echo", {"message": str(i)})
    await discover(target)

    stats = server.stats()
    assert stats["methods"][HANDSHAKES[era]] == 1
    assert stats["methods"]["tools/call"] == 5
    assert len(stats["sessions"]) == (1 if era == "legacy" else 0)


async def test_two_callers_never_share_a_session(legacy_upstream):
    before = set(legacy_upstream.stats()["sessions"])

    await call_tool(target_for(legacy_upstream, identity="alice"), "echo", {"message": "a"})
    await call_tool(target_for(legacy_upstream, identity="bob"), "echo", {"message": "b"})
    await call_tool(target_for(legacy_upstream, identity="alice"), "echo", {"message": "a"})

    assert len(set(legacy_upstream.stats()["sessions"]) - before) == 2


async def test_other_credentials_get_another_session(legacy_upstream):
    before = set(legacy_upstream.stats()["sessions"])

    await call_tool(target_for(legacy_upstream, headers=(("X-Key", "one"),)), "echo", {"message": "a"})
    await call_tool(target_for(legacy_upstream, headers=(("X-Key", "two"),)), "echo", {"message": "b"})

    assert len(set(legacy_upstream.stats()["sessions"]) - before) == 2


async def test_the_next_call_after_an_upstream_restart_works(start_upstream, era):
    server = start_upstream(stateless=era == "2026-07-28", legacy_only=era == "legacy")
    target = target_for(server)
    await call_tool(target, "echo", {"message": "before"})

    server.restart()
    result = await call_tool(target, "slow_count", {"n": 1, "delay": 0.01, "run": "after-restart"})

    assert result["content"][0]["text"] == "counted to 1"
    stats = server.stats()
    assert stats["completed"] == ["after-restart"]
    # A new legacy session on the new process; a 2026-07-28 upstream needs no handshake again.
    assert stats["methods"].get(HANDSHAKES[era], 0) == (1 if era == "legacy" else 0)


async def test_a_call_the_upstream_died_during_is_not_run_again(start_upstream, era):
    server = start_upstream(stateless=era == "2026-07-28", legacy_only=era == "legacy")
    target = target_for(server)
    # A kept connection: a call on a fresh one is never sent twice anyway.
    await call_tool(target, "echo", {"message": "warm"})
    started = asyncio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        started.set()

    call = asyncio.create_task(
        call_tool(target, "slow_count", {"n": 100, "delay": 0.05, "run": "dies"}, on_progress=on_progress)
    )
    async with asyncio.timeout(10):
        await started.wait()
    server.stop()
    with pytest.raises(UpstreamUnavailable) as caught:
        await asyncio.wait_for(call, 10)
    server.start()

    assert caught.value.message == f"The connection to upstream 127.0.0.1:{server.port} was lost."
    await call_tool(target, "echo", {"message": "later"})
    assert server.stats()["methods"].get("tools/call") == 1


async def test_past_the_bound_a_new_caller_waits_then_gets_a_clear_error(legacy_upstream, settings):
    settings.MCP_UPSTREAM_MAX_SESSIONS = 1
    settings.MCP_UPSTREAM_POOL_WAIT_SECONDS = 1
    started = asyncio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        started.set()

    busy = asyncio.create_task(
        call_tool(
            target_for(legacy_upstream, identity="alice"),
            "slow_count",
            {"n": 100, "delay": 0.05},
            on_progress=on_progress,
        )
    )
    async with asyncio.timeout(10):
        await started.wait()

    with pytest.raises(UpstreamUnavailable) as caught:
        await call_tool(target_for(legacy_upstream, identity="bob"), "echo", {"message": "b"})

    assert caught.value.message == (
        f"Upstream 127.0.0.1:{legacy_upstream.port} has all its 1 connections busy; try again shortly."
    )
    assert caught.value.retry_after == 1
    # Our own bound is not the upstream failing: the breaker does not count it.
    assert getattr(breaker._STATES.get((1, legacy_upstream.port)), "failures", 0) == 0
    busy.cancel()
    with pytest.raises(asyncio.CancelledError):
        await busy


async def test_past_the_bound_an_idle_connection_gives_way(legacy_upstream, settings):
    settings.MCP_UPSTREAM_MAX_SESSIONS = 1
    deletes = legacy_upstream.stats()["deletes"]

    await call_tool(target_for(legacy_upstream, identity="alice"), "echo", {"message": "a"})
    result = await call_tool(target_for(legacy_upstream, identity="bob"), "echo", {"message": "b"})

    assert result["structuredContent"] == {"echo": "b"}
    the_pool = pool.current()
    assert [c.target.identity for c in the_pool.connections.values()] == ["bob"]
    with anyio.fail_after(10):
        while legacy_upstream.stats()["deletes"] == deletes:
            await anyio.sleep(0.05)


async def test_an_idle_connection_closes_itself(upstream, era, settings):
    settings.MCP_UPSTREAM_IDLE_SECONDS = 1
    deletes = upstream.stats()["deletes"]
    await call_tool(target_for(upstream), "echo", {"message": "once"})
    the_pool = pool.current()
    (connection,) = the_pool.connections.values()

    with anyio.fail_after(10):
        await connection.task

    assert the_pool.connections == {}
    if era == "legacy":
        assert upstream.stats()["deletes"] == deletes + 1


async def test_close_all_leaves_no_task_and_no_warning(upstream):
    for identity in ("a", "b", "c"):
        await call_tool(target_for(upstream, identity=identity), "echo", {"message": identity})
    tasks = [c.task for c in pool.current().connections.values()]
    assert len(tasks) == 3

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await federation.close_all()
        gc.collect()

    assert all(task.done() for task in tasks)
    assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]


async def test_past_the_bound_a_caller_gets_the_connection_that_frees_while_it_waits(
    legacy_upstream, settings
):
    settings.MCP_UPSTREAM_MAX_SESSIONS = 1
    settings.MCP_UPSTREAM_POOL_WAIT_SECONDS = 10
    started = asyncio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        started.set()

    busy = asyncio.create_task(
        call_tool(
            target_for(legacy_upstream, identity="alice"),
            "slow_count",
            {"n": 10, "delay": 0.05},
            on_progress=on_progress,
        )
    )
    async with asyncio.timeout(10):
        await started.wait()

    result = await call_tool(target_for(legacy_upstream, identity="bob"), "echo", {"message": "b"})

    assert busy.done()
    assert (await busy)["content"][0]["text"] == "counted to 10"
    assert result["structuredContent"] == {"echo": "b"}


async def test_a_call_cancelled_on_a_shared_modern_client_leaves_the_other_calls_on_it_to_finish(modern_upstream):
    # One 2026-07-28 client serves every call of its key. Cancelling one call retires the client (its
    # HTTP exchange was dropped mid-reply) but must not cut the replies the others are still reading.
    target = target_for(modern_upstream)
    steps: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        steps.append(value)

    counting = asyncio.create_task(
        call_tool(target, "slow_count", {"n": 20, "delay": 0.05, "run": "shared-count"}, on_progress=on_progress)
    )
    hanging = asyncio.create_task(call_tool(target, "hang", {"run": "shared-hang"}))
    with anyio.fail_after(10):
        while len(steps) < 3:
            await asyncio.sleep(0.02)
    discovers = modern_upstream.stats()["methods"]["server/discover"]
    hanging.cancel()
    with pytest.raises(asyncio.CancelledError):
        await hanging

    result = await counting
    assert result["content"][0]["text"] == "counted to 20" and steps[-1] == 20
    await call_tool(target, "echo", {"message": "next"})  # on a new client: the retired one closed
    assert modern_upstream.stats()["methods"]["server/discover"] == discovers + 1
