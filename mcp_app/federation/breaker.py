"""A circuit breaker per upstream: N consecutive connection failures open it for T seconds.

Closed: calls go through. Open (after ``MCP_UPSTREAM_BREAKER_FAILURES`` consecutive failures to reach
the upstream): calls fail at once with "upstream X is unavailable; retry after N s". After
``MCP_UPSTREAM_BREAKER_SECONDS`` it is half-open: one call goes through as a probe (the others still
fail fast); its success closes the breaker, its failure opens it again. Only unavailability counts: an
upstream that answers with an error or a tool that is slow is reachable. State is per serving process
(each process learns on its own, as each holds its own connections).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from django.conf import settings

from mcp_app.federation.errors import UpstreamUnavailable
from mcp_app.federation.target import Target


@dataclass
class _State:
    failures: int = 0
    open_until: float = 0.0
    probing: bool = False


_STATES: dict[tuple[int, int], _State] = {}

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"


def state(upstream_key: tuple[int, int]) -> str:
    """The breaker's state for one upstream in this process: closed, open or half_open (probe allowed)."""
    found = _STATES.get(upstream_key)
    if found is None or found.failures < settings.MCP_UPSTREAM_BREAKER_FAILURES:
        return CLOSED
    return OPEN if found.open_until > time.monotonic() else HALF_OPEN


def before_call(target: Target) -> bool:
    """Let a call through (True when it is the half-open probe) or raise UpstreamUnavailable."""
    state = _STATES.get(target.upstream_key)
    if state is None or state.failures < settings.MCP_UPSTREAM_BREAKER_FAILURES:
        return False
    wait = state.open_until - time.monotonic()
    if wait > 0 or state.probing:
        retry = max(1, math.ceil(wait)) if wait > 0 else 1
        raise UpstreamUnavailable(
            f"Upstream {target.label} is unavailable; retry after {retry} s.", retry_after=retry
        )
    state.probing = True
    return True


def settle(target: Target, reached: bool | None, probe: bool) -> None:
    """Record a call's outcome: reached the upstream (True), could not (False), unknown (None: cancelled)."""
    state = _STATES.setdefault(target.upstream_key, _State())
    if probe:
        state.probing = False
    if reached is None:
        return
    if reached:
        if not probe and state.open_until > time.monotonic():
            # Opened while this call ran (a trip, or others' failures): only the probe may close it,
            # or a flood proved on one stream would be forgiven by a call that began before it.
            return
        state.failures = 0
        state.open_until = 0.0
        return
    state.failures += 1
    if state.failures >= settings.MCP_UPSTREAM_BREAKER_FAILURES:
        state.open_until = time.monotonic() + settings.MCP_UPSTREAM_BREAKER_SECONDS


def trip(target: Target) -> None:
    """Open the breaker now, whatever the count: the upstream misbehaved in a way one call proves."""
    state = _STATES.setdefault(target.upstream_key, _State())
    state.failures = max(state.failures, settings.MCP_UPSTREAM_BREAKER_FAILURES)
    state.open_until = time.monotonic() + settings.MCP_UPSTREAM_BREAKER_SECONDS


def reset() -> None:
    """Forget every upstream's state (tests; a process that wants a clean slate)."""
    _STATES.clear()
