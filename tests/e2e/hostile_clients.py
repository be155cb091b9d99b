"""The hostile tenant's clients of tests/e2e/test_upstream_isolation.py, run in a process of their own.

Their SDK clients' own work must not be counted as the other tenant's latency, as it would be on one
event loop. Imports nothing of Django (a spawned process has no settings).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from mcp.shared.exceptions import MCPError

from tests.e2e.helpers import mcp_client

CALLERS = 4


def attack(
    url: str, tool: str, arguments: dict[str, Any], pause: float, started: Any, stop: Any, results: Any
) -> None:
    """Call `tool` (or get `prompt:<name>`, read `resource:<uri>`) from CALLERS sessions, again and again (`pause` seconds apart) until `stop`; set
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
                text = await one_call(client)
                ended.append((time.perf_counter() - began, text))
                await asyncio.sleep(pause)

    async def one_call(client: Any) -> str:
        """The text of a call's result, or of the error a prompts/get or resources/read got."""
        kind, _, name = tool.partition(":")
        try:
            if kind == "prompt":
                return (await client.get_prompt(name, arguments)).messages[0].content.text
            if kind == "resource":
                return (await client.read_resource(name)).contents[0].text
            result = await client.call_tool(tool, arguments, progress_callback=progress)
            return result.content[0].text
        except MCPError as exc:
            return exc.message
        except Exception as exc:  # noqa: BLE001 - reported as a result, so the test sees every call
            return f"{type(exc).__name__}: {exc}"

    async def all_of_them() -> None:
        await asyncio.gather(*(caller() for _ in range(CALLERS)))

    asyncio.run(all_of_them())
    results.put(ended)
