"""The hostile tenant's clients of tests/e2e/test_upstream_isolation.py, run in a process of their own.

Their SDK clients' own work must not be counted as the other tenant's latency, as it would be on one
event loop. Imports nothing of Django (a spawned process has no settings).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.e2e.helpers import mcp_client

CALLERS = 4


def attack(
    url: str, tool: str, arguments: dict[str, Any], pause: float, started: Any, stop: Any, results: Any
) -> None:
    """Call `tool` from CALLERS sessions, again and again (`pause` seconds apart) until `stop`; set
    `started` once every session is open and calling; put each call's (seconds, text) in `results`."""
    ended: list[tuple[float, str]] = []
    calling = 0

    async def progress(value: float, total: float | None, message: str | None) -> None:
        return None  # asked for, so the upstream's progress is relayed to this client

    async def caller() -> None:
        nonlocal calling
        async with mcp_client(url) as client:  # legacy mode: a session
            calling += 1
            if calling == CALLERS:
                started.set()
            while not stop.is_set():
                began = time.perf_counter()
                result = await client.call_tool(tool, arguments, progress_callback=progress)
                ended.append((time.perf_counter() - began, result.content[0].text))
                await asyncio.sleep(pause)

    async def all_of_them() -> None:
        await asyncio.gather(*(caller() for _ in range(CALLERS)))

    asyncio.run(all_of_them())
    results.put(ended)
