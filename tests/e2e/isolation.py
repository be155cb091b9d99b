"""Another tenant's latency while one tenant's owner, or its clients, do something heavy (issue 32 §3):
`isolated` measures the other tenant's `greet` through the official SDK client, idle and while the work
runs, and holds its p99 during the work within RATIO of its idle p99 (a ratio, never a number of
seconds: the machine may be busy with other tests). Used by tests/e2e/test_owner_isolation.py,
test_guardrails.py and test_quotas.py."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any, TypeVar

from tests.e2e.helpers import greet_latencies, mcp_client

T = TypeVar("T")

# Between two of the other tenant's calls: under its tenant's rate limit (1,200 calls a minute).
PACE = 0.05
# The other tenant's p99 while the owner's work runs stays within this many times its idle p99.
RATIO = 3.0
# Below this the idle p99 is noise (a scheduler tick on a busy 2-core machine), not a latency to
# multiply: the ratio is taken of at least this much. Quiet, the paced idle p99 is 7-11 ms; at 15 ms
# an import run in the serving process (p99 40 ms beside 8.5 ms idle) passed by the floor alone.
NOISE_FLOOR = 0.010


def quiet_tenant_code(slug: str) -> str:
    """`manage.py shell` code making the other tenant: public, with the `greet` whose latency is measured
    (`Tool` and `Tenant` imported)."""
    return (
        f"q = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        "Tool.objects.create(tenant=q, name='greet', handler='template', handler_config={'text': 'Hello, {{ name }}!'})\n"
    )


# A measurement over the ratio is taken again with fresh work, this many times in all (see `isolated`).
ATTEMPTS = 3


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98]


async def latencies_while(url: str, work: Awaitable[Any], minimum: int = 40) -> tuple[list[float], Any]:
    """The other tenant's `greet` latencies, one call after another, for as long as `work` runs (and at
    least `minimum` calls); `work`'s outcome."""
    task = asyncio.ensure_future(work)
    taken: list[float] = []
    async with mcp_client(url, mode="auto") as client:
        await client.call_tool("greet", {"name": "warm"})
        while not task.done() or len(taken) < minimum:
            started = time.perf_counter()
            result = await client.call_tool("greet", {"name": "x"})
            taken.append(time.perf_counter() - started)
            assert result.content[0].text == "Hello, x!"
            await asyncio.sleep(PACE)
    return taken, await task


Afterwards = Callable[[], Awaitable[None]]


async def isolated(
    url: str,
    what: str,
    prepare: Callable[[AsyncExitStack], Awaitable[tuple[Awaitable[T], Afterwards | None]]],
    ratio: float = RATIO,
) -> T:
    """The other tenant's `greet` p99 while the owner's work runs stays within `ratio` (RATIO unless a
    test says why not) of its idle p99; the work's outcome.

    Idle is measured before the work and again after it, the larger taken, the second time over as
    many calls as were made during it (at most 200; the p99 of 40-150 calls is nearly their maximum, and the larger
    sample would otherwise have the larger maximum), paced as they were. CI's other test workers load this 2-core machine
    unevenly: one scheduler hiccup sets such a maximum (seen: 158 ms beside a median of 13 ms). So a
    measurement over the ratio is taken again, with fresh work, up to ATTEMPTS times: a real slowdown
    (the self-check on the serving loop: 3,000x) fails every one.

    `prepare` sets up one attempt (entering into the stack what must stay open until its check: a
    client's session is entered and left in this task) and returns the work, to run while measured,
    and that check, run after the measurement so that its own requests are not measured."""
    before = await greet_latencies(url, 60, PACE)
    for number in range(1, ATTEMPTS + 1):
        async with AsyncExitStack() as stack:
            work, afterwards = await prepare(stack)
            began = time.perf_counter()
            during, outcome = await latencies_while(url, work)
            seconds = time.perf_counter() - began
            if afterwards is not None:
                await afterwards()
        after = await greet_latencies(url, min(max(60, len(during)), 200), PACE)
        quiet, busy = max(p99(before), p99(after)), p99(during)
        print(
            f"{what} ({seconds:.1f} s, attempt {number}): idle p99 {p99(before) * 1000:.1f} ms before, "
            f"{p99(after) * 1000:.1f} ms after; during p99 {busy * 1000:.1f} ms ({len(during)} calls, "
            f"median {statistics.median(during) * 1000:.1f} ms), ratio {busy / quiet:.2f}"
        )
        if busy <= ratio * max(quiet, NOISE_FLOOR):
            return outcome
        before = after
    raise AssertionError(
        f"{what}: the other tenant's p99 exceeded {ratio:g}x its idle p99 in {ATTEMPTS} attempts (above)"
    )
