"""Each upstream's health as this process saw it: calls, failures by kind, last success, latency, circuit.

Recorded by the client at the end of every exchange (`call_tool`, `discover`) in process memory: a
clock read, a bisect and a few additions under an uncontended lock, never I/O. `snapshot()` copies it
for readers (/metrics, readiness, the admin), with the breaker's state. Keyed by `Target.upstream_key`
(tenant id, upstream id): a hostile tenant's upstreams are bounded by its rows, and the exporters cap
what they label (docs/decisions/federation.md, AMB-173).
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from dataclasses import dataclass, field

from mcp_app.federation import breaker

# Failure kinds. unavailable: not reached (connect, TLS, credentials refused, 5xx, lost, breaker open);
# error: it answered with an error; timeout: no answer within the target's deadline; busy: our own
# pool bound (not the upstream's fault, not counted by the breaker, but a caller saw it).
UNAVAILABLE, ERROR, TIMEOUT, BUSY = "unavailable", "error", "timeout", "busy"
KINDS = (UNAVAILABLE, ERROR, TIMEOUT, BUSY)
# Latency buckets in milliseconds (an upstream is a network hop away: no sub-millisecond buckets).
BOUNDS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000)


@dataclass(slots=True)
class Health:
    """What one upstream's exchanges came to in this process since it started."""

    calls: int = 0
    failures: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    last_success: float | None = None  # wall-clock seconds (time.time())
    last_failure: float | None = None
    last_failure_kind: str = ""
    # Latency of the exchanges the upstream answered (a result or an error): a refusal by our breaker
    # in no time would only hide how slow the upstream is.
    duration_ms: float = 0.0
    histogram: list[int] = field(default_factory=lambda: [0] * (len(BOUNDS_MS) + 1))
    circuit: str = breaker.CLOSED

    @property
    def failed(self) -> int:
        return sum(self.failures.values())

    @property
    def error_rate(self) -> float | None:
        """Failed exchanges over all, 0..1; None before the first."""
        return self.failed / self.calls if self.calls else None

    def percentile(self, q: float) -> float | None:
        """The q-quantile (0..1) of the latency in milliseconds, interpolated in its bucket; None without one."""
        total = sum(self.histogram)
        if total == 0:
            return None
        rank, seen = q * total, 0
        for i, n in enumerate(self.histogram):
            if n and seen + n >= rank:
                if i >= len(BOUNDS_MS):
                    return float(BOUNDS_MS[-1])
                low = 0.0 if i == 0 else float(BOUNDS_MS[i - 1])
                return low + (BOUNDS_MS[i] - low) * max(rank - seen, 0) / n
            seen += n
        return float(BOUNDS_MS[-1])

    def copy(self) -> Health:
        return Health(
            self.calls,
            dict(self.failures),
            self.last_success,
            self.last_failure,
            self.last_failure_kind,
            self.duration_ms,
            list(self.histogram),
            self.circuit,
        )


_LOCK = threading.Lock()  # several event loops (threads) may call out; readers copy under it
_HEALTH: dict[tuple[int, int], Health] = {}


def record(upstream_key: tuple[int, int], seconds: float, failure: str | None) -> None:
    """Count one exchange: ``failure`` one of KINDS, or None when the upstream gave a result."""
    now = time.time()
    ms = seconds * 1000.0
    with _LOCK:
        health = _HEALTH.get(upstream_key)
        if health is None:
            health = _HEALTH[upstream_key] = Health()
        health.calls += 1
        if failure is None:
            health.last_success = now
        else:
            health.failures[failure] += 1
            health.last_failure = now
            health.last_failure_kind = failure
        if failure in (None, ERROR, TIMEOUT):
            health.duration_ms += ms
            health.histogram[bisect_left(BOUNDS_MS, ms)] += 1


def snapshot() -> dict[tuple[int, int], Health]:
    """A copy of every upstream's health in this process, each with its breaker's state now."""
    with _LOCK:
        copies = {key: health.copy() for key, health in _HEALTH.items()}
    for key, health in copies.items():
        health.circuit = breaker.state(key)
    return copies


def of(upstream_key: tuple[int, int]) -> Health | None:
    """One upstream's health in this process (None when this process never called it)."""
    with _LOCK:
        found = _HEALTH.get(upstream_key)
        copy = found.copy() if found is not None else None
    if copy is not None:
        copy.circuit = breaker.state(upstream_key)
    return copy


def reset() -> None:
    """Forget every upstream's health (tests)."""
    with _LOCK:
        _HEALTH.clear()
