"""A serving process's in-memory upstream health, built by hand: what `call_stats.snapshot()` would return
after the given exchanges, so a test can play several processes' flushes (AMB-185)."""

from __future__ import annotations

from bisect import bisect_left

from mcp_app.federation import breaker, call_stats


def seen(
    calls: int = 0,
    *,
    latencies_ms: tuple[float, ...] = (),
    last_success: float | None = None,
    circuit: str = breaker.CLOSED,
    **failures: int,
) -> call_stats.Health:
    """`calls` exchanges, those answered taking `latencies_ms`, failures by kind (unavailable=2, ...)."""
    counted = call_stats.Health(calls=calls, last_success=last_success, circuit=circuit)
    counted.failures.update(failures)
    for ms in latencies_ms:
        counted.duration_ms += ms
        counted.histogram[bisect_left(call_stats.BOUNDS_MS, ms)] += 1
    return counted
