"""Progress and log messages of an upstream call reach the caller's callbacks while the call runs."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp_app.federation import call_tool
from tests.federation.support import target_for


async def test_progress_and_logs_arrive_while_the_call_runs(upstream):
    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[tuple[str, Any, str | None]] = []
    first_progress = asyncio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))
        first_progress.set()

    async def on_log(level: str, data: Any, logger: str | None) -> None:
        logs.append((level, data, logger))

    call = asyncio.create_task(
        call_tool(
            target_for(upstream),
            "slow_count",
            {"n": 4, "delay": 0.2},
            on_progress=on_progress,
            on_log=on_log,
        )
    )
    async with asyncio.timeout(10):
        await first_progress.wait()
    assert not call.done()
    result = await asyncio.wait_for(call, 10)

    assert result["content"][0]["text"] == "counted to 4"
    assert progress == [(float(i), 4.0, f"step {i}") for i in range(1, 5)]
    assert logs == [("info", f"counted {i}", "counter") for i in range(1, 5)]


async def test_concurrent_calls_on_one_connection_each_get_their_own_notifications(upstream):
    target = target_for(upstream)
    seen: dict[str, list[Any]] = {"a": [], "b": []}

    def collector(label: str) -> Any:
        async def on_log(level: str, data: Any, logger: str | None) -> None:
            seen[label].append(data)

        return on_log

    async def progress_of(label: str) -> Any:
        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            seen[label].append(value)

        return on_progress

    await call_tool(target, "echo", {"message": "warm"})
    a, b = await asyncio.gather(
        call_tool(
            target,
            "slow_count",
            {"n": 3, "delay": 0.05},
            on_log=collector("a"),
            on_progress=await progress_of("a"),
        ),
        call_tool(
            target,
            "slow_count",
            {"n": 2, "delay": 0.07},
            on_log=collector("b"),
            on_progress=await progress_of("b"),
        ),
    )

    assert a["content"][0]["text"] == "counted to 3"
    assert b["content"][0]["text"] == "counted to 2"
    assert sorted(map(str, seen["a"])) == sorted(
        map(str, [1.0, 2.0, 3.0, "counted 1", "counted 2", "counted 3"])
    )
    assert sorted(map(str, seen["b"])) == sorted(map(str, [1.0, 2.0, "counted 1", "counted 2"]))


async def test_a_call_without_callbacks_ignores_the_notifications(upstream):
    result = await call_tool(target_for(upstream), "slow_count", {"n": 2, "delay": 0.01})

    assert result["content"][0]["text"] == "counted to 2"
