"""A hostile tenant's clients, run in a process of their own, and another tenant's latency measured
while they call (tests/e2e/test_upstream_isolation.py, tests/e2e/test_guardrails.py).

Their SDK clients' own work must not be counted as the other tenant's latency, as it would be on one
event loop. Imports nothing of Django (a spawned process has no settings).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import time
from typing import Any

from mcp.shared.exceptions import MCPError

from tests.e2e.helpers import greet_latencies as latencies
from tests.e2e.helpers import mcp_client
from tests.e2e.servers import DaphneServer

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


async def other_tenants_latency_while(
    server: DaphneServer, other: str, hostile: str, tool: str, arguments: dict, pause: float
) -> tuple[float, float, list[tuple[float, str]]]:
    """The other tenant's idle p50, its p50 while the hostile tenant's clients call `tool`, and their calls."""
    idle = statistics.median(await latencies(server.mcp_url(other), 40))
    processes = multiprocessing.get_context("spawn")
    started, stop, results = processes.Event(), processes.Event(), processes.Queue()
    attacker = processes.Process(
        target=attack,
        args=(server.mcp_url(hostile), tool, arguments, pause, started, stop, results),
    )
    attacker.start()
    try:
        assert await asyncio.to_thread(started.wait, 60), "the hostile tenant's clients never started"
        await asyncio.sleep(1.0)  # every call is under way upstream
        during = statistics.median(await latencies(server.mcp_url(other), 40))
        stop.set()
        ended = await asyncio.to_thread(results.get, True, 60)
    finally:
        stop.set()
        await asyncio.to_thread(attacker.join, 30)
        if attacker.is_alive():
            attacker.kill()
    return idle, during, ended


def within_twice_idle(idle: float, during: float) -> None:
    # The other tenant's median stays within 2x its idle median, with a floor of 40 ms: on a slow 2-core
    # machine the attack's own processes (the upstream flooding, its clients) and the suite's other
    # workers share the cores with Daphne (a run with other tests beside it saw 19 ms idle, 64 ms during:
    # 25 ms was too tight a floor); a flood parsed without its budget costs seconds, not this.
    print(f"the other tenant's p50: idle {idle * 1000:.1f} ms, during {during * 1000:.1f} ms")
    assert during <= 2 * max(idle, 0.040), f"idle p50 {idle * 1000:.1f} ms, during {during * 1000:.1f} ms"


async def attacking(
    url: str, tool: str, arguments: dict[str, Any], seconds: float, pause: float = 0.0
) -> list[tuple[float, str]]:
    """The hostile tenant's clients calling `tool` for `seconds` once all are calling, from a process of
    their own: their calls' (seconds, text). The work `tests/e2e/isolation.isolated` measures beside."""
    return await apart(attack, (url, tool, arguments, pause), seconds)


async def apart(target: Any, args: tuple[Any, ...], seconds: float) -> Any:
    """`target(*args, started, stop, results)` in a spawned process of its own (imports nothing of Django),
    for `seconds` once it set `started`; what it put in `results` once `stop` was set."""
    processes = multiprocessing.get_context("spawn")
    started, stop, results = processes.Event(), processes.Event(), processes.Queue()
    attacker = processes.Process(target=target, args=(*args, started, stop, results))
    attacker.start()
    try:
        assert await asyncio.to_thread(started.wait, 60), "the hostile clients never started"
        await asyncio.sleep(seconds)
        stop.set()
        return await asyncio.to_thread(results.get, True, 60)
    finally:
        stop.set()
        await asyncio.to_thread(attacker.join, 30)
        if attacker.is_alive():
            attacker.kill()
